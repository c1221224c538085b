"""``Store``: the one object the rest of setui uses for history and the audit log.

It owns one SQLite connection, serialises its use with a lock (the dashboard records from
a worker while an approval runs), and turns every sqlite3 error into a
:class:`StoreError` that says what failed, where, and what to do.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

from setui.actor import describe_actor
from setui.auditforward import Forwarder
from setui.core.clock import utc_now
from setui.core.holes import Hole, find_holes
from setui.core.impact import Impact, impact_words
from setui.core.model import Document, DocumentError, parse_document
from setui.core.tracker import Change
from setui.envsettings import from_environment
from setui.store import audit as audit_log
from setui.store import claims, eventids, impacts, recording
from setui.store import history as hist
from setui.store.db import (
    DB_NAME,
    NothingRecorded,
    StoreError,
    connect,
    default_data_dir,
    describe_error,
    prepare_file,
    trigger_problem,
)
from setui.store.endpoints import endpoint_column
from setui.store.impacts import BootGap
from setui.store.place import Sharing, foreign_entries
from setui.store.reading import RecordingParts
from setui.store.records import (
    APPROVE_ATTEMPT,
    APPROVE_OUTCOME,
    APPROVED,
    DISMISSALS,
    IMPACT_SOURCE,
    REFUSED,
    UNKNOWN,
    AuditEntry,
    AuditRecord,
    IncarnationRecord,
    RecorderSpan,
    StoryEntry,
    VerifyResult,
    from_db_time,
    to_db_time,
    utc,
)
from setui.store.vmkeys import VmKey
from setui.textsafe import printable

__all__ = ["Store"]

# An unchanged document bumps its row's last_seen at most this often: a day of polling
# once a second is at most 1,440 small updates and no new rows.
TOUCH_INTERVAL = timedelta(seconds=60)
# A recording session notes that it still runs this often (monitor.recorder.BEAT_SECONDS);
# one whose last beat is older than RUNNING_WITHIN has stopped (or died) as far as anyone
# can tell.
RECORDER_BEAT = timedelta(seconds=60)
RUNNING_WITHIN = 2.5 * RECORDER_BEAT
# The meta keys noting audit records that did not leave the VM: unsent:<seq, 12 digits>.
_UNSENT = "unsent:"
# Retention runs at most this often, when a new incarnation is recorded.
PRUNE_INTERVAL = timedelta(hours=1)


@dataclass(frozen=True)
class _Touched:
    """The last document written for an endpoint, and when."""

    incarnation: int
    raw: Mapping[str, Any]
    digest: str
    written: datetime


class Store:
    """History of incarnations and the hash-chained audit log, in one SQLite file.

    ``history_days=None`` (or 0, as the config file spells it) keeps the history
    forever; the audit log is always kept whole.
    """

    def __init__(self, path: Path | str, *, timeout: float = 5.0,
                 history_days: int | None = 90, readonly: bool = False,
                 forward: str | None = None) -> None:
        self.path = Path(path)
        # Where each audit record also goes as it is written (setui.auditforward):
        # ``forward``, else SETUI_AUDIT_FORWARD, else auto.
        try:
            self.forwarder = Forwarder.from_setting(
                forward if forward is not None else from_environment("audit_forward"))
        except ValueError as exc:
            raise StoreError(str(exc), path=self.path) from None
        # Why the last records did not leave the VM, if they did not (also kept in the
        # store: see unforwarded()).
        self.forward_problem: str | None = None
        self.timeout = timeout
        # 0 means "keep forever" in the config file; as a day count it would prune all.
        self.history_days = history_days if history_days and history_days > 0 else None
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
        self._touched: dict[str, _Touched] = {}
        self._last_prune: datetime | None = None
        # Why the audit head witness beside the database was not updated by the last
        # append, if it was not (the record itself was written; verify reports it too).
        self.witness_problem: str | None = None

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

    @classmethod
    def open_dir(cls, data_dir: Path | str | None = None, **kw: object) -> Store:
        """``<data_dir>/setui.db``; the directory defaults to :func:`default_data_dir`."""
        directory = Path(data_dir).expanduser() if data_dir is not None else default_data_dir()
        # kw is Store()'s own keywords, passed on: named there once, not again here.
        return cls(directory / DB_NAME, **kw)  # type: ignore[arg-type]

    # -- lifecycle ------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.close()
                self._conn = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._conn is None else ("read-only" if self.readonly else "open")
        return f"<Store {str(self.path)!r} {state}>"

    @contextlib.contextmanager
    def _using(self, doing: str, *, write: bool = False) -> Iterator[sqlite3.Connection]:
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

    # -- history --------------------------------------------------------------------------
    def record_document(self, doc: Document, *, seen_at: datetime, endpoint: str,
                        changes: Sequence[Change] = (), gap: str | None = None,
                        after: tuple[int, str] | None = None,
                        clock_skew: float | None = None, vm_name: str | None = None) -> bool:
        """Record one sighting of ``doc``; True when it is a new incarnation row.

        Idempotent per (endpoint, incarnation, content): a repeat only moves last_seen,
        and at most once a minute. ``changes`` (from the caller's tracker) are the story
        when the caller saw the newest stored document just before this one (``after``:
        its incarnation and :func:`content_hash`, ``gap`` None or the gap the caller's
        tracker already told); otherwise they are derived against the stored one across
        a gap, so every writer tells the same story and none claims continuity it lacks.
        ``vm_name``: this VM's name in Resources, kept with the incarnation.
        """
        seen_at = utc(seen_at)
        endpoint = endpoint_column(endpoint)
        with self._using("record the history", write=True) as conn:
            touched = self._touched.get(endpoint)
            # Polled once a second, the same document comes back again and again: a dict
            # comparison spares hashing it each time.
            if touched is not None and touched.incarnation == doc.incarnation \
                    and touched.raw == doc.raw:
                digest = touched.digest
                if timedelta(0) <= seen_at - touched.written < TOUCH_INTERVAL:
                    return False
            else:
                digest = hist.content_hash(doc)
            new = hist.insert_or_touch(conn, doc, seen_at=seen_at, endpoint=endpoint,
                                       changes=changes, digest=digest, gap=gap, after=after,
                                       clock_skew=clock_skew, vm_name=vm_name)
            self._touched[endpoint] = _Touched(doc.incarnation, doc.raw, digest, seen_at)
            if new and self.history_days is not None and (
                    self._last_prune is None or seen_at - self._last_prune >= PRUNE_INTERVAL):
                self._last_prune = seen_at
                hist.prune(conn, seen_at - timedelta(days=self.history_days))
            return new

    def history(self, *, limit: int | None = 50, since: datetime | None = None,
                endpoint: str | None = None, event_id: str | None = None,
                before: IncarnationRecord | None = None) -> list[IncarnationRecord]:
        """Stored incarnations, newest first; ``before`` pages past an earlier result."""
        # Ids from the command line or the network may hold lone surrogates (undecodable
        # bytes, \ud800 in JSON): the store keeps them escaped, so look them up so.
        event_id = None if event_id is None else hist.clean_text(event_id)
        endpoint = None if endpoint is None else endpoint_column(endpoint)
        with self._using("read the history") as conn:
            return hist.query_history(conn, limit=limit, since=since, endpoint=endpoint,
                                      event_id=event_id, before=before)

    def incarnation(self, number: int, *, endpoint: str | None = None) -> IncarnationRecord | None:
        """The most recently seen document with that incarnation number."""
        endpoint = None if endpoint is None else endpoint_column(endpoint)
        with self._using("read the history") as conn:
            return hist.find_incarnation(conn, number, endpoint)

    def previous(self, record: IncarnationRecord) -> IncarnationRecord | None:
        """The document seen at the same endpoint just before ``record``."""
        with self._using("read the history") as conn:
            return hist.previous(conn, record)

    def event_story(self, event_id: str) -> list[StoryEntry]:
        """The event's life, oldest first: its changes and every audit record about it."""
        event_id = hist.clean_text(event_id)
        with self._using("read the history") as conn:
            story = hist.event_story(conn, event_id)
            records = audit_log.for_event(conn, event_id)
            measured = impacts.for_event(conn, event_id)
        story += [_audit_story(record) for record in records]
        story += [_impact_story(impact) for impact in measured]
        story.sort(key=lambda entry: (entry.time, entry.kind == "last-seen"))
        return story

    def prune(self, *, now: datetime) -> int:
        """Delete history last seen more than ``history_days`` before ``now``."""
        if self.history_days is None:
            return 0
        with self._using("prune the history", write=True) as conn:
            self._last_prune = utc(now)
            return hist.prune(conn, utc(now) - timedelta(days=self.history_days))

    def newest_document(self, endpoint: str) -> tuple[Document, str] | None:
        """The newest stored document of ``endpoint`` and its content hash: where a
        restarted monitor takes up the story."""
        with self._using("read the history") as conn:
            row = conn.execute(
                "SELECT raw_json, content_hash FROM incarnations WHERE endpoint = ? "
                "ORDER BY first_seen DESC, id DESC LIMIT 1", (endpoint_column(endpoint),)
            ).fetchone()
        if row is None:
            return None
        try:
            return parse_document(row[0]), row[1]
        except (DocumentError, ValueError):
            return None

    def approvals(self, event_ids: Sequence[str], *,
                  unknown: bool = False) -> dict[str, AuditRecord]:
        """The newest accepted approval (its outcome record) of each of ``event_ids``
        that has one. With ``unknown``, for the others the newest approval whose outcome
        is unknown, as its attempt record (who sent it, and when): the one whose
        ``result`` is not APPROVED."""
        with self._using("read the audit log") as conn:
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

    # -- recording sessions ---------------------------------------------------------------
    def recorder_start(self, *, endpoint: str, pid: int, host: str, command: str,
                       at: datetime, boot_id: str | None = None) -> int:
        """Say that a process records ``endpoint`` from ``at`` on, in the boot ``boot_id``
        (setui.boot); returns its id."""
        when = to_db_time(at)
        with self._using("note the recording session", write=True) as conn:
            cursor = conn.execute(
                "INSERT INTO recorders (endpoint, pid, host, command, started, last_beat, "
                "boot_id) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (endpoint_column(endpoint), pid, hist.clean_text(host)[:200],
                 hist.clean_text(command)[:200], when, when,
                 hist.clean_text(boot_id)[:200] if boot_id else None))
            return int(cursor.lastrowid or 0)

    def recorder_measures(self, recorder_id: int) -> None:
        """The session keeps the agent's heartbeat: what it saw of stalls and boots is in
        the record, and a stretch it covered with none had none."""
        with self._using("note the recording session", write=True) as conn:
            conn.execute("UPDATE recorders SET measures = 1 WHERE id = ?", (recorder_id,))

    def recorder_beat(self, recorder_id: int, at: datetime, *, stopped: bool = False,
                      begins: bool = False) -> None:
        """The session was still recording at ``at`` (and stops there, if ``stopped``).
        ``begins``: its first answer came at ``at``, which is where it starts; it was
        opened before the service told its time, in this machine's clock, which may not
        be the record's."""
        when = to_db_time(at)
        with self._using("note the recording session", write=True) as conn:
            if begins:
                conn.execute("UPDATE recorders SET started = ?, last_beat = ? WHERE id = ?",
                             (when, when, recorder_id))
                return
            conn.execute(
                "UPDATE recorders SET last_beat = max(last_beat, ?), stopped = "
                "CASE WHEN ? THEN ? ELSE stopped END WHERE id = ?",
                (when, stopped, when, recorder_id))

    def recorders(self, *, endpoint: str | None = None, since: datetime | None = None,
                  ) -> list[RecorderSpan]:
        """Recording sessions that reached ``since`` or later, oldest first."""
        where, args = [], []
        if endpoint is not None:
            where.append("endpoint = ?")
            args.append(endpoint_column(endpoint))
        if since is not None:
            where.append("coalesce(stopped, last_beat) >= ?")
            args.append(to_db_time(since))
        sql = ("SELECT id, endpoint, pid, host, command, started, last_beat, stopped, boot_id, "
               "measures FROM recorders" + (f" WHERE {' AND '.join(where)}" if where else "")
               + " ORDER BY started, id")
        with self._using("read the recording sessions") as conn:
            return [RecorderSpan(int(r[0]), r[1], int(r[2]), r[3], r[4], from_db_time(r[5]),
                                 from_db_time(r[6]), from_db_time(r[7]) if r[7] else None,
                                 r[8], bool(r[9]))
                    for r in conn.execute(sql, args)]

    # -- what events did to the VM (core.impact) -----------------------------------------
    def record_impact(self, impact: Impact) -> Impact | None:
        """Keep a stall or a boot the agent measured; None for a boot told already."""
        endpoint = endpoint_column(impact.endpoint)
        with self._using("record what an event did to the VM", write=True) as conn:
            row_id = impacts.insert(conn, impact, endpoint)
        return None if row_id is None else replace(impact, id=row_id, endpoint=endpoint)

    def impacts(self, *, endpoint: str, since: datetime | None = None,
                until: datetime | None = None, newest: int | None = None) -> list[Impact]:
        """The stalls and boots measured for ``endpoint`` (the ``newest`` N), oldest first."""
        with self._using("read what events did to the VM") as conn:
            return impacts.listing(conn, endpoint_column(endpoint), since=since, until=until,
                                   newest=newest)

    def boot_gap(self, *, endpoint: str, boot_id: str,
                 booted_at: datetime | None) -> BootGap | None:
        """The polls around this boot, if the record holds another boot and this one was
        not told yet (store.impacts)."""
        with self._using("read the recording sessions") as conn:
            return impacts.boot_gap(conn, endpoint_column(endpoint), boot_id, booted_at)

    def recording(self, *, since: datetime | None = None, until: datetime | None = None,
                  endpoint: str | None = None) -> RecordingParts | None:
        """One endpoint's record for a replay or a report (store.recording); None when
        nothing was recorded there."""
        return recording.gather(self, since=since, until=until, endpoint=endpoint)

    def holes(self, *, endpoint: str, now: datetime | None = None) -> list[Hole]:
        """When nothing recorded ``endpoint``, oldest first, each hole whole: a property
        of the record (core.holes), the same whoever asks about which stretch of it.

        An open hole (nothing records now) runs to ``now``, by default this machine's
        clock restated in the record's (the newest incarnation's clock skew)."""
        endpoint = hist.clean_text(endpoint)
        spans = self.recorders(endpoint=endpoint)
        with self._using("read the history") as conn:
            sightings = [(from_db_time(a), from_db_time(b)) for a, b in conn.execute(
                "SELECT first_seen, last_seen FROM incarnations WHERE endpoint = ?",
                (endpoint,))]
            if now is None:
                row = conn.execute(
                    "SELECT clock_skew FROM incarnations WHERE endpoint = ? "
                    "ORDER BY first_seen DESC, id DESC LIMIT 1", (endpoint,)).fetchone()
                skew = row[0] if row is not None and isinstance(row[0], (int, float)) else 0
                now = utc_now() + timedelta(seconds=skew)
        now = utc(now)
        # A session still running covers up to now: it beats only once a RECORDER_BEAT.
        covered = [(s.started, max(s.end, now) if s.stopped is None
                    and s.end >= now - RUNNING_WITHIN else s.end) for s in spans]
        return find_holes(covered, sightings, now=now, endpoint=endpoint)

    # -- audit ----------------------------------------------------------------------------
    def audit_append(self, entry: AuditEntry) -> AuditRecord:
        """Append one record; it is committed to disk when this returns."""
        return self.audit_extend([entry])[0]

    def audit_extend(self, entries: Sequence[AuditEntry], *,
                     guard: Callable[[sqlite3.Connection], None] | None = None,
                     ) -> list[AuditRecord]:
        """Append several records atomically: all are committed or none is. ``guard``
        runs first in the same write transaction (audit.append)."""
        if not entries:
            return []
        with self._using("write the audit log", write=True) as conn:
            records = audit_log.append(conn, entries, self.path, guard=guard)
            # After the commit, and never raising: the records are written whatever
            # becomes of the witness, and a failure shows in verify.
            self.witness_problem = audit_log.update_witness(
                conn, audit_log.witness_path(self.path), records[-1].seq, records[-1].hash,
                sharing=self.sharing)
            self.forward_problem = self._forward(conn, records)
            return records

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

    def unforwarded(self) -> dict[int, str]:
        """Records that did not leave the VM: seq -> why, oldest first."""
        with self._using("read the audit log") as conn:
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

    def audit_claim(self, entries: Sequence[AuditEntry], event_ids: Sequence[str],
                    endpoint: str, *, vm_id: str | None = None) -> list[AuditRecord]:
        """Append approval attempts only if none of ``event_ids`` is claimed already on
        this VM (its ``vm_id`` if known, else ``endpoint``: store.claims, store.vmkeys), in
        the same write transaction: of several processes approving one event at once, one
        appends. Raises :class:`AlreadyClaimed` otherwise."""
        here = VmKey.of(endpoint, vm_id)
        return self.audit_extend(entries, guard=lambda c: claims.check(c, event_ids, here))

    def claim(self, event_id: str, endpoint: str, *,
              vm_id: str | None = None) -> claims.Claim | None:
        """The earlier approval that claims ``event_id`` on this VM, if any
        (store.claims)."""
        with self._using("read the audit log") as conn:
            return claims.find(conn, event_id, VmKey.of(endpoint, vm_id))

    def event_ids(self, prefix: str, *, limit: int = 20) -> list[str]:
        """EventIds the history or the audit log knows that start with ``prefix`` (case
        ignored), newest first: for resolving an id typed by a person."""
        with self._using("read the history") as conn:
            return eventids.known(conn, prefix, limit)

    def audit(self, *, limit: int | None = None, oldest_first: bool = False,
              after: int | None = None, before: int | None = None) -> list[AuditRecord]:
        """Audit records, newest first unless ``oldest_first``; ``after`` and ``before``
        (sequence numbers, neither included) page through a long log."""
        with self._using("read the audit log") as conn:
            return audit_log.listing(conn, limit, oldest_first, after=after, before=before)

    def approval_integrity(self) -> str | None:
        """Why this store must not take an approval now, in words; None when it may.

        Before each approval: SQLite's ``quick_check`` of the audit table (a damaged page
        would swallow the records about to be written; the history's pages, which can be
        hundreds of megabytes, are not read, so the check costs what the audit log costs),
        no trigger setui did not create and both guards as written, and the whole chain
        with its head and witness. A witness that is only behind is no reason to refuse."""
        doing = "check the audit log before approving"
        try:
            with self._using(doing) as conn:
                rows = [str(r[0]) for r in conn.execute("PRAGMA quick_check(audit)")]
                if rows != ["ok"]:
                    return (f"the database {self.path} is damaged (SQLite's quick_check: "
                            f"{printable('; '.join(rows), 300)}). Keep it for the record; "
                            "setui approves nothing into it")
                problem = trigger_problem(conn, self.path)
                if problem:
                    return problem
                result = audit_log.verify(conn, audit_log.witness_path(self.path))
        except StoreError as exc:
            return exc.message
        if not result.ok:
            return (f"the audit log in {self.path} is broken ({result.problem}); setui "
                    "approves nothing on top of it. Run `setui audit verify`")
        return None

    def missing_records(self) -> str | None:
        """Why the log is shorter than its witness says, in words; None if it is not.
        A quick check for readers that do not verify the whole chain (``history``)."""
        witness = audit_log.witness_path(self.path)
        try:
            named = audit_log.read_witness(witness)
        except (OSError, ValueError, UnicodeDecodeError):
            return None  # unreadable: verify reports it
        if named is None:
            return None
        with self._using("read the audit log") as conn:
            last = conn.execute("SELECT max(seq) FROM audit").fetchone()[0] or 0
        if named[0] <= last:
            return None
        return (f"the audit log in {self.path} ends at record {last}, but its witness "
                f"{witness} names record {named[0]}: records were removed, or the database "
                "was replaced by an older or empty one. Run `setui audit verify`")

    def verify_audit(self) -> VerifyResult:
        """Recompute the hash chain; compare its end with the head record and with the
        witness file beside the database."""
        with self._using("verify the audit log") as conn:
            return audit_log.verify(conn, audit_log.witness_path(self.path))


def _has_schema(path: Path) -> bool:
    """Whether the file holds more than nothing (SQLite's empty file, or one setui
    created and was stopped before it wrote the schema): its size says so."""
    try:
        return os.lstat(path).st_size > 0
    except OSError:
        return True  # let the open say what is wrong with it


def _who(record: AuditRecord) -> str:
    return describe_actor(record.user, record.ssh_client, record.host,
                          record.details if isinstance(record.details, dict) else {})


def _impact_story(impact: Impact) -> StoryEntry:
    """A stall or a boot tied to the event, as a story line: measured by the agent."""
    return StoryEntry(time=impact.at, kind=impact.kind, event_id=impact.event_id or "",
                      endpoint=impact.endpoint, detail=impact_words(impact, local=False),
                      event_type=impact.event_type, source=IMPACT_SOURCE)


def _audit_story(record: AuditRecord) -> StoryEntry:
    """An audit record as a story line, in words that say it was an operator's act.

    The kind stays the audit action, so an operator's ``cancelled`` (they said no in the
    dialog) and the history's ``cancelled`` (Azure removed the event) share a name; the
    ``source`` and these words are what tell them apart.
    """
    snapshot = record.event or {}
    if record.action == APPROVE_ATTEMPT:
        detail = f"operator {_who(record)} approved it; setui sent the approval"
        if record.outcome_unknown:
            detail += " (outcome unknown: setui stopped before recording it)"
    elif record.action == APPROVE_OUTCOME:
        if record.result == APPROVED:
            detail = f"the service accepted the approval: HTTP {record.status}"
        elif record.result == UNKNOWN:
            detail = f"the approval's outcome is unknown: {record.error}"
        else:
            detail = f"the approval failed: {record.error}"
        if record.latency_ms is not None:
            detail += f" in {record.latency_ms:.0f} ms"
    elif record.action in DISMISSALS:
        detail = f"operator {_who(record)} dismissed the approval dialog, nothing sent"
    elif record.action == REFUSED:
        detail = (f"approval by operator {_who(record)} refused by setui, nothing sent: "
                  f"{record.error or 'no reason'}")
    else:
        detail = f"audit record: {record.action}"
    return StoryEntry(
        time=record.time, kind=record.action, event_id=record.event_id or "",
        endpoint=record.endpoint, incarnation=record.incarnation, detail=detail,
        event_type=snapshot.get("EventType"), status=snapshot.get("EventStatus"),
        not_before=str(snapshot.get("NotBefore") or ""), source="audit",
        audit_seq=record.seq)
