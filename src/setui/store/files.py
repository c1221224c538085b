"""Files that hold what the audit log holds: written whole or not at all, owner-only."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["write_atomically", "write_private"]


def write_private(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically: a reader sees the old file or the new,
    never half of one. ``mkstemp`` makes the file owner-only (where the OS has modes): the
    audit log names people and the addresses they came from."""
    write_atomically(path, text)


def write_atomically(path: Path, text: str, *, mode: int | None = None) -> None:
    """Replace ``path`` with ``text`` by renaming a complete, synced temporary file over
    it; owner-only unless ``mode`` says otherwise (a systemd unit is 0644). The directory
    is synced too, where it can be, so the rename itself survives a crash."""
    directory = path.parent if str(path.parent) else Path(".")
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    if hasattr(os, "O_DIRECTORY"):  # POSIX: Windows cannot open a directory to sync it
        with contextlib.suppress(OSError):
            dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
