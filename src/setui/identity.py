"""Who is acting: the OS account, who logged in, the SSH client it came from, this host.

The audit log answers "who approved it?", so nothing here is taken from a variable the
person being recorded could set. The account is the process's real uid, looked up in the
password database (never ``$USER``). The login user is the kernel's audit login uid
(``/proc/self/loginuid``): set by PAM at login and kept across ``sudo`` and ``su``, so it
names who is behind a root shell; the session id comes with it. ``SUDO_USER`` is only
believed when the effective uid is 0 (sudo ran) and ``SUDO_UID`` is that account's uid.
The SSH client comes from ``SSH_CONNECTION``, which anyone can set: it is marked
"claimed" unless a TCP connection with exactly those addresses and ports is established
on this host right now (``/proc/net/tcp``).
"""

from __future__ import annotations

import getpass
import ipaddress
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Identity", "account_name", "audit_number", "describe_actor"]

_UNSET = 4294967295  # (uid_t)-1: no login uid, no session (a daemon, a container)
_PROC = Path("/proc")


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


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(text.split("%")[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _proc_endpoint(text: str) -> tuple[object, int] | None:
    """``0100007F:0016`` (or the IPv6 form) from /proc/net/tcp: address and port."""
    try:
        host, port = text.split(":")
        raw = bytes.fromhex(host)
        if len(raw) == 4:
            packed = raw[::-1]
        elif len(raw) == 16:
            packed = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
        else:
            return None
        return _address(socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6,
                                          packed)), int(port, 16)
    except (ValueError, OSError):
        return None


def ssh_confirmed(four: tuple[str, int, str, int], proc: Path = _PROC) -> bool:
    """Whether an established TCP connection from the client to the server address and
    port ``SSH_CONNECTION`` names exists on this host now."""
    client, server = (_address(four[0]), four[1]), (_address(four[2]), four[3])
    if client[0] is None or server[0] is None:
        return False
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text(encoding="ascii").splitlines()[1:]
        except (OSError, UnicodeDecodeError):
            continue
        for line in lines:
            parts = line.split()
            if len(parts) < 4 or parts[3] != "01":  # 01: ESTABLISHED
                continue
            if _proc_endpoint(parts[1]) == server and _proc_endpoint(parts[2]) == client:
                return True
    return False


def _host() -> str:
    try:
        return socket.gethostname() or "unknown"
    except OSError:
        return "unknown"


def describe_actor(user: str, ssh_client: str | None, host: str,
                   details: Mapping[str, Any]) -> str:
    """The actor in words, the same from an Identity (the dialog) and from a stored
    record (``setui audit``): ``root (login alice, sudo by alice, session 7) from
    10.1.2.3 (claimed) on vm-web-0``. The caller escapes what it prints."""
    notes = []
    login = details.get("login_user")
    if login and login != user:
        notes.append(f"login {login}")
    if details.get("sudo_user"):
        notes.append(f"sudo by {details['sudo_user']}")
    if details.get("session") is not None:
        notes.append(f"session {details['session']}")
    who = f"{user} ({', '.join(notes)})" if notes else user
    if ssh_client:
        who += f" from {ssh_client}" + (" (claimed)" if details.get("ssh_claimed") else "")
    return f"{who} on {host}"


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
                proc: Path = _PROC) -> Identity:
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
