"""The audit log's witness: a file beside the database naming its newest record.

``setui.db.audit-head`` holds the seq and hash of the newest audit record, written after
each append (owner-only, replaced atomically, never through a link). It outlives the
database: a witness without its database is a deleted log (store.connection refuses
to start a new one beside it), and one naming more than the log holds is a truncated
log (store.audit's verify). It trails the database by design: see store.audit.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from setui.store.errors import StoreError
from setui.store.place import Sharing, read_nofollow
from setui.system.atomicfile import write_atomically

__all__ = ["read_witness", "update_witness", "witness_path"]


def witness_path(db_path: Path) -> Path:
    """``setui.db.audit-head``: named after the database, so two never share one."""
    return db_path.with_name(db_path.name + ".audit-head")


def read_witness(path: Path) -> tuple[int, str] | None:
    """(seq, hash) from the witness, None if there is none; OSError or ValueError if it
    cannot be read or is not a witness."""
    try:
        text = read_nofollow(path).decode("ascii")
    except FileNotFoundError:
        return None
    except StoreError as exc:  # a symbolic link: never followed
        raise ValueError(exc.message) from None
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    seq, digest = data.get("seq"), data.get("hash")
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1 \
            or not isinstance(digest, str) or len(digest) != 64:
        raise ValueError("it holds no record number and hash")
    return seq, digest


def update_witness(conn: sqlite3.Connection, path: Path, seq: int, digest: str,
                   *, sharing: Sharing | None = None) -> str | None:
    """Make the witness name record ``seq`` (just committed); why not, if it was not.

    Never raises: the records are committed already, and an exception would read as
    "not recorded". A witness the log contradicts is left as it is, so the evidence of a
    truncated or replaced log survives the records appended after it.
    """
    try:
        try:
            current = read_witness(path)
        except (OSError, ValueError, UnicodeDecodeError):
            current = None  # unreadable: nothing in it is worth keeping; replace it
        if current is not None:
            row = conn.execute("SELECT hash FROM audit WHERE seq = ?",
                               (current[0],)).fetchone()
            if row is None or row[0] != current[1]:
                return (f"the audit head witness {path} names record {current[0]}, which the "
                        "log does not have as it was: it is kept as evidence and not updated. "
                        "Run `setui audit verify`")
            if current[0] >= seq:
                return None  # another setui appended after us and wrote a newer one
        write_atomically(path, json.dumps({"seq": seq, "hash": digest}) + "\n",
                         made=sharing.apply if sharing is not None else None)
    except (OSError, sqlite3.Error, OverflowError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        return (f"cannot write the audit head witness {path}: {reason}. The record itself "
                "was written; `setui audit verify` will say the witness is behind")
    return None
