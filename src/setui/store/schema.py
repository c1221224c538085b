"""The database's schema: its tables, the upgrade from each older version, and the checks
that a file is setui's, at a version this setui knows, with only its own triggers.

One database holds the incarnation history, the audit log, the recording sessions and
the agent's work, so an approval and the document it was made against are in the same
place and the same backup. A read-only open never upgrades: temporary views stand in
for what later versions added (:func:`check_schema`).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

from setui.store import endpoints
from setui.store.errors import NothingRecorded, StoreError

__all__ = ["APPLICATION_ID", "SCHEMA_VERSION", "VM_COLUMN_SINCE", "check_schema",
           "refuse_foreign", "trigger_problem"]

SCHEMA_VERSION = 8
APPLICATION_ID = 0x53455455  # "SETU": marks the file as setui's, so we never write elsewhere

_SCHEMA_V1 = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE incarnations (
    id           INTEGER PRIMARY KEY,
    endpoint     TEXT    NOT NULL,
    incarnation  INTEGER NOT NULL,
    content_hash TEXT    NOT NULL,
    first_seen   TEXT    NOT NULL,
    last_seen    TEXT    NOT NULL,
    raw_json     TEXT    NOT NULL,
    changes_json TEXT    NOT NULL DEFAULT '[]',
    summary      TEXT    NOT NULL DEFAULT '',
    UNIQUE (endpoint, incarnation, content_hash)
);
CREATE INDEX incarnations_by_time ON incarnations (first_seen, id);
CREATE INDEX incarnations_by_endpoint ON incarnations (endpoint, first_seen, id);
CREATE INDEX incarnations_by_last_seen ON incarnations (last_seen);
CREATE INDEX incarnations_by_number ON incarnations (incarnation, last_seen);
CREATE TABLE event_changes (
    incarnation_id INTEGER NOT NULL,
    position       INTEGER NOT NULL,
    event_id       TEXT    NOT NULL COLLATE NOCASE,
    kind           TEXT    NOT NULL,
    PRIMARY KEY (incarnation_id, position)
) WITHOUT ROWID;
CREATE INDEX event_changes_by_event ON event_changes (event_id, incarnation_id);
CREATE TABLE audit (
    seq          INTEGER PRIMARY KEY,
    time         TEXT    NOT NULL,
    action       TEXT    NOT NULL,
    os_user      TEXT    NOT NULL,
    ssh_client   TEXT,
    host         TEXT    NOT NULL,
    endpoint     TEXT    NOT NULL,
    event_id     TEXT,
    event_json   TEXT,
    incarnation  INTEGER,
    attempt_seq  INTEGER,
    status       INTEGER,
    error        TEXT,
    latency_ms   REAL,
    details_json TEXT    NOT NULL DEFAULT '{}',
    prev_hash    TEXT    NOT NULL,
    hash         TEXT    NOT NULL
);
CREATE INDEX audit_by_event ON audit (event_id COLLATE NOCASE, seq);
CREATE INDEX audit_by_attempt ON audit (attempt_seq) WHERE attempt_seq IS NOT NULL;
-- The newest record's seq and hash, written in the same transaction as the record:
-- removing the newest records leaves the head pointing past the end, so it shows.
CREATE TABLE audit_head (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    seq  INTEGER NOT NULL,
    hash TEXT    NOT NULL
);
"""

# Guards against mistakes, not attackers (anyone who can write the file can drop them);
# the hash chain is what makes tampering visible. Recreated on every writable open.
_GUARDS = """
CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
"""

# Version 2: the clock skew measured when each incarnation was first seen, and the
# recording sessions, so the history can show when nothing was recording.
_SCHEMA_V2 = """
ALTER TABLE incarnations ADD COLUMN clock_skew REAL;
CREATE TABLE recorders (
    id        INTEGER PRIMARY KEY,
    endpoint  TEXT    NOT NULL,
    pid       INTEGER NOT NULL,
    host      TEXT    NOT NULL,
    command   TEXT    NOT NULL,
    started   TEXT    NOT NULL,
    last_beat TEXT    NOT NULL,
    stopped   TEXT
);
CREATE INDEX recorders_by_time ON recorders (endpoint, started);
"""

# Version 3: what `setui agent` decided and did, so a restart neither reruns a finished
# hook nor sends a notification twice, and the holds people put on its automation.
_SCHEMA_V3 = """
CREATE TABLE agent_steps (
    endpoint TEXT    NOT NULL,
    event_id TEXT    NOT NULL COLLATE NOCASE,
    step     TEXT    NOT NULL,
    rule     TEXT    NOT NULL,
    state    TEXT    NOT NULL,
    detail   TEXT    NOT NULL DEFAULT '',
    started  TEXT,
    updated  TEXT    NOT NULL,
    PRIMARY KEY (endpoint, event_id, step)
);
CREATE TABLE agent_hook_runs (
    id          INTEGER PRIMARY KEY,
    endpoint    TEXT    NOT NULL,
    event_id    TEXT    NOT NULL COLLATE NOCASE,
    step        TEXT    NOT NULL,
    rule        TEXT    NOT NULL,
    command     TEXT    NOT NULL,
    started     TEXT    NOT NULL,
    ended       TEXT,
    exit_status INTEGER,
    timed_out   INTEGER NOT NULL DEFAULT 0,
    output      TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX agent_hook_runs_by_event ON agent_hook_runs (event_id, id);
CREATE TABLE agent_notifications (
    key      TEXT    PRIMARY KEY,
    endpoint TEXT    NOT NULL,
    event_id TEXT    NOT NULL COLLATE NOCASE,
    change   TEXT    NOT NULL,
    title    TEXT    NOT NULL,
    body     TEXT    NOT NULL,
    state    TEXT    NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    error    TEXT,
    created  TEXT    NOT NULL,
    sent     TEXT
);
CREATE INDEX agent_notifications_pending ON agent_notifications (state) WHERE state = 'pending';
CREATE TABLE agent_holds (
    endpoint TEXT    NOT NULL,
    event_id TEXT    NOT NULL COLLATE NOCASE,
    held     INTEGER NOT NULL,
    actor    TEXT    NOT NULL,
    time     TEXT    NOT NULL,
    PRIMARY KEY (endpoint, event_id)
);
"""

# Version 5: this VM's name (as in Resources) with each incarnation, as the writer knew
# it, so a replay marks this VM's events without being told its name. Rows written
# before it have none: not known.
_SCHEMA_V5 = """
ALTER TABLE incarnations ADD COLUMN vm_name TEXT;
"""

# Version 6: what events did to the VM, measured by the agent (core.impact): each stall
# its heartbeat saw and each boot, tied to an event or to none; and with each recording
# session the boot it ran in and whether it kept a heartbeat, so a boot is found by its
# boot id changing and a report can tell "nothing measured" from "nobody measured".
_SCHEMA_V6 = """
ALTER TABLE recorders ADD COLUMN boot_id TEXT;
ALTER TABLE recorders ADD COLUMN measures INTEGER NOT NULL DEFAULT 0;
CREATE TABLE impacts (
    id               INTEGER PRIMARY KEY,
    endpoint         TEXT    NOT NULL,
    kind             TEXT    NOT NULL,
    at               TEXT    NOT NULL,
    seconds          REAL    NOT NULL,
    wall_seconds     REAL,
    boottime_seconds REAL,
    booted_at        TEXT,
    first_poll       TEXT,
    exact            INTEGER NOT NULL DEFAULT 1,
    boot_id          TEXT,
    event_id         TEXT    COLLATE NOCASE,
    event_type       TEXT,
    announced        INTEGER,
    tie              TEXT
);
CREATE INDEX impacts_by_time ON impacts (endpoint, at);
CREATE INDEX impacts_by_event ON impacts (event_id) WHERE event_id IS NOT NULL;
-- A boot is told once, whichever agent saw it first.
CREATE UNIQUE INDEX impacts_one_boot ON impacts (endpoint, boot_id) WHERE kind = 'boot';
"""

# Version 7: the agent's steps and the holds keyed by the VM (store.vmkeys): in a column
# of their own, ``vm``, that is their key: its vmId when the writer knew it, else the
# endpoint's key (which every row from before keeps). A key column cannot be added to a
# primary key in place: the two tables are made again, their rows copied.
_SCHEMA_V7 = """
CREATE TABLE agent_steps_v7 (
    vm       TEXT    NOT NULL,
    endpoint TEXT    NOT NULL,
    event_id TEXT    NOT NULL COLLATE NOCASE,
    step     TEXT    NOT NULL,
    rule     TEXT    NOT NULL,
    state    TEXT    NOT NULL,
    detail   TEXT    NOT NULL DEFAULT '',
    started  TEXT,
    updated  TEXT    NOT NULL,
    PRIMARY KEY (vm, event_id, step)
);
INSERT INTO agent_steps_v7 (vm, endpoint, event_id, step, rule, state, detail, started,
                            updated)
    SELECT endpoint, endpoint, event_id, step, rule, state, detail, started, updated
    FROM agent_steps;
DROP TABLE agent_steps;
ALTER TABLE agent_steps_v7 RENAME TO agent_steps;
CREATE TABLE agent_holds_v7 (
    vm       TEXT    NOT NULL,
    endpoint TEXT    NOT NULL,
    event_id TEXT    NOT NULL COLLATE NOCASE,
    held     INTEGER NOT NULL,
    actor    TEXT    NOT NULL,
    time     TEXT    NOT NULL,
    PRIMARY KEY (vm, event_id)
);
INSERT INTO agent_holds_v7 (vm, endpoint, event_id, held, actor, time)
    SELECT endpoint, endpoint, event_id, held, actor, time FROM agent_holds;
DROP TABLE agent_holds;
ALTER TABLE agent_holds_v7 RENAME TO agent_holds;
"""

# Version 8: the agent's hook runs and notifications keyed by the VM as well, in a ``vm``
# column beside the rows' endpoint (not a key: nothing unique changes), so the next agent
# finds them whatever endpoint it polls this VM at. The rows from before keep their
# endpoint's key there.
_SCHEMA_V8 = """
ALTER TABLE agent_hook_runs ADD COLUMN vm TEXT NOT NULL DEFAULT '';
UPDATE agent_hook_runs SET vm = endpoint;
ALTER TABLE agent_notifications ADD COLUMN vm TEXT NOT NULL DEFAULT '';
UPDATE agent_notifications SET vm = endpoint;
"""
# The version from which each of the agent's tables has its ``vm`` column.
VM_COLUMN_SINCE = {"agent_steps": 7, "agent_holds": 7, "agent_hook_runs": 8,
                   "agent_notifications": 8}

# Schema version N -> N+1. Each runs in the transaction that also sets user_version.
# Version 4: every endpoint keyed as one spelling (store.endpoints), no new tables.
_MIGRATIONS: dict[int, str | Callable[[sqlite3.Connection], None]] = {
    0: _SCHEMA_V1, 1: _SCHEMA_V2, 2: _SCHEMA_V3, 3: endpoints.rewrite, 4: _SCHEMA_V5,
    5: _SCHEMA_V6, 6: _SCHEMA_V7, 7: _SCHEMA_V8}


def refuse_foreign(conn: sqlite3.Connection, path: Path) -> None:
    """Before anything writes: the file must be setui's, or empty."""
    version = _version(conn, path)
    if version == 0 and conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
        raise StoreError(f"{path} is an SQLite database but not setui's; refusing to write "
                         "into it. Choose another --data-dir", path=path)


def check_schema(conn: sqlite3.Connection, path: Path, *, readonly: bool) -> None:
    """Create or upgrade the schema when writing; when reading, refuse what is not
    setui's and let an older version answer today's queries."""
    version = _version(conn, path)
    if readonly:
        if version == 0:
            if conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                raise StoreError(f"{path} is an SQLite database but not setui's. Choose "
                                 "another --data-dir", path=path)
            # An empty file: setui was stopped between creating it and the schema.
            raise NothingRecorded(f"{path} holds no setui data yet: nothing was recorded",
                                  path=path)
        if version < SCHEMA_VERSION:
            _read_older(conn, version)
        return
    if version == SCHEMA_VERSION and _guarded(conn):
        return  # the common case takes no write lock: opening never waits for a writer
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = _version(conn, path)  # again, under the lock: another setui may have won
        if version == 0:
            tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if tables:
                raise StoreError(f"{path} is an SQLite database but not setui's; refusing to "
                                 "write into it. Choose another --data-dir", path=path)
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        while version < SCHEMA_VERSION:
            step = _MIGRATIONS[version]
            if callable(step):
                step(conn)
            else:
                for statement in _statements(step):
                    conn.execute(statement)
            version += 1
            conn.execute(f"PRAGMA user_version = {version}")
        for statement in _statements(_GUARDS):
            conn.execute(statement)
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise


def _read_older(conn: sqlite3.Connection, version: int) -> None:
    """Let a read-only open of an older schema answer today's queries: temporary objects
    (which live outside the read-only file) stand in for what later versions added."""
    # Before version 4 the endpoints were stored as written: every table that has rows is
    # read through a view that keys them (store.endpoints). Before version 5 no
    # incarnation kept this VM's name: not known.
    keyed = version < 4
    extra = (", NULL AS clock_skew" if version < 2 else "") + \
        (", NULL AS vm_name" if version < 5 else "")
    if keyed:
        endpoints.keyed_view(conn, "incarnations", extra)
    else:
        conn.execute(f"CREATE TEMP VIEW incarnations AS SELECT *{extra} FROM main.incarnations")
    # Before version 6 no session kept its boot or a heartbeat, and nothing was measured.
    sessions = ", NULL AS boot_id, 0 AS measures" if version < 6 else ""
    if version < 2:
        conn.execute("CREATE TEMP TABLE recorders (id INTEGER PRIMARY KEY, endpoint TEXT, "
                     "pid INTEGER, host TEXT, command TEXT, started TEXT, last_beat TEXT, "
                     "stopped TEXT, boot_id TEXT, measures INTEGER)")
    elif keyed:
        endpoints.keyed_view(conn, "recorders", sessions)
    elif sessions:
        conn.execute(f"CREATE TEMP VIEW recorders AS SELECT *{sessions} FROM main.recorders")
    if version < 6:
        for statement in _statements(_SCHEMA_V6):
            if statement.startswith("CREATE TABLE"):
                conn.execute(statement.replace("CREATE TABLE", "CREATE TEMP TABLE", 1))
    # Before version 7 the steps and the holds, and before version 8 the hook runs and
    # the notifications, were keyed by their endpoint alone: that is their VM
    # (store.vmkeys), as the upgrade keeps it.
    unkeyed = [table for table, since in VM_COLUMN_SINCE.items() if version < since]
    if version < 3:  # no agent ever wrote here: its tables are empty
        for statement in _statements(_SCHEMA_V3):
            if statement.startswith("CREATE TABLE"):
                conn.execute(statement.replace("CREATE TABLE", "CREATE TEMP TABLE", 1))
        for table in unkeyed:
            conn.execute(f"ALTER TABLE temp.{table} ADD COLUMN vm TEXT")
    elif keyed:
        for table in unkeyed:
            endpoints.keyed_view(conn, table, f", {endpoints.SQL_FUNCTION}(endpoint) AS vm")
    else:
        for table in unkeyed:
            conn.execute(f"CREATE TEMP VIEW {table} AS SELECT *, endpoint AS vm "
                         f"FROM main.{table}")


def _normal_sql(text: str) -> str:
    text = " ".join(str(text).split()).rstrip(";").strip()
    return text.replace("CREATE TRIGGER IF NOT EXISTS ", "CREATE TRIGGER ", 1)


_EXPECTED_TRIGGERS = {
    sql.split()[5]: _normal_sql(sql)
    for sql in (s for s in _GUARDS.split(";\n") if s.strip())
}


def trigger_problem(conn: sqlite3.Connection, path: Path) -> str | None:
    """Any trigger setui did not create, or a guard whose SQL differs, in words.

    A trigger runs inside setui's own statements: ``BEFORE INSERT ... RAISE(IGNORE)``
    silently drops the attempt record an approval depends on. Only the two guards, exactly
    as written above, belong in the file."""
    found = {str(name): str(sql or "") for name, sql in conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'trigger'")}
    for name, sql in sorted(found.items()):
        if name not in _EXPECTED_TRIGGERS:
            return (f"{path} holds a trigger setui did not create ({name!r}): it could "
                    "change or drop what setui writes. Someone altered the database; keep "
                    "it for the record and run `setui audit verify`")
        if _normal_sql(sql) != _EXPECTED_TRIGGERS[name]:
            return (f"the guard trigger {name!r} in {path} was altered: someone changed "
                    "the database. Keep it for the record and run `setui audit verify`")
    missing = sorted(set(_EXPECTED_TRIGGERS) - set(found))
    if missing:
        return (f"the guard trigger {missing[0]!r} in {path} was removed: someone changed "
                "the database. Keep it for the record and run `setui audit verify`")
    return None


def _guarded(conn: sqlite3.Connection) -> bool:
    count = conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name "
                         "IN ('audit_no_update', 'audit_no_delete')").fetchone()[0]
    return bool(count == 2)


def _version(conn: sqlite3.Connection, path: Path) -> int:
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if app_id not in (0, APPLICATION_ID):
        raise StoreError(f"{path} belongs to another application (application_id "
                         f"{app_id:#x}); choose another --data-dir", path=path)
    if version > SCHEMA_VERSION:
        raise StoreError(f"{path} was written by a newer setui (schema {version}; this one "
                         f"knows up to {SCHEMA_VERSION}). Upgrade setui to read it",
                         path=path)
    return version


def _statements(script: str) -> list[str]:
    """Split a schema script into statements (executescript would commit our transaction)."""
    out: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        if line.lstrip().startswith("--"):
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            out.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        out.append(buffer.strip())
    return out

