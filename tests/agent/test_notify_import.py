"""apprise loads without a warning the operator can do nothing about."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # starts processes: the slow tier (docs/testing.md)


def test_loading_apprise_warns_of_nothing() -> None:
    """On 3.11 and 3.12 apprise imports the standard library's deprecated imghdr; with
    every warning an error, the agent's notifier still loads it (a fresh interpreter:
    apprise may be loaded in this one already)."""
    code = ("from setui.agent.notify import Notifier; "
            "Notifier._apprise(('json://127.0.0.1:9/hook',)); print('loaded')")
    done = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "loaded"
