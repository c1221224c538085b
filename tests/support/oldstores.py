"""A store as an older setui left it: a current one with what later schemas added taken out.

Tests of upgrades and of read-only opens of older stores start from a file made by the
store itself, then call :func:`back_to` to remove what each later version added.
"""

from __future__ import annotations

import sqlite3

__all__ = ["back_to"]

# The agent's steps and holds as they were before version 7 keyed them by the VM: the
# endpoint's key is all a row keeps (a vmId it had goes).
_UNKEYED_BY_VM = (
    "CREATE TABLE agent_steps_v6 (endpoint TEXT NOT NULL, event_id TEXT NOT NULL COLLATE "
    "NOCASE, step TEXT NOT NULL, rule TEXT NOT NULL, state TEXT NOT NULL, detail TEXT NOT "
    "NULL DEFAULT '', started TEXT, updated TEXT NOT NULL, "
    "PRIMARY KEY (endpoint, event_id, step))",
    "INSERT OR IGNORE INTO agent_steps_v6 SELECT endpoint, event_id, step, rule, state, "
    "detail, started, updated FROM agent_steps ORDER BY updated DESC",
    "DROP TABLE agent_steps",
    "ALTER TABLE agent_steps_v6 RENAME TO agent_steps",
    "CREATE TABLE agent_holds_v6 (endpoint TEXT NOT NULL, event_id TEXT NOT NULL COLLATE "
    "NOCASE, held INTEGER NOT NULL, actor TEXT NOT NULL, time TEXT NOT NULL, "
    "PRIMARY KEY (endpoint, event_id))",
    "INSERT OR IGNORE INTO agent_holds_v6 SELECT endpoint, event_id, held, actor, time "
    "FROM agent_holds ORDER BY time DESC",
    "DROP TABLE agent_holds",
    "ALTER TABLE agent_holds_v6 RENAME TO agent_holds",
)

# What each schema version added that can be taken out again, newest first.
_ADDED = {
    8: ("ALTER TABLE agent_hook_runs DROP COLUMN vm",
        "ALTER TABLE agent_notifications DROP COLUMN vm"),
    7: _UNKEYED_BY_VM,
    6: ("DROP TABLE impacts", "ALTER TABLE recorders DROP COLUMN boot_id",
        "ALTER TABLE recorders DROP COLUMN measures"),
    5: ("ALTER TABLE incarnations DROP COLUMN vm_name",),
}


def back_to(conn: sqlite3.Connection, version: int) -> None:
    """Remove every addition of the versions after ``version`` (5 at the oldest: versions
    before it changed tables the callers drop or fill themselves; the agent's tables are
    made as they were before versions 7 and 8 only where the caller left them) and say
    ``version``."""
    tables = {str(row[0]) for row in conn.execute("SELECT name FROM sqlite_master")}
    for added in sorted(_ADDED, reverse=True):
        if added == 7 and not {"agent_steps", "agent_holds"} <= tables:
            continue
        if added == 8 and not {"agent_hook_runs", "agent_notifications"} <= tables:
            continue
        if added > version:
            for statement in _ADDED[added]:
                conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {version}")
