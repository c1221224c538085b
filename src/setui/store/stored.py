"""``StoredRecord``: the record read from the store itself, answering the questions a front
end asks (store.reading.Record) as the agent's client answers them through its API.

Each answer is one part's (the history, the audit log, the recording sessions); the few
that gather across the parts (an event's story, ids by prefix, a replay's recording) are
asked of the database they share.

:func:`gather` is one home for what a recording holds, whoever reads it: a command
reading the store itself, or the agent answering a front end's ``recording`` query
(setui.api), both ask this read view.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from setui.core.holes import Hole
from setui.core.impact import Impact
from setui.store import eventids, story
from setui.store.agent import hook_runs_of
from setui.store.audit import AuditLog
from setui.store.connection import Database
from setui.store.endpoints import endpoint_column
from setui.store.history import History
from setui.store.reading import RecordingParts
from setui.store.records import (
    AuditRecord,
    Claim,
    IncarnationRecord,
    StoryEntry,
    VerifyResult,
)
from setui.store.sessions import RecordingSessions

__all__ = ["StoredRecord", "gather"]


class StoredRecord:
    """A :class:`~setui.store.reading.Record` over one opened store's parts; closing it
    closes the database."""

    def __init__(self, database: Database, history: History, audit_log: AuditLog,
                 sessions: RecordingSessions) -> None:
        self.database = database
        self._history = history
        self._audit = audit_log
        self._sessions = sessions

    def history(self, *, limit: int | None = 50, since: datetime | None = None,
                endpoint: str | None = None, event_id: str | None = None,
                before: IncarnationRecord | None = None) -> list[IncarnationRecord]:
        return self._history.incarnations(limit=limit, since=since, endpoint=endpoint,
                                          event_id=event_id, before=before)

    def incarnation(self, number: int, *,
                    endpoint: str | None = None) -> IncarnationRecord | None:
        return self._history.incarnation(number, endpoint=endpoint)

    def previous(self, record: IncarnationRecord) -> IncarnationRecord | None:
        return self._history.previous(record)

    def event_story(self, event_id: str) -> list[StoryEntry]:
        return story.event_story(self.database, event_id)

    def event_ids(self, prefix: str, *, limit: int = 20) -> list[str]:
        """EventIds the history or the audit log knows that start with ``prefix`` (case
        ignored), newest first: for resolving an id typed by a person."""
        with self.database.using("read the history") as conn:
            return eventids.known(conn, prefix, limit)

    def holes(self, *, endpoint: str, now: datetime | None = None) -> list[Hole]:
        return self._sessions.holes(endpoint=endpoint, now=now)

    def impacts(self, *, endpoint: str, since: datetime | None = None,
                until: datetime | None = None, newest: int | None = None) -> list[Impact]:
        return self._sessions.impacts(endpoint=endpoint, since=since, until=until,
                                      newest=newest)

    def approvals(self, event_ids: Sequence[str], *,
                  unknown: bool = False) -> dict[str, AuditRecord]:
        return self._audit.approvals(event_ids, unknown=unknown)

    def claim(self, event_id: str, endpoint: str, *,
              vm_id: str | None = None) -> Claim | None:
        return self._audit.claim(event_id, endpoint, vm_id=vm_id)

    def audit(self, *, limit: int | None = None, oldest_first: bool = False,
              after: int | None = None, before: int | None = None) -> list[AuditRecord]:
        return self._audit.records(limit=limit, oldest_first=oldest_first, after=after,
                                   before=before)

    def unforwarded(self) -> dict[int, str]:
        return self._audit.unforwarded()

    def missing_records(self) -> str | None:
        return self._audit.missing_records()

    def verify_audit(self) -> VerifyResult:
        return self._audit.verify()

    def recording(self, *, since: datetime | None = None, until: datetime | None = None,
                  endpoint: str | None = None) -> RecordingParts | None:
        """One endpoint's record for a replay or a report (:func:`gather`); None when
        nothing was recorded there."""
        return gather(self._history, self._audit, self._sessions, since=since,
                                until=until, endpoint=endpoint)

    def close(self) -> None:
        self.database.close()


def gather(history: History, audit_log: AuditLog, sessions: RecordingSessions, *,
           since: datetime | None = None, until: datetime | None = None,
           endpoint: str | None = None) -> RecordingParts | None:
    """One endpoint's record (the newest one's, unless named) for the moments from
    ``since`` to ``until``. Every incarnation before ``until`` is read, also those before
    ``since``: an event's life began when it appeared, not when the window opens. None
    when nothing was recorded there."""
    newest = history.incarnations(limit=1, endpoint=endpoint)
    if not newest:
        return None
    endpoint = newest[0].endpoint
    records = list(reversed(history.incarnations(limit=None, endpoint=endpoint)))
    if until is not None:
        records = [r for r in records if r.first_seen <= until]
    if not records:
        return None
    # The audit log keeps each endpoint as the approval wrote it; the history, keyed.
    audit = tuple(r for r in audit_log.records(oldest_first=True)
                  if endpoint_column(r.endpoint) == endpoint
                  and (until is None or r.time <= until))
    first = records[0].first_seen
    spans = sessions.spans(endpoint=endpoint)
    # A document's last sighting moves at most once a minute; the sessions say how far
    # the record really reaches.
    measured = tuple(sessions.impacts(endpoint=endpoint, until=until))
    event_ids = {c.event_id for r in records for c in r.changes if c.event_id}
    with history.database.using("read the hook runs") as conn:
        runs = tuple(r for r in hook_runs_of(conn, event_ids)
                     if until is None or r.started <= until)
    # A stall or boot measured, or a hook run, is the agent seen running then: the record
    # reaches it, whether or not a document's sighting or the session's last beat was
    # written since.
    last = max([r.last_seen for r in records] + [s.end for s in spans if s.end >= first]
               + [i.at for i in measured if i.at >= first]
               + [r.ended or r.started for r in runs if r.started >= first])
    end = until if until is not None else max(last, audit[-1].time if audit else last)
    start = max(since, first) if since is not None else first
    start = min(start, end)
    holes = tuple(h for h in sessions.holes(endpoint=endpoint) if h.overlaps(first, end))
    # A session still running measures up to the record's end, though its last beat (one
    # a minute) may be older than a sighting written since.
    live = {s.id for s in sessions.running(endpoint=endpoint, at=end)}
    measuring = tuple((s.started, max(s.end, end) if s.id in live else s.end)
                      for s in spans if s.measures)
    return RecordingParts(endpoint, tuple(records), audit, holes, bool(spans), start,
                          end, measured, measuring, runs)
