"""One agent per store: an advisory lock on ``<data-dir>/agent.lock``, held for life.

Two agents on one store would both act: the second marked the first one's running hook
"interrupted", falsely, and both would approve. So the agent takes an exclusive
``flock`` before it reads or writes anything, and keeps it until it exits (the kernel
lets go when the process dies, however it dies; hooks do not inherit it). The file says
who holds it, ``{"pid": N, "since": ISO, "socket": PATH}``, so a second agent can name
the first when it refuses to start.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from setui.store.db import StoreError
from setui.store.place import AGENT_LOCK, Sharing, check_dir, make_dirs, open_nofollow
from setui.store.records import from_db_time, to_db_time
from setui.textsafe import printable

__all__ = ["LOCK_NAME", "AgentLock", "Held", "LockError"]

LOCK_NAME = AGENT_LOCK
_MAX_NOTE = 4096


class LockError(Exception):
    """The lock cannot be taken (the directory is unusable); the message is for people."""


class Held(Exception):
    """Another agent holds the lock; its pid and since, as far as its file says."""

    def __init__(self, path: Path, pid: int | None, since: datetime | None) -> None:
        self.pid = pid
        self.since = since
        who = f"pid {pid}" if pid is not None else "its pid is not written yet"
        when = f", since {since:%Y-%m-%dT%H:%M:%SZ}" if since is not None else ""
        super().__init__(f"another agent runs on this store ({who}{when}); its lock is "
                         f"{printable(str(path), 200)}")


@dataclass
class AgentLock:
    path: Path
    fd: int
    since: datetime

    @classmethod
    def take(cls, data_dir: Path, *, since: datetime, socket: Path | None) -> AgentLock:
        """The lock on ``data_dir``'s store, or :class:`Held` / :class:`LockError`."""
        path = data_dir / LOCK_NAME
        try:
            make_dirs(data_dir)
            sharing = Sharing(check_dir(data_dir, write=True))
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
            os.close(fd)
            raise Held(path, pid, when) from None
        except OSError as exc:
            os.close(fd)
            raise LockError(f"cannot lock {printable(str(path), 200)}: "
                            f"{exc.strerror or exc}") from None
        with contextlib.suppress(OSError):  # who holds it: the store's readers may know
            sharing.apply(fd)
        note = json.dumps({"pid": os.getpid(), "since": to_db_time(since),
                           "socket": None if socket is None else str(socket)})
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, note.encode("utf-8") + b"\n", 0)
        except OSError:
            pass  # held all the same; a second agent just cannot name this one
        return cls(path, fd, since)

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
