"""Who holds a ``flock`` on a file, as the kernel lists it, without taking the lock.

How a reader of the agent's store tells whether the agent that wrote a session still
runs: the agent holds ``<data-dir>/agent.lock`` for life (setui.agent.lock) and the
kernel lets go the moment it dies. Trying the lock to find out would be wrong: held even
for an instant, it could keep a starting agent out (it takes the lock without waiting).
``/proc/locks`` lists every lock with its holder's pid and the file's device and inode;
reading it never touches the lock.

A lock is matched by its file's inode number alone: on btrfs subvolumes and overlayfs the
device ``stat`` gives is not the one the list shows. A stranger's lock on a file with the
same inode number elsewhere only adds a pid that holds nothing of ours: it can make an
ended process look as if it still held the lock, never a running one look ended.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["PROC_LOCKS", "flock_holders"]

PROC_LOCKS = Path("/proc/locks")
_MAX_READ = 16 * 1024 * 1024  # a list of locks longer than this is not read whole


def flock_holders(path: Path, *, locks: Path = PROC_LOCKS) -> frozenset[int] | None:
    """The pids holding a ``flock`` on ``path`` now (empty: nobody; no such file: nobody
    can), or None when it cannot be told: ``path`` cannot be looked at, or the kernel's
    list cannot be read (not Linux). A pid is as this process's namespace sees it."""
    try:
        inode = os.stat(path).st_ino
    except FileNotFoundError:
        return frozenset()
    except OSError:
        return None
    try:
        with open(locks, "rb") as listing:
            text = listing.read(_MAX_READ + 1)
    except OSError:
        return None
    if len(text) > _MAX_READ:
        return None
    return frozenset(_holders(text.decode("ascii", "replace"), inode))


def _holders(text: str, inode: int) -> set[int]:
    """The pids of ``text``'s (``/proc/locks``) granted FLOCK locks on ``inode``: a line
    ``1: FLOCK  ADVISORY  WRITE 1234 fe:00:2148346 0 EOF``; one waiting for a lock has
    ``->`` after its number and holds nothing."""
    pids: set[int] = set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 6 or parts[1] != "FLOCK":
            continue
        _, _, number = parts[5].rpartition(":")
        if number.isdigit() and int(number) == inode and parts[4].isdigit():
            pids.add(int(parts[4]))
    return pids
