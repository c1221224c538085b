"""A store as an older setui left it: a current one with what later schemas added taken out.

Tests of upgrades and of read-only opens of older stores start from a file made by the
store itself, then call :func:`back_to` to remove what each later version added.
"""

from __future__ import annotations

import sqlite3

__all__ = ["back_to"]

# What each schema version added that can be taken out again, newest first.
_ADDED = {
    6: ("DROP TABLE impacts", "ALTER TABLE recorders DROP COLUMN boot_id",
        "ALTER TABLE recorders DROP COLUMN measures"),
    5: ("ALTER TABLE incarnations DROP COLUMN vm_name",),
}


def back_to(conn: sqlite3.Connection, version: int) -> None:
    """Remove every addition of the versions after ``version`` (5 at the oldest: versions
    before it changed tables the callers drop or fill themselves) and say ``version``."""
    for added in sorted(_ADDED, reverse=True):
        if added > version:
            for statement in _ADDED[added]:
                conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {version}")
