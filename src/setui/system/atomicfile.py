"""One way to replace a file: whole or not at all, never half of one.

The audit witness, the systemd units, exported scenarios and audit logs, the config
file a theme is saved to and the agent's metrics textfile are all read by someone else
while setui may be writing them; a reader must see the old file or the new. The rule
lives here, below every layer that writes a file, so each of them calls it instead of
writing it again.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["write_atomically"]


def write_atomically(path: Path, data: str | bytes, *, mode: int | None = None,
                     newline: str = "\n", sync: bool = True,
                     made: Callable[[int], None] | None = None) -> None:
    """Replace ``path`` with ``data`` by renaming a complete temporary file over it.

    Owner-only unless ``mode`` says otherwise (``mkstemp`` makes it so: the audit log
    names people). ``newline``: how text's line ends are written (``""`` keeps them as
    given, for a user's own file). ``sync``: fsync the file and its directory so the
    rename survives a crash; a file rewritten every few seconds may skip it. ``made``:
    called with the file's descriptor before it takes the name (to set its mode and
    group as its directory wants), so no one sees it otherwise."""
    directory = path.parent if str(path.parent) else Path(".")
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(_encoded(data, newline))
            handle.flush()
            if mode is not None and hasattr(os, "fchmod"):
                os.fchmod(handle.fileno(), mode)
            if made is not None:
                made(handle.fileno())
            if sync:
                os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    if sync and hasattr(os, "O_DIRECTORY"):  # POSIX: Windows cannot open a directory
        with contextlib.suppress(OSError):
            dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)


def _encoded(data: str | bytes, newline: str) -> bytes:
    """What text mode with ``newline`` would have written: one binary handle for both."""
    if isinstance(data, bytes):
        return data
    return (data.replace("\n", newline) if newline else data).encode("utf-8")
