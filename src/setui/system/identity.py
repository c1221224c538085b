"""Who is acting: the OS account, who logged in, the SSH client it came from, this host.

The audit log answers "who approved it?", so nothing here is taken from a variable the
person being recorded could set. The account is the process's real uid, looked up in the
password database (never ``$USER``). The login user is the kernel's audit login uid
(``/proc/self/loginuid``): set by PAM at login and kept across ``sudo`` and ``su``, so it
names who is behind a root shell; the session id comes with it. ``SUDO_USER`` is only
believed when the effective uid is 0 (sudo ran) and ``SUDO_UID`` is that account's uid.
The SSH client comes from ``SSH_CONNECTION``, which anyone can set: it is marked
"claimed" unless root's sshd above this process holds a TCP connection with exactly those
addresses and ports (:mod:`setui.system.processes`). An ordinary user cannot look into sshd's
processes, so only a setui run as root (under sudo, say) can confirm it.
"""

from __future__ import annotations

import getpass
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from setui.system.actor import describe_actor
from setui.system.processes import PROC, Connection, address, ssh_connections

__all__ = ["Identity", "account_name", "audit_number"]

_UNSET = 4294967295  # (uid_t)-1: no login uid, no session (a daemon, a container)


def _name(uid: int) -> str | None:
    if os.name != "posix":
        return None
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError, OSError, OverflowError):
        return None  # a uid without a passwd entry (containers)


def account_name(uid: int) -> str:
    """The account's name in the password database, else ``uid N`` (never ``$USER``)."""
    return _name(uid) or f"uid {uid}"


def _account() -> str:
    uid = getattr(os, "getuid", None)
    if uid is not None:
        return account_name(uid())
    try:
        return getpass.getuser()  # Windows: the logon name; no uid to prefer
    except Exception:  # getuser raises OSError/KeyError/ImportError depending on platform
        return "unknown"


def audit_number(path: Path) -> int | None:
    """A process's audit login uid or session id (``/proc/PID/loginuid``, ``sessionid``);
    None when it is unset or cannot be read."""
    try:
        text = path.read_text(encoding="ascii").strip()
        value = int(text)
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return None if value in (_UNSET, -1) or value < 0 else value


def _proc_number(name: str, proc: Path) -> int | None:
    return audit_number(proc / "self" / name)


def _sudo_user(env: Mapping[str, str]) -> str | None:
    """``SUDO_USER``, only when sudo really ran (euid 0) and ``SUDO_UID`` is its uid."""
    geteuid = getattr(os, "geteuid", None)
    if geteuid is None or geteuid() != 0:
        return None
    name, uid = env.get("SUDO_USER", ""), env.get("SUDO_UID", "")
    if not name or not uid.isdigit() or len(uid) > 10:
        return None
    try:
        import pwd

        return name if pwd.getpwnam(name).pw_uid == int(uid) else None
    except (ImportError, KeyError, OSError, ValueError):
        return None


def _ssh(env: Mapping[str, str]) -> tuple[str | None, tuple[str, int, str, int] | None]:
    """The client address from ``SSH_CONNECTION`` (else ``SSH_CLIENT``), and the four-tuple
    when ``SSH_CONNECTION`` gives one."""
    fields = env.get("SSH_CONNECTION", "").split()
    if len(fields) == 4 and fields[1].isdigit() and fields[3].isdigit():
        try:
            return fields[0][:200], (fields[0], int(fields[1]), fields[2], int(fields[3]))
        except ValueError:
            pass
    for var in ("SSH_CONNECTION", "SSH_CLIENT"):
        fields = env.get(var, "").split()
        if fields:
            return fields[0][:200], None
    return None, None


def ssh_confirmed(four: tuple[str, int, str, int], proc: Path = PROC) -> bool:
    """Whether the connection ``SSH_CONNECTION`` names (client address and port, server
    address and port) is one root's sshd above this process holds
    (:func:`setui.system.processes.ssh_connections`)."""
    client, server = address(four[0]), address(four[2])
    if client is None or server is None:
        return False
    return Connection((server, four[3]), (client, four[1])) in ssh_connections(os.getpid(),
                                                                             proc)


def _host() -> str:
    try:
        return socket.gethostname() or "unknown"
    except OSError:
        return "unknown"


@dataclass(frozen=True)
class Identity:
    """The person behind an action, as far as this VM can tell (see the module doc)."""

    user: str
    ssh_client: str | None
    host: str
    sudo_user: str | None = None  # who ran sudo: only when sudo really ran
    login_user: str | None = None  # the audit login uid's account (who logged in)
    session: int | None = None  # the kernel's audit session id
    ssh_claimed: bool = False  # current() sets it: the SSH client is only claimed

    @classmethod
    def current(cls, environ: Mapping[str, str] | None = None,
                proc: Path = PROC) -> Identity:
        env = os.environ if environ is None else environ
        user = _account()
        login_uid = _proc_number("loginuid", proc)
        login_user = None
        if login_uid is not None:
            login_user = account_name(login_uid)
        sudo_user = _sudo_user(env)
        if sudo_user == user:
            sudo_user = None
        client, four = _ssh(env)
        confirmed = four is not None and ssh_confirmed(four, proc)
        return cls(user=user, ssh_client=client, host=_host(), sudo_user=sudo_user,
                   login_user=login_user, session=_proc_number("sessionid", proc),
                   ssh_claimed=client is not None and not confirmed)

    def details(self) -> dict[str, Any]:
        """What the audit record keeps beside user, SSH client and host."""
        out: dict[str, Any] = {}
        if self.sudo_user:
            out["sudo_user"] = self.sudo_user
        if self.login_user and self.login_user != self.user:
            out["login_user"] = self.login_user
        if self.session is not None:
            out["session"] = self.session
        if self.ssh_client and self.ssh_claimed:
            out["ssh_claimed"] = True
        return out

    @property
    def label(self) -> str:
        """The actor exactly as the audit log will record and show it."""
        return describe_actor(self.user, self.ssh_client, self.host, self.details())
