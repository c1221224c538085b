"""``AuditLog``: the hash-chained audit log in the database (the SQL is store.audit's and
store.claims'), its witness beside the file, and its copy off the VM (setui.auditforward).

What an approval needs of the store and nothing else: the approver holds only this.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence

from setui.auditforward import Forwarder
from setui.core.clock import utc_now
from setui.store import audit as audit_log
from setui.store import claims
from setui.store import history as hist
from setui.store.database import Database
from setui.store.db import StoreError, trigger_problem
from setui.store.records import (
    APPROVE_ATTEMPT,
    APPROVED,
    UNKNOWN,
    AuditEntry,
    AuditRecord,
    VerifyResult,
    to_db_time,
)
from setui.store.vmkeys import VmKey
from setui.textsafe import printable

__all__ = ["AuditLog"]

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
            records = audit_log.append(conn, entries, path, guard=guard)
            # After the commit, and never raising: the records are written whatever
            # becomes of the witness, and a failure shows in verify.
            self.witness_problem = audit_log.update_witness(
                conn, audit_log.witness_path(path), records[-1].seq, records[-1].hash,
                sharing=self.database.sharing)
            self.forward_problem = self._forward(conn, records)
            return records

    def extend_claiming(self, entries: Sequence[AuditEntry], event_ids: Sequence[str],
                        endpoint: str, *, vm_id: str | None = None) -> list[AuditRecord]:
        """Append approval attempts only if none of ``event_ids`` is claimed already on
        this VM (its ``vm_id`` if known, else ``endpoint``: store.claims, store.vmkeys), in
        the same write transaction: of several processes approving one event at once, one
        appends. Raises :class:`AlreadyClaimed` otherwise."""
        here = VmKey.of(endpoint, vm_id)
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
            resend = [r for r in audit_log.listing(conn, None, True) if r.seq in wanted]
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
            return audit_log.listing(conn, limit, oldest_first, after=after, before=before)

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
            return claims.find(conn, event_id, VmKey.of(endpoint, vm_id))

    def approvals(self, event_ids: Sequence[str], *,
                  unknown: bool = False) -> dict[str, AuditRecord]:
        """The newest accepted approval (its outcome record) of each of ``event_ids``
        that has one. With ``unknown``, for the others the newest approval whose outcome
        is unknown, as its attempt record (who sent it, and when): the one whose
        ``result`` is not APPROVED."""
        with self.database.using("read the audit log") as conn:
            found: dict[str, AuditRecord] = {}
            for event_id in event_ids:
                records = audit_log.for_event(conn, hist.clean_text(event_id))
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
                result = audit_log.verify(conn, audit_log.witness_path(path))
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
        witness = audit_log.witness_path(path)
        try:
            named = audit_log.read_witness(witness)
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
            return audit_log.verify(conn, audit_log.witness_path(self.database.path))
