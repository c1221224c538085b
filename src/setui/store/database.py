"""``Database``: the one opened SQLite file the history, the audit log and the recording
sessions share (store.store hands the three out over it).

It owns the connection and serialises its use with a lock (the dashboard records from a
worker while an approval runs), and turns every sqlite3 error into a :class:`StoreError`
that says what failed, where, and what to do. The file itself is made and upgraded by
store.db; this is one process's handle on it.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

from setui.store import audit as audit_log
from setui.store.db import NothingRecorded, StoreError, connect, describe_error, prepare_file
from setui.store.place import Sharing, foreign_entries
from setui.textsafe import printable

__all__ = ["Database"]


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
        witness = audit_log.witness_path(self.path)
        try:
            if os.path.lexists(self.path) and _has_schema(self.path):
                return
            try:
                named = audit_log.read_witness(witness)
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
