"""The audit log: append-only records in a SHA-256 hash chain, and :class:`AuditLog`, the
store's part that writes and reads it (all an approval needs: the approver holds only
this), with its copy off the VM (setui.system.auditforward).

Each record's hash covers its content (a canonical JSON of every column but the hashes)
and the previous record's hash, starting from 64 zeros. A one-row ``audit_head`` table,
written in the same transaction as each record, holds the newest seq and hash. After
each append the same seq and hash are also written to a witness file beside the
database (store.witness).

What :func:`verify` finds:

* a record altered, inserted, or removed from the start or the middle, unless the chain
  after it was recomputed;
* records removed from the end when ``audit_head`` was left alone, or when the
  ``audit_head`` row or table was removed;
* records removed from the end with ``audit_head`` rewritten to match (or the whole
  database replaced by an older copy), by comparing with the witness file: it names
  more records than the log has, or a hash the log does not have.

What it does not find: someone who edits both the database and the witness (or deletes
the witness: a store written by an older setui has none, so a missing witness is only a
warning), or who recomputes the whole chain. Anyone who can write the data directory
and has read this can do that; what anchors the log is a copy they cannot reach: the
forward of each record as it is written (setui.system.auditforward), or an export, checked with
``setui audit verify --against``.

The witness trails the database by design: it is written after the commit, so a crash
in between, a failed write (a full disk, a witness that is not a file) or two setui
processes appending at the same moment leave it naming an older record. Verify reports
that as a warning, never as tampering; the next append brings it up to date.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from setui.core.clock import utc_now
from setui.core.textsafe import printable
from setui.store import claims
from setui.store.connection import Database
from setui.store.errors import StoreError
from setui.store.records import (
    APPROVE_ATTEMPT,
    APPROVED,
    UNKNOWN,
    AuditEntry,
    AuditRecord,
    VerifyResult,
    clean_text,
    from_db_time,
    stored_json,
    to_db_time,
)
from setui.store.schema import trigger_problem
from setui.store.vmkeys import ThisVm
from setui.store.witness import read_witness, update_witness, witness_path
from setui.system.auditforward import Forwarder

__all__ = ["GENESIS", "AuditLog", "append", "chain_hash", "for_event", "listing", "verify"]

GENESIS = "0" * 64

_COLUMNS = ("seq, time, action, os_user, ssh_client, host, endpoint, event_id, event_json, "
            "incarnation, attempt_seq, status, error, latency_ms, details_json, prev_hash, hash")


def _opt(text: str | None) -> str | None:
    return None if text is None else clean_text(str(text))


def _content(seq: int, values: dict[str, Any]) -> dict[str, Any]:
    """The hashed content of a record: every field except the hashes, by stable names."""
    return {"seq": seq, **values}


def chain_hash(prev_hash: str, content: dict[str, Any]) -> str:
    """sha256(prev_hash + "\\n" + canonical JSON of the content), as hex."""
    return hashlib.sha256((prev_hash + "\n" + stored_json(content)).encode("ascii")).hexdigest()


def _values(entry: AuditEntry) -> dict[str, Any]:
    latency_ms = None if entry.latency is None else round(float(entry.latency) * 1000.0, 3)
    return {
        "time": to_db_time(entry.time),
        "action": clean_text(entry.action),
        "user": clean_text(entry.user),
        "ssh_client": _opt(entry.ssh_client),
        "host": clean_text(entry.host),
        "endpoint": clean_text(entry.endpoint),
        "event_id": _opt(entry.event_id),
        "event": json.loads(stored_json(dict(entry.event))) if entry.event is not None else None,
        "incarnation": None if entry.incarnation is None else int(entry.incarnation),
        "attempt_seq": None if entry.attempt_seq is None else int(entry.attempt_seq),
        "status": None if entry.status is None else int(entry.status),
        "error": _opt(entry.error),
        "latency_ms": latency_ms,
        "details": json.loads(stored_json(dict(entry.details))),
    }


def append(conn: sqlite3.Connection, entries: Sequence[AuditEntry], path: Path, *,
           guard: Callable[[sqlite3.Connection], None] | None = None) -> list[AuditRecord]:
    """Append ``entries`` in one transaction, committed (durably) before returning.

    ``guard`` runs first inside that write transaction: what it reads cannot change before
    the records are committed, and an exception from it appends nothing (store.claims)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        if guard is not None:
            guard(conn)
        if "audit_head" not in _tables(conn):
            raise StoreError(
                f"the audit log in {path} has lost its head table: it may have been "
                "tampered with. Run `setui audit verify`; setui records nothing more on "
                "top of it", path=path)
        head = conn.execute("SELECT seq, hash FROM audit_head WHERE id = 1").fetchone()
        if head is None:
            if conn.execute("SELECT max(seq) FROM audit").fetchone()[0] is not None:
                raise StoreError(
                    f"the audit log in {path} has records but no head record: it may have "
                    "been tampered with. Run `setui audit verify`; setui records nothing "
                    "more on top of it", path=path)
            seq, prev = 0, GENESIS
        else:
            seq, prev = int(head[0]), str(head[1])
        out: list[AuditRecord] = []
        for entry in entries:
            seq += 1
            values = _values(entry)
            digest = chain_hash(prev, _content(seq, values))
            try:
                conn.execute(
                    f"INSERT INTO audit ({_COLUMNS}) VALUES "
                    "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (seq, values["time"], values["action"], values["user"],
                     values["ssh_client"], values["host"], values["endpoint"],
                     values["event_id"],
                     None if values["event"] is None else stored_json(values["event"]),
                     values["incarnation"], values["attempt_seq"], values["status"],
                     values["error"], values["latency_ms"], stored_json(values["details"]),
                     prev, digest))
            except sqlite3.IntegrityError:
                raise StoreError(
                    f"the audit log in {path} holds records after its head (record {seq} "
                    "exists already): it may have been tampered with. Run `setui audit "
                    "verify`", path=path) from None
            out.append(_record_from(seq, values, prev, digest, None))
            prev = digest
        conn.execute(
            "INSERT INTO audit_head (id, seq, hash) VALUES (1, ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash",
            (seq, prev))
        _read_back(conn, out, path)
        conn.execute("COMMIT")
        return out
    except BaseException:
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise


def _read_back(conn: sqlite3.Connection, written: Sequence[AuditRecord], path: Path) -> None:
    """Inside the transaction, before it commits: the records and the head are there as
    written. A planted trigger (``RAISE(IGNORE)``) or a damaged page could otherwise let
    an approval go out with no record of it."""
    first, last = written[0].seq, written[-1].seq
    got = conn.execute("SELECT seq, hash FROM audit WHERE seq BETWEEN ? AND ? ORDER BY seq",
                       (first, last)).fetchall()
    head = conn.execute("SELECT seq, hash FROM audit_head WHERE id = 1").fetchone()
    if [tuple(r) for r in got] != [(r.seq, r.hash) for r in written] \
            or head is None or tuple(head) != (last, written[-1].hash):
        raise StoreError(
            f"the audit log in {path} did not keep the record{'s' if first != last else ''} "
            f"just written (record {first}{f' to {last}' if first != last else ''} cannot be "
            "read back): the database was altered or is damaged. Nothing was recorded",
            path=path)


def _record_from(seq: int, values: dict[str, Any], prev: str, digest: str,
                 has_outcome: bool | None) -> AuditRecord:
    return AuditRecord(
        seq=seq, action=values["action"], time=from_db_time(values["time"]),
        user=values["user"], host=values["host"], endpoint=values["endpoint"],
        ssh_client=values["ssh_client"], event_id=values["event_id"], event=values["event"],
        incarnation=values["incarnation"], attempt_seq=values["attempt_seq"],
        status=values["status"], error=values["error"], latency_ms=values["latency_ms"],
        details=values["details"], prev_hash=prev, hash=digest, has_outcome=has_outcome)


def _row_values(row: Sequence[Any]) -> dict[str, Any]:
    """A stored row back into the content's values; ValueError if it cannot be read."""
    def loads(text: Any) -> Any:
        if text is None:
            return None
        if not isinstance(text, str):
            raise ValueError("not JSON text")
        return json.loads(text)

    details = loads(row[14])
    return {
        "time": row[1], "action": row[2], "user": row[3], "ssh_client": row[4],
        "host": row[5], "endpoint": row[6], "event_id": row[7], "event": loads(row[8]),
        "incarnation": row[9], "attempt_seq": row[10], "status": row[11], "error": row[12],
        "latency_ms": row[13], "details": {} if details is None else details,
    }


def _to_record(row: Sequence[Any], has_outcome: bool | None) -> AuditRecord:
    try:
        values = _row_values(row)
        return _record_from(int(row[0]), values, str(row[15]), str(row[16]), has_outcome)
    except (ValueError, TypeError):
        # A damaged row is still listed (verify says what is wrong with it).
        return AuditRecord(
            seq=int(row[0]), action=str(row[2]), time=_time_or_epoch(row[1]),
            user=str(row[3]), host=str(row[5]), endpoint=str(row[6]), ssh_client=None,
            event_id=None if row[7] is None else str(row[7]), event=None, incarnation=None,
            attempt_seq=None, status=None, error="(this record cannot be read)",
            latency_ms=None, details={}, prev_hash=str(row[15]), hash=str(row[16]),
            has_outcome=has_outcome)


def _time_or_epoch(text: Any) -> datetime:
    try:
        return from_db_time(str(text))
    except ValueError:
        return datetime(1970, 1, 1, tzinfo=timezone.utc)


_WITH_OUTCOME = (f"SELECT {', '.join('a.' + c.strip() for c in _COLUMNS.split(','))}, "
                 "CASE WHEN a.action = 'approve-attempt' THEN EXISTS (SELECT 1 FROM audit o "
                 "WHERE o.attempt_seq = a.seq AND o.action = 'approve-outcome') END "
                 "FROM audit a")


def listing(conn: sqlite3.Connection, limit: int | None, oldest_first: bool, *,
            after: int | None = None, before: int | None = None) -> list[AuditRecord]:
    """Records in seq order (``after`` < seq < ``before``), with whether each attempt
    has an outcome."""
    where: list[str] = []
    params: list[Any] = []
    if after is not None:
        where.append("a.seq > ?")
        params.append(after)
    if before is not None:
        where.append("a.seq < ?")
        params.append(before)
    sql = _WITH_OUTCOME + (" WHERE " + " AND ".join(where) if where else "")
    sql += f" ORDER BY a.seq {'ASC' if oldest_first else 'DESC'}"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(max(0, limit))
    return [_to_record(row[:17], _bool(row[17])) for row in conn.execute(sql, params)]


def for_event(conn: sqlite3.Connection, event_id: str) -> list[AuditRecord]:
    rows = conn.execute(_WITH_OUTCOME + " WHERE a.event_id = ? COLLATE NOCASE ORDER BY a.seq",
                        (event_id,))
    return [_to_record(row[:17], _bool(row[17])) for row in rows]


def _bool(value: Any) -> bool | None:
    return None if value is None else bool(value)


def _rows(conn: sqlite3.Connection) -> Iterator[Sequence[Any]]:
    yield from conn.execute(f"SELECT {_COLUMNS} FROM audit ORDER BY seq")


def _hash_matches(row: Sequence[Any], seq: int) -> bool:
    try:
        values = _row_values(row)
    except (ValueError, TypeError):
        return False
    stored: object = row[16]
    return chain_hash(str(row[15]), _content(seq, values)) == stored


def _removed(first: int, last: int, where: str) -> str:
    if first == last:
        return f"record {first} was removed{where}"
    return f"records {first} to {last} were removed{where}"


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {str(row[0]) for row in
            conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


# -- verify --------------------------------------------------------------------------------
def verify(conn: sqlite3.Connection, witness: Path | None = None) -> VerifyResult:
    """Recompute the chain; the first record altered, inserted or removed, in words.

    With ``witness``, the chain's end is also compared with the witness file there.

    Another setui may append while this reads. The witness is read first, then the log's
    head and records in one read transaction: a witness is written after its records are
    committed, so read in this order it can only be behind what is read of the log, and
    the head and the records are of the same moment (read apart, a record committed in
    between looked inserted behind the head's back).
    """
    try:
        witnessed = read_witness(witness) if witness is not None else None
        unreadable = None
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        witnessed = None
        unreadable = getattr(exc, "strerror", None) or str(exc)
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN")
    try:
        return _verify_snapshot(conn, witness, witnessed, unreadable)
    finally:
        if own and conn.in_transaction:
            conn.execute("ROLLBACK")  # it only read


def _verify_snapshot(conn: sqlite3.Connection, witness: Path | None,
                     witnessed: tuple[int, str] | None, unreadable: str | None
                     ) -> VerifyResult:
    tables = _tables(conn)
    if "audit" not in tables:
        return VerifyResult(ok=False, count=0, first_bad=1, problem=(
            "the audit table was removed: the whole log is gone"))
    head = None
    if "audit_head" in tables:
        head = conn.execute("SELECT seq, hash FROM audit_head WHERE id = 1").fetchone()
    head_seq = None if head is None else int(head[0])
    head_hash = None if head is None else str(head[1])

    def bad(first: int | None, problem: str, count: int) -> VerifyResult:
        return VerifyResult(ok=False, count=count, first_bad=first, problem=problem,
                            head_seq=head_seq, head_hash=head_hash)

    witnessed_hash: str | None = None  # the log's hash of the record the witness names

    expected, prev, count = 1, GENESIS, 0
    for row in _rows(conn):
        count += 1
        seq = int(row[0])
        if seq < expected:
            return bad(seq, f"record {seq} was inserted (records are numbered from 1)", count)
        if seq > expected:
            return bad(expected, _removed(expected, seq - 1,
                                          f" (the log jumps from {expected - 1} to {seq})"),
                       count)
        if head_seq is not None and seq > head_seq:
            return bad(seq, f"record {seq} was inserted after the newest record the log "
                            "knows of", count)
        if not _hash_matches(row, seq):
            if seq > 1 and _hash_matches(row, seq - 1):
                return bad(seq - 1, f"record {seq - 1} was inserted (the records after it "
                                    "were renumbered)", count)
            if _hash_matches(row, seq + 1):
                return bad(seq, f"a record was removed before record {seq} (the records "
                                "after it were renumbered)", count)
            return bad(seq, f"record {seq} was altered (its content does not match its "
                            "hash)", count)
        if row[15] != prev:
            if seq == 1:
                return bad(1, "record 1 was replaced: it does not start the chain", count)
            return bad(seq - 1, f"the chain breaks between records {seq - 1} and {seq}: one "
                                "of them was replaced, or a record was inserted between them",
                       count)
        if witnessed is not None and seq == witnessed[0]:
            witnessed_hash = str(row[16])
        prev, expected = str(row[16]), seq + 1
    last = expected - 1
    if "audit_head" not in tables:
        return bad(last + 1 if not count else last, "the audit_head table was removed: the "
                   "newest records may have been removed with it", count)
    if head_seq is None:
        if count:
            return bad(last, "the audit head is missing: the newest records may have been "
                             "removed", count)
    elif head_seq > last:
        return bad(last + 1, _removed(last + 1, head_seq, " from the end of the log"), count)
    elif head_seq < last:
        return bad(head_seq + 1, f"record {head_seq + 1} was inserted after the newest "
                                 "record the log knows of", count)
    elif head_hash != prev:
        return bad(last, f"record {last} was replaced (it does not match the log's head)",
                   count)
    if witness is None:
        return VerifyResult(ok=True, count=count, head_seq=head_seq, head_hash=head_hash)
    return _against_witness(witness, witnessed, witnessed_hash, unreadable, count, last,
                            head_seq, head_hash)


def _against_witness(path: Path, witnessed: tuple[int, str] | None,
                     logged_hash: str | None, unreadable: str | None, count: int, last: int,
                     head_seq: int | None, head_hash: str | None) -> VerifyResult:
    """The chain is sound in itself; does its end agree with the witness file?"""
    def result(ok: bool, problem: str = "", warning: str = "",
               first_bad: int | None = None) -> VerifyResult:
        return VerifyResult(ok=ok, count=count, first_bad=first_bad, problem=problem,
                            head_seq=head_seq, head_hash=head_hash, warning=warning)

    if unreadable is not None:
        return result(True, warning=(
            f"the audit head witness {path} cannot be read ({unreadable}), so records "
            "removed from the end of the log together with its head record would not "
            "show. The next approval rewrites it"))
    if witnessed is None:
        if not count:
            return result(True)
        return result(True, warning=(
            f"there is no audit head witness {path}, so records removed from the end of "
            "the log together with its head record would not show. Stores written by an "
            "older setui have none; the next approval writes it"))
    seq, digest = witnessed
    if seq > last:
        return result(False, first_bad=last + 1, problem=(
            f"records were removed from the end: the witness says {seq} records ending "
            f"in hash {digest}, the log has {last}"))
    if logged_hash != digest:
        return result(False, first_bad=seq, problem=(
            f"record {seq} was replaced: the witness says it has hash {digest}, the log "
            f"has {logged_hash} (the log was rewritten, or replaced by an older copy, from "
            f"record {seq} or before)"))
    if seq < last:
        return result(True, warning=(
            f"the audit head witness {path} names record {seq}, the log has {last}: "
            "writing it failed or setui stopped in between; the newest records are "
            "checked against the log's own head only, until the next approval"))
    return result(True)


# -- the log, as a store's part -------------------------------------------------------
# The meta keys noting audit records that did not leave the VM: unsent:<seq, 12 digits>.
_UNSENT = "unsent:"


class AuditLog:
    """The audit log in ``database``; each record written also goes to ``forwarder``."""

    def __init__(self, database: Database, forwarder: Forwarder) -> None:
        self.database = database
        self.forwarder = forwarder
        # Why the last records did not leave the VM, if they did not (also kept in the
        # store: see unforwarded()).
        self.forward_problem: str | None = None
        # Why the audit head witness beside the database was not updated by the last
        # append, if it was not (the record itself was written; verify reports it too).
        self.witness_problem: str | None = None

    @property
    def readonly(self) -> bool:
        """Whether nothing may be written here (the database was opened read-only)."""
        return self.database.readonly

    # -- writing --------------------------------------------------------------------------
    def append(self, entry: AuditEntry) -> AuditRecord:
        """Append one record; it is committed to disk when this returns."""
        return self.extend([entry])[0]

    def extend(self, entries: Sequence[AuditEntry], *,
               guard: Callable[[sqlite3.Connection], None] | None = None,
               ) -> list[AuditRecord]:
        """Append several records atomically: all are committed or none is. ``guard``
        runs first in the same write transaction (audit.append)."""
        if not entries:
            return []
        path = self.database.path
        with self.database.using("write the audit log", write=True) as conn:
            records = append(conn, entries, path, guard=guard)
            # After the commit, and never raising: the records are written whatever
            # becomes of the witness, and a failure shows in verify.
            self.witness_problem = update_witness(
                conn, witness_path(path), records[-1].seq, records[-1].hash,
                sharing=self.database.sharing)
            self.forward_problem = self._forward(conn, records)
            return records

    def extend_claiming(self, entries: Sequence[AuditEntry], event_ids: Sequence[str],
                        endpoint: str, *, vm_id: str | None = None) -> list[AuditRecord]:
        """Append approval attempts only if none of ``event_ids`` is claimed already on
        this VM (its ``vm_id`` if known, else ``endpoint``: store.claims, store.vmkeys), in
        the same write transaction: of several processes approving one event at once, one
        appends. Raises :class:`AlreadyClaimed` otherwise."""
        here = ThisVm.of(endpoint, vm_id)
        return self.extend(entries, guard=lambda c: claims.check(c, event_ids, here))

    def _forward(self, conn: sqlite3.Connection, records: list[AuditRecord]) -> str | None:
        """Send the records (and those that failed before) out; never raises: they are
        committed whatever becomes of the copy. A failure is kept in ``meta`` beside the
        log, so every reader can say which records did not leave."""
        if not self.forwarder.enabled:
            return None
        earlier = [int(key.split(":", 1)[1]) for (key,) in conn.execute(
            "SELECT key FROM meta WHERE key LIKE ? ORDER BY key LIMIT 50", (_UNSENT + "%",))]
        resend: list[AuditRecord] = []
        if earlier:
            wanted = set(earlier)
            resend = [r for r in listing(conn, None, True) if r.seq in wanted]
        problem = self.forwarder.send([r.to_json() for r in (*resend, *records)])
        try:
            with conn:
                if problem is None:
                    conn.executemany("DELETE FROM meta WHERE key = ?",
                                     [(f"{_UNSENT}{seq:012d}",) for seq in earlier])
                else:
                    note = json.dumps({"target": str(self.forwarder.target), "error": problem,
                                       "time": to_db_time(utc_now())})
                    conn.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                                     [(f"{_UNSENT}{r.seq:012d}", note) for r in records])
        except sqlite3.Error as exc:
            problem = (problem or "") + f" (and the store could not note it: {exc})"
        return problem

    # -- reading --------------------------------------------------------------------------
    def records(self, *, limit: int | None = None, oldest_first: bool = False,
                after: int | None = None, before: int | None = None) -> list[AuditRecord]:
        """Audit records, newest first unless ``oldest_first``; ``after`` and ``before``
        (sequence numbers, neither included) page through a long log."""
        with self.database.using("read the audit log") as conn:
            return listing(conn, limit, oldest_first, after=after, before=before)

    def unforwarded(self) -> dict[int, str]:
        """Records that did not leave the VM: seq -> why, oldest first."""
        with self.database.using("read the audit log") as conn:
            rows = conn.execute("SELECT key, value FROM meta WHERE key LIKE ? ORDER BY key",
                                (_UNSENT + "%",)).fetchall()
        out: dict[int, str] = {}
        for key, value in rows:
            try:
                note = json.loads(value)
                out[int(str(key).split(":", 1)[1])] = str(note.get("error") or "unknown")
            except (ValueError, TypeError, AttributeError):
                out.setdefault(0, "a note about an unsent record cannot be read")
        return out

    def claim(self, event_id: str, endpoint: str, *,
              vm_id: str | None = None) -> claims.Claim | None:
        """The earlier approval that claims ``event_id`` on this VM, if any
        (store.claims)."""
        with self.database.using("read the audit log") as conn:
            return claims.find(conn, event_id, ThisVm.of(endpoint, vm_id))

    def approvals(self, event_ids: Sequence[str], *,
                  unknown: bool = False) -> dict[str, AuditRecord]:
        """The newest accepted approval (its outcome record) of each of ``event_ids``
        that has one. With ``unknown``, for the others the newest approval whose outcome
        is unknown, as its attempt record (who sent it, and when): the one whose
        ``result`` is not APPROVED."""
        with self.database.using("read the audit log") as conn:
            found: dict[str, AuditRecord] = {}
            for event_id in event_ids:
                records = for_event(conn, clean_text(event_id))
                record = next((r for r in reversed(records) if r.result == APPROVED), None)
                if record is None and unknown:
                    attempts = {r.seq: r for r in records if r.action == APPROVE_ATTEMPT}
                    record = next((attempts.get(r.attempt_seq or -1, r)
                                   for r in reversed(records) if r.result == UNKNOWN), None)
                if record is not None:
                    found[event_id] = record
            return found

    # -- checking -------------------------------------------------------------------------
    def approval_integrity(self) -> str | None:
        """Why this store must not take an approval now, in words; None when it may.

        Before each approval: SQLite's ``quick_check`` of the audit table (a damaged page
        would swallow the records about to be written; the history's pages, which can be
        hundreds of megabytes, are not read, so the check costs what the audit log costs),
        no trigger setui did not create and both guards as written, and the whole chain
        with its head and witness. A witness that is only behind is no reason to refuse."""
        doing = "check the audit log before approving"
        path = self.database.path
        try:
            with self.database.using(doing) as conn:
                rows = [str(r[0]) for r in conn.execute("PRAGMA quick_check(audit)")]
                if rows != ["ok"]:
                    return (f"the database {path} is damaged (SQLite's quick_check: "
                            f"{printable('; '.join(rows), 300)}). Keep it for the record; "
                            "setui approves nothing into it")
                problem = trigger_problem(conn, path)
                if problem:
                    return problem
                result = verify(conn, witness_path(path))
        except StoreError as exc:
            return exc.message
        if not result.ok:
            return (f"the audit log in {path} is broken ({result.problem}); setui "
                    "approves nothing on top of it. Run `setui audit verify`")
        return None

    def missing_records(self) -> str | None:
        """Why the log is shorter than its witness says, in words; None if it is not.
        A quick check for readers that do not verify the whole chain (``history``)."""
        path = self.database.path
        witness = witness_path(path)
        try:
            named = read_witness(witness)
        except (OSError, ValueError, UnicodeDecodeError):
            return None  # unreadable: verify reports it
        if named is None:
            return None
        with self.database.using("read the audit log") as conn:
            last = conn.execute("SELECT max(seq) FROM audit").fetchone()[0] or 0
        if named[0] <= last:
            return None
        return (f"the audit log in {path} ends at record {last}, but its witness "
                f"{witness} names record {named[0]}: records were removed, or the database "
                "was replaced by an older or empty one. Run `setui audit verify`")

    def verify(self) -> VerifyResult:
        """Recompute the hash chain; compare its end with the head record and with the
        witness file beside the database."""
        with self.database.using("verify the audit log") as conn:
            return verify(conn, witness_path(self.database.path))
