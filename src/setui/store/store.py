"""``Store``: what a caller opens to keep or read the record, in one SQLite file.

It opens the database once (store.connection) and hands out its three parts over it: the
``history`` of incarnations, the ``audit_log`` (all an approval needs) and the recording
``sessions``; ``record`` reads the three as a front end does (store.reading.Record).
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType

from setui.settings.environment import from_environment
from setui.store.audit import AuditLog
from setui.store.connection import Database
from setui.store.errors import StoreError
from setui.store.history import History
from setui.store.place import DB_NAME, default_data_dir
from setui.store.sessions import RecordingSessions
from setui.store.stored import StoredRecord
from setui.system.auditforward import Forwarder

__all__ = ["Store"]


class Store:
    """History of incarnations, the hash-chained audit log and the recording sessions,
    in one SQLite file.

    ``history_days=None`` (or 0, as the config file spells it) keeps the history
    forever; the audit log is always kept whole.
    """

    def __init__(self, path: Path | str, *, timeout: float = 5.0,
                 history_days: int | None = 90, readonly: bool = False,
                 forward: str | None = None) -> None:
        path = Path(path)
        # Where each audit record also goes as it is written (setui.system.auditforward):
        # ``forward``, else SETUI_AUDIT_FORWARD, else auto.
        try:
            forwarder = Forwarder.from_setting(
                forward if forward is not None else from_environment("audit_forward"))
        except ValueError as exc:
            raise StoreError(str(exc), path=path) from None
        self.database = Database(path, timeout=timeout, readonly=readonly)
        self.history = History(self.database, history_days=history_days)
        self.audit_log = AuditLog(self.database, forwarder)
        self.sessions = RecordingSessions(self.database)
        self.record = StoredRecord(self.database, self.history, self.audit_log,
                                   self.sessions)

    @classmethod
    def open_dir(cls, data_dir: Path | str | None = None, **kw: object) -> Store:
        """``<data_dir>/setui.db``; the directory defaults to :func:`default_data_dir`."""
        directory = Path(data_dir).expanduser() if data_dir is not None else default_data_dir()
        # kw is Store()'s own keywords, passed on: named there once, not again here.
        return cls(directory / DB_NAME, **kw)  # type: ignore[arg-type]

    @property
    def path(self) -> Path:
        return self.database.path

    @property
    def readonly(self) -> bool:
        return self.database.readonly

    def close(self) -> None:
        self.database.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        state = ("closed" if self.database.closed
                 else "read-only" if self.readonly else "open")
        return f"<Store {str(self.path)!r} {state}>"
