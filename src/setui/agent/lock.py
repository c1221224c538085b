"""One agent per store: an advisory lock on ``<data-dir>/agent.lock``, held for life.

Two agents on one store would both act: the second marked the first one's running hook
"interrupted", falsely, and both would approve. So the agent takes an exclusive
``flock`` before it reads or writes anything, and keeps it until it exits (the kernel
lets go when the process dies, however it dies; hooks do not inherit it). The file says
who holds it, ``{"pid": N, "since": ISO, "socket": PATH}``, so a second agent can name
the first when it refuses to start; the kernel's table of locks (``/proc/locks``) names
the process that really holds it when that is not the one the file names.

The file is its owner's alone (0600, in a directory of root's alone for the agent's
store), and the store is made so before the lock is taken (a store of the old layout let
its group open it, and a read-only descriptor is enough to take a ``flock``: a member
could keep every agent from starting).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from setui.core.textsafe import printable
from setui.store.errors import StoreError
from setui.store.flocks import flock_holders
from setui.store.place import (
    AGENT_LOCK,
    DB_NAME,
    Sharing,
    check_dir,
    make_dirs,
    make_private,
    open_nofollow,
    store_names,
)
from setui.store.records import from_db_time, to_db_time
from setui.system.processes import PROC, holders, process

__all__ = ["LOCK_NAME", "AgentLock", "Held", "LockError"]

LOCK_NAME = AGENT_LOCK
_MAX_NOTE = 4096


class LockError(Exception):
    """The lock cannot be taken (the directory is unusable); the message is for people."""


class Held(Exception):
    """Another process holds the lock: an agent, its pid and since as its file says; or,
    when the kernel names a process the file does not (the file is a dead agent's), that
    process."""

    def __init__(self, path: Path, pid: int | None, since: datetime | None,
                 holder: tuple[int, str, int] | None = None) -> None:
        self.pid = pid
        self.since = since
        shown = printable(str(path), 200)
        if holder is not None and pid is not None and holder[0] != pid:
            # The file names a process that does not hold it (a dead agent): the kernel's word.
            real, name, uid = holder
            self.pid, self.since = real, None
            super().__init__(f"pid {real} ({printable(name, 40)}, uid {uid}) holds the "
                             f"agent's lock {shown}, not the agent the file names (pid {pid})"
                             ": stop it and start the agent again")
            return
        who = f"pid {pid}" if pid is not None else "its pid is not written yet"
        when = f", since {since:%Y-%m-%dT%H:%M:%SZ}" if since is not None else ""
        super().__init__(f"another agent runs on this store ({who}{when}); its lock is "
                         f"{shown}")


@dataclass
class AgentLock:
    path: Path
    fd: int
    since: datetime
    made_private: list[str] = field(default_factory=list)  # what changed, in words
    # Who else had a file of the store open as it was made private, in words: a
    # descriptor opened before still reads, and locks, what it opened.
    still_open: list[str] = field(default_factory=list)

    @classmethod
    def take(cls, data_dir: Path, *, since: datetime, socket: Path | None) -> AgentLock:
        """The lock on ``data_dir``'s store, or :class:`Held` / :class:`LockError`."""
        path = data_dir / LOCK_NAME
        try:
            make_dirs(data_dir)
        except OSError as exc:
            raise LockError(f"cannot make the data directory {printable(str(data_dir), 200)}"
                            f": {exc.strerror or exc}") from None
        try:
            sharing = Sharing(check_dir(data_dir, write=True))
        except StoreError as exc:
            raise LockError(str(exc)) from None
        try:
            made_private = make_private(data_dir)
        except OSError as exc:
            raise LockError(f"cannot make the store {printable(str(data_dir), 200)} its "
                            f"owner's alone: {exc.strerror or exc}") from None
        try:
            fd = open_nofollow(path, os.O_RDWR | os.O_CREAT, sharing.mode)
        except StoreError as exc:
            raise LockError(str(exc)) from None
        except OSError as exc:
            raise LockError(f"cannot open {printable(str(path), 200)}: "
                            f"{exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid, when = _holder(fd)
            holder = _locker(path)
            os.close(fd)
            raise Held(path, pid, when, holder) from None
        except OSError as exc:
            os.close(fd)
            raise LockError(f"cannot lock {printable(str(path), 200)}: "
                            f"{exc.strerror or exc}") from None
        with contextlib.suppress(OSError):
            sharing.apply(fd)
        note = json.dumps({"pid": os.getpid(), "since": to_db_time(since),
                           "socket": None if socket is None else str(socket)})
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, note.encode("utf-8") + b"\n", 0)
        except OSError:
            pass  # held all the same; a second agent just cannot name this one
        return cls(path, fd, since, made_private,
                   _still_open(data_dir) if made_private else [])

    def release(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def _holder(fd: int) -> tuple[int | None, datetime | None]:
    """What the holder wrote in the file, as far as it can be read."""
    try:
        data = json.loads(os.pread(fd, _MAX_NOTE, 0).decode("utf-8"))
        pid = data.get("pid")
        since = data.get("since")
        return (pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
                from_db_time(since) if isinstance(since, str) else None)
    except (OSError, ValueError, UnicodeDecodeError, AttributeError):
        return None, None


def _still_open(data_dir: Path) -> list[str]:
    """Other users' processes that have a file of the store open, in words."""
    mine = os.geteuid()
    return [f"pid {who.pid} ({printable(who.name, 40)}, uid {who.uid}) has "
            f"{printable(str(path), 200)} open"
            for who, path in holders(data_dir / name for name in store_names(DB_NAME))
            if who.pid != os.getpid() and who.uid != mine]


def _locker(path: Path, proc: Path = PROC) -> tuple[int, str, int] | None:
    """Who holds a ``flock`` on ``path``, as the kernel's table of locks says
    (setui.store.flocks): pid, name and uid; None when it is not known (no /proc, gone,
    or not in the table)."""
    holders = flock_holders(path, locks=proc / "locks")
    for pid in sorted(holders or ()):
        if pid <= 0 or pid == os.getpid():
            continue
        who = process(pid, proc)
        return (pid, who.name, who.uid) if who is not None else (pid, "?", -1)
    return None
