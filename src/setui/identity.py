"""Who is acting: the OS account, the SSH client it came from, and this host.

The audit log answers "who approved it?". On POSIX the account is looked up from the
process's real uid, not from ``$USER`` (which anyone can set); ``sudo`` is noted with the
account that ran it. ``SSH_CONNECTION`` is an environment variable and so only as
trustworthy as the session, but it is what sshd sets and what an auditor expects to see.
"""

from __future__ import annotations

import getpass
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Identity"]


def _account() -> str:
    if os.name == "posix":
        try:
            import pwd

            return pwd.getpwuid(os.getuid()).pw_name
        except (ImportError, KeyError, OSError):
            pass  # a uid without a passwd entry (containers): fall through
    try:
        return getpass.getuser()
    except Exception:  # getuser raises OSError/KeyError/ImportError depending on platform
        uid = getattr(os, "getuid", None)
        return f"uid {uid()}" if uid is not None else "unknown"


def _ssh_client(env: Mapping[str, str]) -> str | None:
    """The client address: the first field of ``SSH_CONNECTION`` (falls back to SSH_CLIENT)."""
    for var in ("SSH_CONNECTION", "SSH_CLIENT"):
        fields = env.get(var, "").split()
        if fields:
            return fields[0][:200]
    return None


def _host() -> str:
    try:
        return socket.gethostname() or "unknown"
    except OSError:
        return "unknown"


@dataclass(frozen=True)
class Identity:
    """The person behind an action, as far as this VM can tell."""

    user: str
    ssh_client: str | None
    host: str
    sudo_user: str | None = None  # the account that ran sudo, when running under sudo

    @classmethod
    def current(cls, environ: Mapping[str, str] | None = None) -> Identity:
        env = os.environ if environ is None else environ
        user = _account()
        sudo_user = env.get("SUDO_USER") or None
        if sudo_user == user:
            sudo_user = None
        return cls(user=user, ssh_client=_ssh_client(env), host=_host(), sudo_user=sudo_user)

    @property
    def label(self) -> str:
        """``alice from 10.1.2.3 on vm-web-0`` (``root (sudo by alice) ...`` under sudo)."""
        who = self.user if not self.sudo_user else f"{self.user} (sudo by {self.sudo_user})"
        if self.ssh_client:
            who += f" from {self.ssh_client}"
        return f"{who} on {self.host}"
