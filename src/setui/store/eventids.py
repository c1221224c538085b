"""EventIds this store has seen, by prefix: people type the first few characters of an
id they read in the history or the audit log, and setui says which ids those could be."""

from __future__ import annotations

import sqlite3

__all__ = ["known"]


def _like(prefix: str) -> str:
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"


def known(conn: sqlite3.Connection, prefix: str, limit: int = 20) -> list[str]:
    """Distinct EventIds from the history's changes and the audit log that start with
    ``prefix`` (LIKE ignores ASCII case, as GUIDs need), newest first."""
    try:
        prefix.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (undecodable bytes in argv): no id has it
        return []
    pattern = _like(prefix)
    rows = conn.execute(
        "SELECT event_id, max(at) AS newest FROM ("
        " SELECT c.event_id AS event_id, i.last_seen AS at FROM event_changes c"
        " JOIN incarnations i ON i.id = c.incarnation_id"
        " WHERE c.event_id LIKE ? ESCAPE '\\'"
        " UNION ALL SELECT event_id, time FROM audit"
        " WHERE event_id IS NOT NULL AND event_id LIKE ? ESCAPE '\\')"
        " GROUP BY upper(event_id) ORDER BY newest DESC LIMIT ?",
        (pattern, pattern, max(1, limit)))
    return [str(row[0]) for row in rows]
