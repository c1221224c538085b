"""Files that hold what the audit log holds: written whole or not at all, owner-only."""

from __future__ import annotations

from pathlib import Path

from setui.atomicfile import write_atomically

__all__ = ["write_atomically", "write_private"]


def write_private(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically: a reader sees the old file or the new,
    never half of one. ``mkstemp`` makes the file owner-only (where the OS has modes): the
    audit log names people and the addresses they came from."""
    write_atomically(path, text)
