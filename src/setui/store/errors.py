"""The errors of the record, in words: what failed, where, and what to do.

:class:`RecordError` is what a front end catches, whoever read the record: a store's
:class:`StoreError` or the agent's API error. Every module of the store raises these, so
they sit below all of them (store.place too) and import nothing of the store.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["NothingRecorded", "ReadOnlyStore", "RecordError", "StoreError", "describe_error"]


class RecordError(Exception):
    """The record cannot be read as asked: a store's error (setui.store.StoreError) or
    the agent's (setui.api.client.ApiError); ``message`` says what, for people."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


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

