"""Who is on the other end of the socket, from the kernel, and whether they may approve.

A client never says who it is: ``SO_PEERCRED`` gives the pid, uid and gid it had when it
connected, ``SO_PEERGROUPS`` its supplementary groups (Linux 4.13 and later), and the
agent reads that process's audit login uid and session from ``/proc`` itself, right when
the connection is accepted. A pid can be reused once the client exits; reading at once,
and only from a ``/proc/PID`` that still belongs to the client's uid, keeps that window
as small as it can be.

Who may approve (and dismiss, hold, release): root always (it owns the store and the
service; refusing it here would promise what the machine cannot keep), and by default
the members of group ``setui`` by the kernel's gid and groups. ``approvers`` in the
agent's config replaces that group with the users and ``%groups`` it names. Names are
resolved when the agent starts and at each reload (SIGHUP), never per connection.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from setui.system.identity import Identity, account_name, audit_number
from setui.system.processes import ssh_connections

__all__ = ["DEFAULT_GROUP", "Authority", "Credentials", "Peer", "credentials", "read_peer",
           "ssh_origin"]

DEFAULT_GROUP = "setui"
SO_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)  # Linux's number, where Python lacks it
_UCRED = struct.Struct("iII")  # struct ucred: pid_t pid; uid_t uid; gid_t gid
_GROUPS_TRIED = (64, 65536)  # a first guess, then NGROUPS_MAX
_PROC = Path("/proc")


@dataclass(frozen=True)
class Credentials:
    """The kernel's word on a connected client, as of its connect()."""

    pid: int
    uid: int
    gid: int
    groups: tuple[int, ...] | None  # None: the kernel cannot say (before Linux 4.13)

    def in_group(self, gid: int) -> bool:
        return gid == self.gid or gid in (self.groups or ())


def _groups(sock: socket.socket) -> tuple[int, ...] | None:
    for count in _GROUPS_TRIED:
        try:
            raw = sock.getsockopt(socket.SOL_SOCKET, SO_PEERGROUPS, count * 4)
        except OSError as exc:
            if exc.errno == errno.ERANGE:
                continue  # more groups than room: ask again with room for all
            if exc.errno in (errno.ENOPROTOOPT, errno.EINVAL, errno.EOPNOTSUPP):
                return None
            raise
        return struct.unpack(f"{len(raw) // 4}I", raw[:len(raw) // 4 * 4])
    return None


def credentials(sock: socket.socket) -> Credentials:
    """SO_PEERCRED and SO_PEERGROUPS of a connected AF_UNIX socket (either end)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    pid, uid, gid = _UCRED.unpack(raw)
    return Credentials(pid, uid, gid, _groups(sock))


def ssh_origin(pid: int, proc: Path = _PROC) -> str | None:
    """The address the client's SSH session came in from, or None when it is not known.

    Read from the connection root's ``sshd`` above the client holds
    (:func:`setui.system.processes.ssh_connections`), never from an environment variable the
    client could set: the nearest such ancestor's peer address. The agent runs as root, so
    it can read sshd's open files; an ordinary user's agent sees none and says nothing."""
    found = ssh_connections(pid, proc)
    return str(found[0].remote[0]) if found else None


@dataclass(frozen=True)
class Peer:
    """A client: the kernel's credentials and what /proc said about its process."""

    credentials: Credentials
    user: str  # the uid's account
    login_uid: int | None  # the audit login uid: who logged in, kept across sudo and su
    session: int | None
    ssh_origin: str | None

    @property
    def uid(self) -> int:
        return self.credentials.uid

    def identity(self, host: str) -> Identity:
        """The actor of the audit records this client's requests write."""
        login = account_name(self.login_uid) if self.login_uid is not None else None
        return Identity(user=self.user, ssh_client=self.ssh_origin, host=host,
                        login_user=login if login != self.user else None,
                        session=self.session)

    def details(self) -> dict[str, Any]:
        """What the audit record keeps of the kernel's word (beside the identity's)."""
        creds = self.credentials
        return {"api": {"pid": creds.pid, "uid": creds.uid, "gid": creds.gid,
                        "ssh_origin": self.ssh_origin or "unknown"}}


def read_peer(creds: Credentials, proc: Path = _PROC) -> Peer:
    """The peer behind ``creds``. Blocking (the password database may ask the network):
    call it on a thread. Login uid and session are read only from a ``/proc/PID`` owned by
    the client's uid: otherwise the process is gone (its pid perhaps reused)."""
    base = proc / str(creds.pid)
    login_uid = session = None
    try:
        own = creds.pid > 0 and os.stat(base).st_uid == creds.uid
    except OSError:
        own = False
    if own:
        login_uid = audit_number(base / "loginuid")
        session = audit_number(base / "sessionid")
    return Peer(creds, account_name(creds.uid), login_uid, session,
                ssh_origin(creds.pid, proc) if own else None)


def _group_id(name: str) -> int | None:
    try:
        import grp

        return grp.getgrnam(name).gr_gid
    except (ImportError, KeyError, OSError):
        return None


def _user_id(name: str) -> int | None:
    try:
        import pwd

        return pwd.getpwnam(name).pw_uid
    except (ImportError, KeyError, OSError):
        return None


class Authority:
    """Who may change anything through the API (see the module doc). Resolving names
    blocks (the password and group databases): build it on a thread."""

    def __init__(self, approvers: Sequence[str] | None, *, group: str = DEFAULT_GROUP) -> None:
        self.approvers = tuple(approvers) if approvers is not None else None
        self.group = group
        self.uids: set[int] = set()
        self.gids: set[int] = set()
        self.notes: list[str] = []  # names that name nobody, said once at start
        for name in self.approvers if self.approvers is not None else (f"%{group}",):
            if name.startswith("%"):
                gid = _group_id(name[1:])
                if gid is None:
                    self.notes.append(f"there is no group {name[1:]} on this VM")
                else:
                    self.gids.add(gid)
            else:
                uid = _user_id(name)
                if uid is None:
                    self.notes.append(f"there is no user {name} on this VM")
                else:
                    self.uids.add(uid)

    def describe(self) -> str:
        """Who may approve, in words, for the agent's start-up line."""
        if self.approvers is None:
            return f"root and the members of group {self.group}"
        return "root and " + ", ".join(self.approvers) if self.approvers else "root only"

    def why_not(self, creds: Credentials) -> str | None:
        """Why this client may not approve, or None when it may: who may, as this agent
        has it, and what to do, said once (the clients show it as it is)."""
        if creds.uid == 0 or creds.uid in self.uids:
            return None
        if any(creds.in_group(gid) for gid in self.gids):
            return None
        if creds.groups is None and self.gids:
            return ("the kernel does not say which groups you are in (Linux 4.13 or later "
                    "does): only your primary group counts")
        if self.approvers is not None:
            named = f"approvers = {_toml_list(self.approvers)}"
            if not self.approvers:
                return f"the agent's config names no approvers ({named}): only root may approve"
            return (f"you are not among the approvers the agent's config names ({named}), "
                    "who with root may approve here: ask an administrator to add you there")
        if not self.gids:
            return f"there is no group {self.group} on this VM: only root may approve"
        return (f"you are not root and not in group {self.group}, who may approve here: ask "
                "an administrator to add you to it (it counts from your next login)")


def _toml_list(names: Sequence[str], most: int = 12) -> str:
    """``["%ops", "alice"]``, as the config file writes it (the first ``most`` names)."""
    shown = ", ".join(json.dumps(name) for name in names[:most])
    return f"[{shown}, …]" if len(names) > most else f"[{shown}]"
