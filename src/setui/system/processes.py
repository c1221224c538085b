"""What the kernel says about a process: its ancestors, and the SSH connection above it.

``SSH_CONNECTION`` is text in an environment anyone can write. The kernel knows better:
sshd holds the client's TCP connection open for as long as the session lasts, and every
process of the session descends from it. So the connection a process came in through is
one held by an ancestor named ``sshd`` (or ``sshd-session``, the per-session program of
OpenSSH 9.8 on) that runs as root: any program can take the name, but only root can start
a process as root, and with privilege separation the root half of a session (``sshd:
alice [priv]``) keeps the connection too. The ancestors come from ``/proc/PID/stat``
(the parent of each), the connection from the socket inodes in ``/proc/ANCESTOR/fd``
matched in that process's ``/proc/ANCESTOR/net/tcp`` and ``tcp6`` (established only).

An ordinary user cannot read a root process's open files (and sshd's per-session process
is not dumpable, so not even the user's own half): then there is nothing to say, and the
caller must not confirm anything. Linux only; elsewhere everything is empty. Nothing here
raises for a process that is gone, a table that cannot be read or a line that does not
parse: the answer is just shorter.

:func:`ssh_connections` takes any pid: ``setui.system.identity`` asks about this process, and a
local socket that learns its client's pid from the kernel can ask about that one.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PROC", "SSHD_NAMES", "Connection", "Process", "address", "ancestors", "holders",
           "ssh_connections"]

PROC = Path("/proc")
SSHD_NAMES = frozenset({"sshd", "sshd-session"})
_MAX_DEPTH = 256  # ancestors walked at most: a loop in a damaged /proc ends here
_ESTABLISHED = "01"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Process:
    """One process as /proc shows it: its parent, its name (``comm``), who runs it."""

    pid: int
    parent: int
    name: str
    uid: int  # the real uid
    euid: int

    @property
    def root(self) -> bool:
        return self.uid == 0 and self.euid == 0


@dataclass(frozen=True)
class Connection:
    """An established TCP connection as this host sees it: its own end and the peer's."""

    local: tuple[IPAddress, int]
    remote: tuple[IPAddress, int]


def address(text: str) -> IPAddress | None:
    """An IP address written as text (an IPv4-mapped IPv6 address as IPv4, a zone dropped),
    so that the same address written two ways compares equal; None if it is not one."""
    try:
        found = ipaddress.ip_address(text.split("%")[0])
    except ValueError:
        return None
    if isinstance(found, ipaddress.IPv6Address) and found.ipv4_mapped is not None:
        return found.ipv4_mapped
    return found


def process(pid: int, proc: Path = PROC) -> Process | None:
    """The process ``pid``, or None when it is gone or cannot be read."""
    try:
        stat = (proc / str(pid) / "stat").read_text(encoding="utf-8", errors="replace")
        status = (proc / str(pid) / "status").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    # "PID (NAME) STATE PPID ...": the name may hold spaces and parentheses itself.
    head, paren, rest = stat.rpartition(")")
    fields = rest.split()
    uids = next((line.split()[1:3] for line in status.splitlines()
                 if line.startswith("Uid:")), [])
    if not paren or "(" not in head or len(fields) < 2 or len(uids) < 2:
        return None
    try:
        return Process(pid, int(fields[1]), head.partition("(")[2], int(uids[0]), int(uids[1]))
    except ValueError:
        return None


def ancestors(pid: int, proc: Path = PROC) -> list[Process]:
    """The parent of ``pid``, its parent, and so on up to the first process, nearest
    first; shorter where one cannot be read."""
    found: list[Process] = []
    me = process(pid, proc)
    seen = {pid}
    parent = me.parent if me is not None else 0
    while parent > 0 and parent not in seen and len(found) < _MAX_DEPTH:
        seen.add(parent)
        above = process(parent, proc)
        if above is None:
            break
        found.append(above)
        parent = above.parent
    return found


def _socket_inodes(pid: int, proc: Path) -> set[int]:
    """The inodes of the sockets ``pid`` has open; empty if its files cannot be read."""
    inodes: set[int] = set()
    fds = proc / str(pid) / "fd"
    try:
        names = os.listdir(fds)
    except OSError:
        return inodes
    for name in names:
        try:
            target = os.readlink(fds / name)
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:[") and target.endswith("]"):
            inode = target[8:-1]
            if inode.isdigit():
                inodes.add(int(inode))
    return inodes


def _endpoint(text: str) -> tuple[IPAddress, int] | None:
    """``0100007F:0016`` (or the IPv6 form) from /proc/net/tcp: address and port."""
    try:
        host, port = text.split(":")
        raw = bytes.fromhex(host)
        if len(raw) == 4:
            family, packed = socket.AF_INET, raw[::-1]
        elif len(raw) == 16:  # four 32-bit words, each in the host's byte order
            family, packed = socket.AF_INET6, b"".join(raw[i:i + 4][::-1]
                                                       for i in range(0, 16, 4))
        else:
            return None
        found = address(socket.inet_ntop(family, packed))
        return None if found is None else (found, int(port, 16))
    except (ValueError, OSError):
        return None


def _established(pid: int, proc: Path) -> dict[int, Connection]:
    """The established TCP connections of ``pid``'s network namespace, by socket inode."""
    table: dict[int, Connection] = {}
    for name in ("tcp", "tcp6"):
        try:
            lines = (proc / str(pid) / "net" / name).read_text(encoding="ascii").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        for line in lines[1:]:
            parts = line.split()
            if len(parts) < 10 or parts[3] != _ESTABLISHED or not parts[9].isdigit():
                continue
            local, remote = _endpoint(parts[1]), _endpoint(parts[2])
            if local is not None and remote is not None:
                table[int(parts[9])] = Connection(local, remote)
    return table


def ssh_connections(pid: int, proc: Path = PROC) -> list[Connection]:
    """The established TCP connections held by root's sshd processes among ``pid``'s
    ancestors, nearest first: where the session ``pid`` belongs to came in from. Empty
    when there is none, and when they cannot be read (an ordinary user's process)."""
    found: list[Connection] = []
    for above in ancestors(pid, proc):
        if above.name not in SSHD_NAMES or not above.root:
            continue
        inodes = _socket_inodes(above.pid, proc)
        if inodes:
            table = _established(above.pid, proc)
            found += [table[i] for i in sorted(inodes) if i in table and table[i] not in found]
    return found


def holders(paths: Iterable[Path], proc: Path = PROC) -> list[tuple[Process, Path]]:
    """The processes that have any of ``paths`` open, each with the file: told by what the
    file is (device and inode), not by its name, so a file renamed since it was opened is
    found too. Only the processes whose open files this process may read are seen (all of
    them, for root)."""
    wanted: dict[tuple[int, int], Path] = {}
    for path in paths:
        try:
            st = os.lstat(path)
        except OSError:
            continue
        wanted[(st.st_dev, st.st_ino)] = path
    found: list[tuple[Process, Path]] = []
    if not wanted:
        return found
    try:
        pids = [int(name) for name in os.listdir(proc) if name.isdigit()]
    except OSError:
        return found
    for pid in sorted(pids):
        fds = proc / str(pid) / "fd"
        try:
            names = os.listdir(fds)
        except OSError:
            continue  # gone, or not ours to read
        held = set()
        for name in names:
            try:
                st = os.stat(fds / name)  # the open file itself, whatever its name now
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in wanted:
                held.add(wanted[(st.st_dev, st.st_ino)])
        if held:
            who = process(pid, proc) or Process(pid, 0, "?", -1, -1)
            found += [(who, path) for path in sorted(held)]
    return found
