"""The incarnation history: each distinct document once, and what changed in it.

A row is keyed by (endpoint, incarnation, content hash), so a document polled every
second is one row whose ``last_seen`` moves, and two setui processes recording the same
document meet on the UNIQUE constraint instead of writing it twice. The changes stored
with a new row are derived against the row before it in the store, so every writer (a
``setui watch`` service, a dashboard, a restarted process) tells the same story.

:class:`History` is the store's part over these rows: what a recorder writes each poll
and a reader asks, and the retention of the rows.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from setui.core.model import Document, DocumentError, format_not_before, parse_document
from setui.core.timefmt import restate, stamp
from setui.core.tracker import Change, ChangeKind, Tracker, summarize
from setui.store.connection import Database
from setui.store.endpoints import endpoint_column
from setui.store.records import (
    ChangeRecord,
    IncarnationRecord,
    StoryEntry,
    clean_text,
    from_db_time,
    stored_json,
    to_db_time,
    utc,
)

__all__ = ["TOUCH_INTERVAL", "History", "content_hash", "event_story", "insert_or_touch",
           "prune"]

_COLUMNS = ("id, endpoint, incarnation, content_hash, first_seen, last_seen, raw_json, "
            "changes_json, summary, clock_skew, vm_name")
_NAME_LIMIT = 200  # a VM name is at most 64 characters in Azure: more is not a name


def content_hash(doc: Document) -> str:
    return hashlib.sha256(stored_json(dict(doc.raw)).encode("ascii")).hexdigest()


def _change_record(change: Change) -> ChangeRecord:
    event = change.event
    return ChangeRecord(
        kind=change.kind.value,
        event_id=clean_text(event.event_id) if event else None,
        event_type=clean_text(event.event_type.value) if event else None,
        status=clean_text(event.status.value) if event else None,
        not_before=format_not_before(event.not_before) if event else "",
        detail=clean_text(change.detail),
        initial=change.initial,
        certain=change.certain,
        missed=change.missed,
    )


def _summary(changes: Sequence[Change], doc: Document, first: bool) -> str:
    if first:
        return clean_text("recording began: " + (summarize(changes) if doc.events
                                                 else "no events"))
    return clean_text(summarize(changes))


def _derive(conn: sqlite3.Connection, doc: Document, seen_at: datetime, endpoint: str,
            given: Sequence[Change], gap: str | None,
            after: tuple[int, str] | None) -> tuple[list[Change], bool]:
    """The changes since the newest stored document of ``endpoint`` seen before this one,
    and whether there was none (this is where the endpoint's record begins).

    The caller's changes are the story when its tracker saw that stored document just
    before this one (``after`` names it); otherwise someone else recorded in between, or
    nothing was recording, and the changes are derived again across a gap."""
    row = conn.execute(
        "SELECT raw_json, first_seen, incarnation, content_hash, last_seen FROM incarnations "
        "WHERE endpoint = ? AND first_seen <= ? ORDER BY first_seen DESC, id DESC LIMIT 1",
        (endpoint, to_db_time(seen_at)),
    ).fetchone()
    tracker = Tracker()
    if row is None:
        # Nothing stored before: the caller's tracker may know more (it saw an earlier
        # document the store missed); otherwise every event is "already there".
        if given and not all(c.initial for c in given):
            return list(given), False
        return tracker.update(doc, seen_at), True
    if after is not None and (int(row[2]), row[3]) == after:
        return list(given), False
    try:
        previous = parse_document(row[0])
        tracker.update(previous, from_db_time(row[1]))
    except (DocumentError, ValueError):
        return Tracker().update(doc, seen_at), True
    if after is not None:
        why = "; ".join(w for w in (gap, "the document seen before this one was not recorded")
                        if w)
    else:
        why = (f"nothing was recording between {stamp(from_db_time(row[4]), local=False)} "
               f"and {stamp(seen_at, local=False)}")
    leaving = [e.event_id for e in previous.events if doc.event(e.event_id) is None]
    return tracker.update(doc, seen_at, gap=why, approved=approved_ids(conn, leaving)), False


def approved_ids(conn: sqlite3.Connection, event_ids: Sequence[str]) -> frozenset[str]:
    """Those of ``event_ids`` whose approval the service accepted, by the audit log."""
    if not event_ids:
        return frozenset()
    marks = ", ".join("?" * len(event_ids))
    rows = conn.execute(
        f"SELECT DISTINCT event_id FROM audit WHERE action = 'approve-outcome' AND error IS "
        f"NULL AND status BETWEEN 200 AND 299 AND event_id IN ({marks})", tuple(event_ids))
    return frozenset(r[0] for r in rows)


def _gone_kinds() -> tuple[str, ...]:
    return (ChangeKind.COMPLETED.value, ChangeKind.CANCELLED.value, ChangeKind.GONE.value)


def insert_or_touch(conn: sqlite3.Connection, doc: Document, *, seen_at: datetime,
                    endpoint: str, changes: Sequence[Change], digest: str | None = None,
                    gap: str | None = None, after: tuple[int, str] | None = None,
                    clock_skew: float | None = None, vm_name: str | None = None) -> bool:
    """Record one sighting of ``doc`` in its own transaction; True if the row is new.
    ``vm_name``: this VM's name as the writer knows it (kept once known)."""
    digest = digest or content_hash(doc)
    when = to_db_time(seen_at)
    endpoint = clean_text(endpoint)
    name = clean_text(vm_name)[:_NAME_LIMIT] if vm_name else None
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute(
            "SELECT id FROM incarnations WHERE endpoint = ? AND incarnation = ? "
            "AND content_hash = ?", (endpoint, doc.incarnation, digest)).fetchone()
        if row is not None:
            conn.execute(
                "UPDATE incarnations SET last_seen = max(last_seen, ?), "
                "first_seen = min(first_seen, ?), vm_name = coalesce(vm_name, ?) "
                "WHERE id = ?", (when, when, name, row[0]))
            conn.execute("COMMIT")
            return False
        derived, first = _derive(conn, doc, seen_at, endpoint, changes, gap, after)
        records = [_change_record(c) for c in derived]
        raw_json, summary = stored_json(dict(doc.raw)), _summary(derived, doc, first)
        kept = _within_budget(conn, endpoint, when, raw_json)
        if kept is not None:
            raw_json, records, note = kept(doc, records)
            summary = clean_text(f"{summary} (not kept in full: {note})")
        # The write lock is held since BEGIN IMMEDIATE, so nobody can have inserted the
        # row since the SELECT; the upsert is the belt to those braces.
        conn.execute(
            "INSERT INTO incarnations (endpoint, incarnation, content_hash, first_seen, "
            "last_seen, raw_json, changes_json, summary, clock_skew, vm_name) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (endpoint, incarnation, content_hash) DO UPDATE SET "
            "last_seen = max(last_seen, excluded.last_seen)",
            (endpoint, doc.incarnation, digest, when, when, raw_json,
             stored_json([r.to_json() for r in records]), summary, _skew(clock_skew), name))
        row_id = conn.execute(
            "SELECT id FROM incarnations WHERE endpoint = ? AND incarnation = ? "
            "AND content_hash = ?", (endpoint, doc.incarnation, digest)).fetchone()[0]
        conn.executemany(
            "INSERT OR IGNORE INTO event_changes (incarnation_id, position, event_id, kind) "
            "VALUES (?, ?, ?, ?)",
            [(row_id, i, r.event_id, r.kind) for i, r in enumerate(records) if r.event_id])
        conn.execute("COMMIT")
        return True
    except BaseException:
        _rollback(conn)
        raise


# What one endpoint's history may take: a document is kept whole up to
# MAX_DOCUMENT_BYTES (the service's are a few KB), and a UTC day's new incarnations up to
# DAILY_BUDGET_BYTES (a misbehaving endpoint once grew the history by 137 MB in 20 s).
# Past either, the row still says that an incarnation was seen, and what was not kept.
MAX_DOCUMENT_BYTES = 256 * 1024
DAILY_BUDGET_BYTES = 64 * 1024 * 1024
_BUDGET_KEY = "history-bytes:"
_CORE = ("EventId", "EventType", "EventStatus", "NotBefore", "ResourceType", "Resources",
         "EventSource", "DurationInSeconds", "Description")

_Keeper = Callable[[Document, list[ChangeRecord]], tuple[str, list[ChangeRecord], str]]


def _within_budget(conn: sqlite3.Connection, endpoint: str, when: str,
                   raw_json: str) -> _Keeper | None:
    """None when the document is kept whole; else how to keep less of it. Counts the
    day's bytes in ``meta`` (in the caller's transaction)."""
    day = when[:10]
    key = _BUDGET_KEY + endpoint
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    spent = 0
    if row is not None and str(row[0]).startswith(day + " "):
        with contextlib.suppress(ValueError):
            spent = int(str(row[0]).split(" ", 1)[1])
    keeper: _Keeper | None = None
    if spent + len(raw_json) > DAILY_BUDGET_BYTES:
        keeper = _keep_nothing
    elif len(raw_json) > MAX_DOCUMENT_BYTES:
        keeper = _keep_core
    size = len(raw_json) if keeper is None else 0
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                 (key, f"{day} {spent + size}"))
    return keeper


def _keep_core(doc: Document, records: list[ChangeRecord]) -> tuple[str, list[ChangeRecord],
                                                                     str]:
    """The events' main fields, each cut short: what the history needs to tell the story."""
    size = len(stored_json(dict(doc.raw)))

    def cut(value: Any) -> Any:
        if isinstance(value, str):
            return value[:200]
        if isinstance(value, list):
            return [cut(v) for v in value[:50]]
        return value if isinstance(value, (int, float, bool)) or value is None else None

    events = [{k: cut(e[k]) for k in _CORE if k in e}
              for e in (doc.raw.get("Events") or [])[:200] if isinstance(e, dict)]
    note = (f"the document was {size:,} bytes, over the {MAX_DOCUMENT_BYTES // 1024} KB "
            "kept per document: only its events' main fields are stored, cut short")
    return stored_json({"DocumentIncarnation": doc.incarnation, "Events": events,
                        "setui-not-kept": note}), records, note


def _keep_nothing(doc: Document, records: list[ChangeRecord]) -> tuple[str,
                                                                       list[ChangeRecord], str]:
    """Only that it was seen: today's budget is spent."""
    note = (f"today's history budget for this endpoint ({DAILY_BUDGET_BYTES // 2**20} MB) "
            f"is spent: neither the document nor its {len(records)} change"
            f"{'s' if len(records) != 1 else ''} are stored, only that incarnation "
            f"{doc.incarnation} was seen")
    return stored_json({"DocumentIncarnation": doc.incarnation, "Events": [],
                        "setui-not-kept": note}), [], note


def _skew(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) and abs(value) < 1e12 else None


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def _record(row: Sequence[Any]) -> IncarnationRecord:
    try:
        # Words an older setui stored with the service's RFC 1123 times, read the one way.
        changes = tuple(_restated(ChangeRecord.from_json(c)) for c in json.loads(row[7]))
    except (ValueError, TypeError, AttributeError):
        changes = ()
    return IncarnationRecord(
        endpoint=row[1], incarnation=int(row[2]), content_hash=row[3],
        first_seen=from_db_time(row[4]), last_seen=from_db_time(row[5]), raw_json=row[6],
        changes=changes, summary=row[8], row_id=int(row[0]),
        clock_skew=float(row[9]) if isinstance(row[9], (int, float)) else None,
        vm_name=row[10] if isinstance(row[10], str) and row[10] else None,
    )


def _restated(change: ChangeRecord) -> ChangeRecord:
    detail = restate(change.detail)
    return change if detail is change.detail else replace(change, detail=detail)


def event_story(conn: sqlite3.Connection, event_id: str) -> list[StoryEntry]:
    """Each stored change of the event, oldest first, and where it stands now."""
    rows = conn.execute(
        f"SELECT {', '.join('i.' + c.strip() for c in _COLUMNS.split(','))}, ec.position "
        "FROM event_changes ec JOIN incarnations i ON i.id = ec.incarnation_id "
        "WHERE ec.event_id = ? ORDER BY i.first_seen, i.id, ec.position", (event_id,))
    story: list[StoryEntry] = []
    for row in rows:
        record = _record(row[:11])
        position = int(row[11])
        if position >= len(record.changes):
            continue
        change = record.changes[position]
        story.append(StoryEntry(
            time=record.first_seen, kind=change.kind, event_id=change.event_id or event_id,
            endpoint=record.endpoint, incarnation=record.incarnation, detail=change.detail,
            event_type=change.event_type, status=change.status,
            not_before=change.not_before, initial=change.initial, certain=change.certain))
    if story and story[-1].kind not in _gone_kinds():
        current = _still_present(conn, story[-1])
        if current is not None:
            story.append(current)
    return story


def _still_present(conn: sqlite3.Connection, last: StoryEntry) -> StoryEntry | None:
    """The newest sighting of the event, when the newest document still has it."""
    newest = conn.execute(
        f"SELECT {_COLUMNS} FROM incarnations WHERE endpoint = ? "
        "ORDER BY first_seen DESC, id DESC LIMIT 1", (last.endpoint,)).fetchone()
    if newest is None:
        return None
    record = _record(newest)
    try:
        event = record.document().event(last.event_id)
    except DocumentError:
        return None
    if event is None:
        return None
    return StoryEntry(
        time=record.last_seen, kind="last-seen", event_id=event.event_id,
        endpoint=record.endpoint, incarnation=record.incarnation,
        detail="still in the newest recorded document", event_type=event.event_type.value,
        status=event.status.value, not_before=format_not_before(event.not_before))


def prune(conn: sqlite3.Connection, cutoff: datetime) -> int:
    """Delete incarnations last seen before ``cutoff``; the audit log is not touched."""
    stamp = to_db_time(cutoff)
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("DELETE FROM event_changes WHERE incarnation_id IN "
                     "(SELECT id FROM incarnations WHERE last_seen < ?)", (stamp,))
        deleted = conn.execute("DELETE FROM incarnations WHERE last_seen < ?", (stamp,)).rowcount
        conn.execute("COMMIT")
        return int(deleted)
    except BaseException:
        _rollback(conn)
        raise


# An unchanged document bumps its row's last_seen at most this often: a day of polling
# once a second is at most 1,440 small updates and no new rows.
TOUCH_INTERVAL = timedelta(seconds=60)
# Retention runs at most this often, when a new incarnation is recorded.
PRUNE_INTERVAL = timedelta(hours=1)


@dataclass(frozen=True)
class _Touched:
    """The last document written for an endpoint, and when."""

    incarnation: int
    raw: Mapping[str, Any]
    digest: str
    written: datetime


class History:
    """The history of incarnations in ``database``, kept ``history_days`` (None, or 0 as
    the config file spells it: forever)."""

    def __init__(self, database: Database, *, history_days: int | None = 90) -> None:
        self.database = database
        # 0 means "keep forever" in the config file; as a day count it would prune all.
        self.history_days = history_days if history_days and history_days > 0 else None
        self._touched: dict[str, _Touched] = {}
        self._last_prune: datetime | None = None

    def record(self, doc: Document, *, seen_at: datetime, endpoint: str,
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
        with self.database.using("record the history", write=True) as conn:
            touched = self._touched.get(endpoint)
            # Polled once a second, the same document comes back again and again: a dict
            # comparison spares hashing it each time.
            if touched is not None and touched.incarnation == doc.incarnation \
                    and touched.raw == doc.raw:
                digest = touched.digest
                if timedelta(0) <= seen_at - touched.written < TOUCH_INTERVAL:
                    return False
            else:
                digest = content_hash(doc)
            new = insert_or_touch(conn, doc, seen_at=seen_at, endpoint=endpoint,
                                       changes=changes, digest=digest, gap=gap, after=after,
                                       clock_skew=clock_skew, vm_name=vm_name)
            self._touched[endpoint] = _Touched(doc.incarnation, doc.raw, digest, seen_at)
            if new and self.history_days is not None and (
                    self._last_prune is None or seen_at - self._last_prune >= PRUNE_INTERVAL):
                self._last_prune = seen_at
                prune(conn, seen_at - timedelta(days=self.history_days))
            return new

    def incarnations(self, *, limit: int | None = 50, since: datetime | None = None,
                     endpoint: str | None = None, event_id: str | None = None,
                     before: IncarnationRecord | None = None) -> list[IncarnationRecord]:
        """Stored incarnations, newest first; ``before`` pages past an earlier result.
        Every filter is served by an index."""
        where: list[str] = []
        params: list[Any] = []
        if endpoint is not None:
            where.append("endpoint = ?")
            params.append(endpoint_column(endpoint))
        with self.database.using("read the history") as conn:
            if since is not None:
                where.append("first_seen >= ?")
                params.append(to_db_time(since))
            if before is not None:
                where.append("(first_seen < ? OR (first_seen = ? AND id < ?))")
                stamp = to_db_time(before.first_seen)
                params += [stamp, stamp, before.row_id]
            if event_id is not None:
                # Ids from the command line or the network may hold lone surrogates
                # (undecodable bytes, \ud800 in JSON): the store keeps them escaped, so look
                # them up so.
                where.append("id IN (SELECT incarnation_id FROM event_changes WHERE event_id = ?)")
                params.append(clean_text(event_id))
            sql = f"SELECT {_COLUMNS} FROM incarnations"
            if where:
                sql += " WHERE " + " AND ".join(where)
            sql += " ORDER BY first_seen DESC, id DESC"
            if limit is not None:
                sql += " LIMIT ?"
                params.append(max(0, limit))
            return [_record(row) for row in conn.execute(sql, params)]

    def incarnation(self, number: int, *, endpoint: str | None = None) -> IncarnationRecord | None:
        """The most recently seen document with that incarnation number."""
        sql = f"SELECT {_COLUMNS} FROM incarnations WHERE incarnation = ?"
        params: list[Any] = [number]
        if endpoint is not None:
            sql += " AND endpoint = ?"
            params.append(endpoint_column(endpoint))
        with self.database.using("read the history") as conn:
            row = conn.execute(sql + " ORDER BY last_seen DESC, id DESC LIMIT 1",
                               params).fetchone()
            return _record(row) if row else None

    def previous(self, record: IncarnationRecord) -> IncarnationRecord | None:
        """The document seen at the same endpoint just before ``record``."""
        with self.database.using("read the history") as conn:
            stamp = to_db_time(record.first_seen)
            if record.row_id:
                row = conn.execute(
                    f"SELECT {_COLUMNS} FROM incarnations WHERE endpoint = ? AND "
                    "(first_seen < ? OR (first_seen = ? AND id < ?)) "
                    "ORDER BY first_seen DESC, id DESC LIMIT 1",
                    (record.endpoint, stamp, stamp, record.row_id)).fetchone()
            else:
                row = conn.execute(
                    f"SELECT {_COLUMNS} FROM incarnations WHERE endpoint = ? AND first_seen < ? "
                    "ORDER BY first_seen DESC, id DESC LIMIT 1",
                    (record.endpoint, stamp)).fetchone()
            return _record(row) if row else None

    def prune(self, *, now: datetime) -> int:
        """Delete history last seen more than ``history_days`` before ``now``."""
        if self.history_days is None:
            return 0
        with self.database.using("prune the history", write=True) as conn:
            self._last_prune = utc(now)
            return prune(conn, utc(now) - timedelta(days=self.history_days))

    def newest_document(self, endpoint: str) -> tuple[Document, str] | None:
        """The newest stored document of ``endpoint`` and its content hash: where a
        restarted monitor takes up the story."""
        with self.database.using("read the history") as conn:
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
