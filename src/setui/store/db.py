"""The SQLite file: where it lives, who may read it, its schema, and errors in words.

One database holds both the incarnation history and the audit log, so an approval and
the document it was made against are in the same place and the same backup. WAL mode
lets a ``setui watch`` service and an operator's dashboard write at the same time;
``synchronous=FULL`` makes every commit durable before it returns, which is what lets
setui say "recorded" before it posts an approval.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

from setui.store import endpoints
from setui.store.place import (
    DB_NAME,
    Sharing,
    check_dir,
    check_file,
    default_data_dir,
    make_dirs,
    open_nofollow,
)
from setui.store.reading import RecordError

__all__ = [
    "APPLICATION_ID",
    "DB_NAME",
    "SCHEMA_VERSION",
    "NothingRecorded",
    "ReadOnlyStore",
    "StoreError",
    "connect",
    "default_data_dir",
    "describe_error",
    "prepare_file",
    "trigger_problem",
    "write_transaction",
]

SCHEMA_VERSION = 8
APPLICATION_ID = 0x53455455  # "SETU": marks the file as setui's, so we never write elsewhere


class StoreError(RecordError):
    """The store cannot do what was asked; the message says what, where, and what to do."""

    def __init__(self, message: str, *, path: Path | None = None) -> None:
        super().__init__(message)
        self.path = path


class ReadOnlyStore(StoreError):
    """A store this user may read but never write (another's that lets this user read it,
    as the agent's did before it was root's alone). A front end reads it, and records and
    approves nothing there."""


class NothingRecorded(StoreError):
    """A reader found no setui data: no file yet, or one created but never given a schema
    (setui was stopped between the two). Readers report an empty history, not an error."""


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


def describe_error(exc: BaseException, path: Path, doing: str, timeout: float = 5.0) -> str:
    """A sqlite3 or OS error as a sentence for the operator: what failed and what to do."""
    text = str(exc)
    low = text.lower()
    name = getattr(exc, "sqlite_errorname", "") or ""
    # Reading needs only read permission; only a writer is told to make things writable.
    reading = doing.startswith(("read", "verify"))
    if reading and ("readonly" in name.lower() or "readonly" in low or "unable to open" in low):
        return (f"cannot {doing}: cannot open {path} for reading ({text}). Check that you may "
                f"read {path} and {path.parent}, or use --data-dir / SETUI_DATA_DIR")
    if "readonly" in name.lower() or "readonly" in low or "read-only" in low:
        return (f"cannot {doing}: the database {path} is read-only. Check the permissions "
                f"of {path} and {path.parent}, or choose another place with --data-dir or "
                "SETUI_DATA_DIR")
    if "full" in name.lower() or "disk is full" in low or "no space" in low:
        return (f"cannot {doing}: the disk holding {path} is full. Free some space and "
                "try again")
    if "disk i/o error" in low or name.startswith("SQLITE_IOERR"):
        return (f"cannot {doing}: writing {path} failed ({text}); the disk may be full, "
                "over quota or failing")
    if "locked" in low or "busy" in low:
        return (f"cannot {doing}: the database {path} stayed locked by another process for "
                f"more than {timeout:g} s (another setui writing?). Try again")
    if "not a database" in low or "malformed" in low or "corrupt" in low:
        return (f"cannot {doing}: {path} is damaged or is not a setui database ({text}). "
                "Move it aside and keep it for the record; setui then starts a new one")
    if "unable to open" in low:
        return (f"cannot {doing}: cannot open {path}. Check that {path.parent} exists and "
                "that you may write to it, or use --data-dir / SETUI_DATA_DIR")
    if isinstance(exc, OverflowError):
        return (f"cannot {doing} ({path}): a number is larger than the database can hold "
                f"(at most {2**63 - 1}): {text}")
    if isinstance(exc, OSError):
        reason = exc.strerror or text
        return f"cannot {doing}: {reason}: {exc.filename or path}"
    return f"cannot {doing} ({path}): {text}"


@contextlib.contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """Statements in one write transaction (``BEGIN IMMEDIATE``): what they read cannot
    change before they commit; none of them stays if one fails."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def prepare_file(path: Path) -> Sharing:
    """Make the data directory (0700, parents too) and an empty database file if missing,
    after checking the directory may hold an audit log; who reads what is made there.

    The file is created by us rather than by SQLite so it has its mode from its first byte
    (0600, the agent's store too), whatever the umask;
    SQLite gives its -wal and -shm files the database's mode (and, as root, its owner and
    group). Nothing here follows a symbolic link.
    """
    data_dir = path.parent
    try:
        if not data_dir.exists():
            make_dirs(data_dir)
        sharing = Sharing(check_dir(data_dir, write=True))
        for name in (path.name, f"{path.name}-wal", f"{path.name}-shm",
                     f"{path.name}-journal"):
            check_file(data_dir / name, write=True)
        # The witness is replaced by a rename, never written through; only a link in its
        # place is refused (anything else is a witness that cannot be written: a warning).
        if (data_dir / f"{path.name}.audit-head").is_symlink():
            check_file(data_dir / f"{path.name}.audit-head", write=True)
        if not os.path.lexists(path):
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
            with contextlib.suppress(FileExistsError):  # another setui was quicker
                fd = open_nofollow(path, flags, sharing.mode)
                try:
                    sharing.apply(fd)
                finally:
                    os.close(fd)
    except OSError as exc:
        raise StoreError(describe_error(exc, path, "create the history and audit log"),
                         path=path) from None
    return sharing


def connect(path: Path, *, timeout: float, readonly: bool) -> sqlite3.Connection:
    """Open ``path``, set the pragmas, create or migrate the schema (never when reading).

    The file is checked first (a regular file, not a symbolic link) and, before any
    statement that writes (WAL mode included), checked to be setui's or empty: another
    program's database is left exactly as it was.
    """
    if readonly:
        if not path.parent.exists():
            raise NothingRecorded(f"there is no setui database at {path} yet: nothing was "
                                  "recorded", path=path)
        check_dir(path.parent, write=False)
        if not check_file(path, write=False):
            raise NothingRecorded(f"there is no setui database at {path} yet: nothing was "
                                  "recorded", path=path)
        return _connect_readonly(path, timeout)
    conn: sqlite3.Connection | None = None
    try:
        check_file(path, write=False)  # a directory, a link: refused in words
        _check_nofollow(path)
        conn = _open(_uri(path, "rw"), timeout)
        _refuse_foreign(conn, path)
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError(f"cannot use {path}: SQLite refused WAL mode ({mode})", path=path)
        _check_schema(conn, path, readonly=False)
        return conn
    except StoreError:
        if conn is not None:
            conn.close()
        raise
    except (sqlite3.Error, OSError) as exc:
        if conn is not None:
            conn.close()
        raise StoreError(describe_error(exc, path, "open the history and audit log", timeout),
                         path=path) from None


def _check_nofollow(path: Path) -> None:
    """Open the file ourselves without following a link: SQLite would follow it."""
    os.close(open_nofollow(path, os.O_RDONLY))


def _refuse_foreign(conn: sqlite3.Connection, path: Path) -> None:
    """Before anything writes: the file must be setui's, or empty."""
    version = _version(conn, path)
    if version == 0 and conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
        raise StoreError(f"{path} is an SQLite database but not setui's; refusing to write "
                         "into it. Choose another --data-dir", path=path)


def _uri(path: Path, mode: str, *extra: str) -> str:
    return f"file:{quote(str(path))}?" + "&".join((f"mode={mode}", *extra))


def _open(target: str, timeout: float,
          factory: type[sqlite3.Connection] = sqlite3.Connection) -> sqlite3.Connection:
    conn = sqlite3.connect(target, uri=True, timeout=timeout, isolation_level=None,
                           check_same_thread=False, factory=factory)
    try:
        conn.execute(f"PRAGMA busy_timeout = {max(0, int(timeout * 1000))}")
        conn.execute("PRAGMA synchronous = FULL")
        endpoints.register(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def _reader(target: str, path: Path, timeout: float,
            factory: type[sqlite3.Connection] = sqlite3.Connection) -> sqlite3.Connection:
    """A read-only connection whose schema was checked; sqlite3.Error if it cannot read."""
    conn = _open(target, timeout, factory)
    try:
        _check_schema(conn, path, readonly=True)
    except BaseException:
        conn.close()
        raise
    return conn


def _connect_readonly(path: Path, timeout: float) -> sqlite3.Connection:
    """Read ``path`` without ever writing to it or beside it.

    A WAL database is read through its ``-shm`` file, which SQLite must create when it is
    missing: in a directory or on a filesystem the reader cannot write (a snapshot, a
    mount of another machine's disk, an auditor's account) the plain read-only open
    fails. Then, when no ``-wal`` holds unmerged records, the file alone is the whole
    database and is opened as immutable; otherwise the database and its ``-wal`` are
    copied to a private temporary directory and the copy is read (``immutable`` would
    silently leave out the newest records, which are the ones an audit is about).
    """
    try:
        return _reader(_uri(path, "ro"), path, timeout)
    except StoreError:
        raise
    except (sqlite3.Error, OSError) as exc:
        if not _cannot_share(exc):
            raise StoreError(describe_error(exc, path, "read the history and audit log",
                                            timeout), path=path) from None
        first: BaseException = exc
    wal = Path(f"{path}-wal")
    try:
        if not wal.exists() or wal.stat().st_size == 0:
            return _reader(_uri(path, "ro", "immutable=1"), path, timeout)
        return _read_copy(path, wal, timeout)
    except StoreError:
        raise
    except (sqlite3.Error, OSError) as exc:
        # Say what went wrong with the file itself, if the second try got that far;
        # otherwise the first error, which names the real obstacle.
        cause = first if _cannot_share(exc) else exc
        raise StoreError(
            describe_error(cause, path, "read the history and audit log", timeout)
            + f" (setui cannot write beside it in {path.parent}, so it also tried to read "
              "it from a copy or as unchanging, and that failed too)", path=path) from None


def _cannot_share(exc: BaseException) -> bool:
    """Whether the error is SQLite failing to open or create the shared-memory file (the
    read-only fallbacks can help) rather than a damaged or busy database (they cannot)."""
    name = str(getattr(exc, "sqlite_errorname", "") or "")  # Python 3.11+
    if name:
        return name.startswith(("SQLITE_CANTOPEN", "SQLITE_READONLY", "SQLITE_IOERR_SHM"))
    text = str(exc).lower()
    return "unable to open" in text or "readonly database" in text


class _CopyConnection(sqlite3.Connection):
    """A connection to a private copy of the database: closing it deletes the copy."""

    _cleanup: weakref.finalize[..., _CopyConnection] | None = None

    def close(self) -> None:
        super().close()
        if self._cleanup is not None:
            self._cleanup()


def _read_copy(path: Path, wal: Path, timeout: float) -> sqlite3.Connection:
    """Copy the database and its -wal (owner-only) and open the copy read-only."""
    directory = Path(tempfile.mkdtemp(prefix="setui-read-"))
    try:
        copy = directory / path.name
        # Another process may be writing (and checkpointing) while we copy: only a copy
        # during which neither file changed is one consistent state.
        for _ in range(5):
            before = _stamp(path, wal)
            shutil.copyfile(path, copy)
            shutil.copyfile(wal, Path(f"{copy}-wal"))
            if _stamp(path, wal) == before:
                break
        else:
            raise StoreError(f"cannot read {path}: it kept changing while setui copied it "
                             "(it cannot read it in place: the directory is read-only). "
                             "Try again", path=path)
        conn = _reader(_uri(copy, "ro"), path, timeout, factory=_CopyConnection)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    assert isinstance(conn, _CopyConnection)
    # Also removed if the connection is dropped without close(), or at exit.
    conn._cleanup = weakref.finalize(conn, shutil.rmtree, str(directory), True)
    return conn


def _stamp(*files: Path) -> tuple[tuple[int, int], ...]:
    return tuple((f.stat().st_size, f.stat().st_mtime_ns) for f in files)


def _check_schema(conn: sqlite3.Connection, path: Path, *, readonly: bool) -> None:
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

