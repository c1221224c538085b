"""``History``: the incarnations recorded in the database, each distinct document once
(the SQL is store.history's), and their retention."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from setui.core.model import Document, DocumentError, parse_document
from setui.core.tracker import Change
from setui.store import history as hist
from setui.store.database import Database
from setui.store.endpoints import endpoint_column
from setui.store.records import IncarnationRecord, utc

__all__ = ["History"]

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
    """The history of incarnations in ``database``.

    ``history_days=None`` (or 0, as the config file spells it) keeps the history
    forever; the audit log is always kept whole.
    """

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

    def incarnations(self, *, limit: int | None = 50, since: datetime | None = None,
                     endpoint: str | None = None, event_id: str | None = None,
                     before: IncarnationRecord | None = None) -> list[IncarnationRecord]:
        """Stored incarnations, newest first; ``before`` pages past an earlier result."""
        # Ids from the command line or the network may hold lone surrogates (undecodable
        # bytes, \ud800 in JSON): the store keeps them escaped, so look them up so.
        event_id = None if event_id is None else hist.clean_text(event_id)
        endpoint = None if endpoint is None else endpoint_column(endpoint)
        with self.database.using("read the history") as conn:
            return hist.query_history(conn, limit=limit, since=since, endpoint=endpoint,
                                      event_id=event_id, before=before)

    def incarnation(self, number: int, *, endpoint: str | None = None) -> IncarnationRecord | None:
        """The most recently seen document with that incarnation number."""
        endpoint = None if endpoint is None else endpoint_column(endpoint)
        with self.database.using("read the history") as conn:
            return hist.find_incarnation(conn, number, endpoint)

    def previous(self, record: IncarnationRecord) -> IncarnationRecord | None:
        """The document seen at the same endpoint just before ``record``."""
        with self.database.using("read the history") as conn:
            return hist.previous(conn, record)

    def prune(self, *, now: datetime) -> int:
        """Delete history last seen more than ``history_days`` before ``now``."""
        if self.history_days is None:
            return 0
        with self.database.using("prune the history", write=True) as conn:
            self._last_prune = utc(now)
            return hist.prune(conn, utc(now) - timedelta(days=self.history_days))

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
