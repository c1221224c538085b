"""The one opened SQLite file: made safely, opened (read-only too), and its use serialised.

:class:`Database` is one process's handle on the store's file, which the history, the
audit log, the recording sessions and the agent's work share (store.store hands them
out over it). It owns the connection and serialises its use with a lock (the dashboard
records from a worker while an approval runs), and turns every sqlite3 error into a
:class:`StoreError` that says what failed, where, and what to do.

WAL mode lets a ``setui watch`` service and an operator's dashboard write at the same
time; ``synchronous=FULL`` makes every commit durable before it returns, which is what
lets setui say "recorded" before it posts an approval. The schema is store.schema's.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

from setui.core.textsafe import printable
from setui.store import endpoints
from setui.store.errors import NothingRecorded, StoreError, describe_error
from setui.store.place import (
    Sharing,
    check_dir,
    check_file,
    foreign_entries,
    make_dirs,
    open_nofollow,
)
from setui.store.schema import check_schema, refuse_foreign
from setui.store.witness import read_witness, witness_path

__all__ = ["Database", "connect", "prepare_file", "write_transaction"]


class Database:
    """One connection to the setui database at ``path``; ``readonly`` refuses every write
    (in words naming what was refused) before SQLite is asked."""

    def __init__(self, path: Path, *, timeout: float = 5.0, readonly: bool = False) -> None:
        self.path = path
        self.timeout = timeout
        self.readonly = readonly
        # Who reads the files made here (the witness): set when opened for writing.
        self.sharing: Sharing | None = None
        if not readonly:
            self._refuse_lost_log()
            self.sharing = prepare_file(self.path)
        try:
            self._conn: sqlite3.Connection | None = connect(self.path, timeout=timeout,
                                                            readonly=readonly)
        except NothingRecorded:
            self._refuse_lost_log()
            if foreign := foreign_entries(self.path.parent, self.path.name):
                raise StoreError(
                    f"{self.path.parent} holds no setui database, but other files "
                    f"({', '.join(printable(n, 40) for n in foreign[:3])}"
                    f"{', ...' if len(foreign) > 3 else ''}): it is not a setui data "
                    "directory. Check --data-dir / SETUI_DATA_DIR", path=self.path) from None
            raise
        self._lock = threading.RLock()

    def _refuse_lost_log(self) -> None:
        """A witness without its database (or with an empty one): the log was deleted or
        moved. Saying "nothing recorded" then would be false, and starting a new log
        beside the witness would bury the evidence."""
        witness = witness_path(self.path)
        try:
            if os.path.lexists(self.path) and _has_schema(self.path):
                return
            try:
                named = read_witness(witness)
            except (ValueError, UnicodeDecodeError):
                named = (0, "") if witness.is_file() and not witness.is_symlink() else None
        except OSError:
            return  # cannot even look: opening the store says what is wrong, in words
        if named is None:
            return
        what = f"record {named[0]}" if named[0] else "records"
        raise StoreError(
            f"the audit log is missing: the witness {witness} names {what}, but "
            f"{self.path} {'is empty' if os.path.lexists(self.path) else 'does not exist'}. "
            "The database was deleted, moved or replaced. Restore it from a backup or an "
            "export; to start a new log on purpose, move the witness aside (keep it as "
            "evidence)", path=self.path)

    @property
    def closed(self) -> bool:
        return self._conn is None

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.close()
                self._conn = None

    @contextlib.contextmanager
    def using(self, doing: str, *, write: bool = False) -> Iterator[sqlite3.Connection]:
        """The connection, held under the lock for the ``with`` block; ``doing`` names
        the work in any error ("cannot <doing>: ...")."""
        with self._lock:
            if self._conn is None:
                raise StoreError(f"cannot {doing}: the store {self.path} is closed",
                                 path=self.path)
            if write and self.readonly:
                raise StoreError(f"cannot {doing}: {self.path} was opened read-only",
                                 path=self.path)
            try:
                yield self._conn
            except (sqlite3.Error, OverflowError) as exc:
                # OverflowError: a number past SQLite's 64-bit integers, which the parser
                # should have refused; an error in words either way, never a traceback.
                raise StoreError(describe_error(exc, self.path, doing, self.timeout),
                                 path=self.path) from None


def _has_schema(path: Path) -> bool:
    """Whether the file holds more than nothing (SQLite's empty file, or one setui
    created and was stopped before it wrote the schema): its size says so."""
    try:
        return os.lstat(path).st_size > 0
    except OSError:
        return True  # let the open say what is wrong with it


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
        refuse_foreign(conn, path)
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError(f"cannot use {path}: SQLite refused WAL mode ({mode})", path=path)
        check_schema(conn, path, readonly=False)
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
        check_schema(conn, path, readonly=True)
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
