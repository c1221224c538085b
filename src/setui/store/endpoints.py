"""One key per endpoint in the store, whichever way it was written.

``HTTP://127.0.0.1:P`` and ``http://localhost:P/`` are one service
(:func:`setui.core.endpoint.endpoint_key`): keyed as written, a claim made under one was
not found under the other, and the event was approved again.

The history, the recording sessions and the agent's steps, hook runs, notifications and
holds are keyed when written (:func:`endpoint_column`), and the schema upgrade to version
4 rewrote the rows written before (:func:`rewrite`), merging those that then name the same
thing. Keyed when written, because they are read by ``endpoint = ?`` on an index on every
poll, page and step: one stored form keeps those reads as they are and every reader agrees
without knowing the rule. The audit log is the exception: its rows are evidence under a
hash chain, and keep the endpoint exactly as the approval used it; a claim compares them
through the SQL function ``setui_endpoint`` (only the records of one EventId are read).
A store of an older schema opened only to read is read through views that key it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from setui.core.endpoint import endpoint_key
from setui.store.records import clean_text

__all__ = ["SQL_FUNCTION", "endpoint_column", "keyed_view", "register", "rewrite"]

SQL_FUNCTION = "setui_endpoint"


def endpoint_column(endpoint: str) -> str:
    """``endpoint`` as the store keys it: its one spelling, storable."""
    return clean_text(endpoint_key(endpoint))


# What SQLite hands a function and takes back from it.
_SqlValue = str | bytes | int | float | None


def _sql_key(value: _SqlValue) -> _SqlValue:
    return endpoint_column(value) if isinstance(value, str) else value


def register(conn: sqlite3.Connection) -> None:
    """Let SQL on ``conn`` key an endpoint: ``setui_endpoint(endpoint)``."""
    conn.create_function(SQL_FUNCTION, 1, _sql_key, deterministic=True)


def keyed_view(conn: sqlite3.Connection, table: str, extra: str = "") -> None:
    """A temporary view over ``main.table`` with its endpoints keyed (and ``extra``
    columns), for a read-only open of a store from before version 4: it is read as keyed
    without writing to it. The view lives outside the file."""
    columns = [str(row[1]) for row in conn.execute(f"PRAGMA main.table_info({table})")]
    select = ", ".join(f"{SQL_FUNCTION}(endpoint) AS endpoint" if c == "endpoint" else c
                       for c in columns)
    conn.execute(f"CREATE TEMP VIEW {table} AS SELECT {select}{extra} FROM main.{table}")


# -- the upgrade to schema version 4 --------------------------------------------------------
def rewrite(conn: sqlite3.Connection) -> None:
    """Key every endpoint column; where two rows then name the same thing, keep one: the
    first sighting of a document (seen until the last of either), the newest step and
    hold, the notification that was sent. Runs in the upgrade's transaction."""
    _rekey(conn, "incarnations", ("incarnation", "content_hash"), "first_seen, id",
           _merge_incarnations)
    _rekey(conn, "agent_steps", ("event_id", "step"), "updated DESC")
    _rekey(conn, "agent_holds", ("event_id",), "time DESC")
    for table in ("recorders", "agent_hook_runs"):  # nothing unique in them
        conn.execute(f"UPDATE {table} SET endpoint = {SQL_FUNCTION}(endpoint)")
    _rekey_notifications(conn)


def _rekey(conn: sqlite3.Connection, table: str, unique: tuple[str, ...], keep_first: str,
           merge: Callable[[sqlite3.Connection, int, int], None] | None = None) -> None:
    for (old,) in conn.execute(f"SELECT DISTINCT endpoint FROM {table}").fetchall():
        new = endpoint_column(str(old))
        if new == old:
            continue
        conn.execute(f"UPDATE OR IGNORE {table} SET endpoint = ? WHERE endpoint = ?",
                     (new, old))
        # What is left already has a twin under the key: keep one of the two.
        same = " AND ".join(f"a.{column} = b.{column}" for column in unique)
        pairs = conn.execute(f"SELECT a.rowid, b.rowid FROM {table} a JOIN {table} b ON "
                             f"b.endpoint = ? AND {same} WHERE a.endpoint = ?",
                             (new, old)).fetchall()
        for left, twin in pairs:
            kept = conn.execute(f"SELECT rowid FROM {table} WHERE rowid IN (?, ?) ORDER BY "
                                f"{keep_first} LIMIT 1", (left, twin)).fetchone()[0]
            gone = twin if kept == left else left
            if merge is not None:
                merge(conn, kept, gone)
            conn.execute(f"DELETE FROM {table} WHERE rowid = ?", (gone,))
            conn.execute(f"UPDATE {table} SET endpoint = ? WHERE rowid = ?", (new, kept))


def _merge_incarnations(conn: sqlite3.Connection, kept: int, gone: int) -> None:
    """The first sighting stays, with its changes; it was seen until either was last."""
    conn.execute("UPDATE incarnations SET last_seen = max(last_seen, (SELECT last_seen FROM "
                 "incarnations WHERE id = ?)) WHERE id = ?", (gone, kept))
    conn.execute("DELETE FROM event_changes WHERE incarnation_id = ?", (gone,))


def _rekey_notifications(conn: sqlite3.Connection) -> None:
    """The agent's notification key begins with the endpoint (``ENDPOINT|id|change|...``):
    keyed too, or a restart under the key would send again what was sent."""
    rows = conn.execute("SELECT key, endpoint, state FROM agent_notifications").fetchall()
    for key, endpoint, state in rows:
        new_endpoint = endpoint_column(str(endpoint))
        new_key = (new_endpoint + key[len(endpoint):] if key.startswith(f"{endpoint}|")
                   else key)
        if (new_key, new_endpoint) == (key, endpoint):
            continue
        twin = conn.execute("SELECT state FROM agent_notifications WHERE key = ?",
                            (new_key,)).fetchone()
        if twin is not None and (twin[0] == "sent" or state != "sent"):
            conn.execute("DELETE FROM agent_notifications WHERE key = ?", (key,))
            continue
        conn.execute("DELETE FROM agent_notifications WHERE key = ?", (new_key,))
        conn.execute("UPDATE agent_notifications SET key = ?, endpoint = ? WHERE key = ?",
                     (new_key, new_endpoint, key))
