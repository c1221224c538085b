"""The SETUI_* variables that stand for settings, and how they rank.

Defaults < the config file < the environment < the command line. The environment is
read in three places: the config file's settings (setui.settings.config), and, for a caller with
no config, where the store lives (``SETUI_DATA_DIR``) and where its audit records go
(``SETUI_AUDIT_FORWARD``). Each asks :func:`from_environment`, so a variable means the
same everywhere: set and not empty, it wins; empty is the same as unset.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["VARIABLES", "from_environment"]

# Setting (as in setui.settings.config.Config) -> the variable that sets it.
VARIABLES: Mapping[str, str] = {
    "endpoint": "SETUI_ENDPOINT",
    "api_version": "SETUI_API_VERSION",
    "data_dir": "SETUI_DATA_DIR",
    "audit_forward": "SETUI_AUDIT_FORWARD",
    "prometheus": "SETUI_PROMETHEUS_URL",
    "prometheus_token": "SETUI_PROMETHEUS_TOKEN",
    "prometheus_user": "SETUI_PROMETHEUS_USER",
    "prometheus_password": "SETUI_PROMETHEUS_PASSWORD",
    "socket": "SETUI_SOCKET",
}


def from_environment(setting: str, environ: Mapping[str, str] | None = None) -> str | None:
    """What the environment sets ``setting`` to, which wins over the config file; None
    when its variable is unset or empty."""
    env = os.environ if environ is None else environ
    return env.get(VARIABLES[setting]) or None
