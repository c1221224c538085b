"""One endpoint's record gathered for a replay or a report, read from a store.

One home for what a recording holds, whoever reads it: a command reading the store
itself, or the agent answering a front end's ``recording`` query (setui.api), both ask
the store's read view (store.stored), which calls :func:`gather` over the store's parts.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from setui.store.agent import hook_runs_of
from setui.store.endpoints import endpoint_column
from setui.store.reading import RecordingParts

if TYPE_CHECKING:
    from setui.store.auditlog import AuditLog
    from setui.store.incarnations import History
    from setui.store.sessions import RecordingSessions

__all__ = ["gather"]


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
