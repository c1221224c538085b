"""What the monitor knew at a past moment, rebuilt from the store: the road replay takes.

A :class:`Recording` is read once (on a thread: it is SQLite, or the agent's API, which
reads the same through the same function: store.stored.gather) and then answers, for any
moment, the state a live monitor would have held then: the document current at that
moment, each event's life folded from the *stored* changes (so the gap rules the store
applied hold in the replay too) with what the agent measured of it, the holds people set
on its automation and its hook runs, the audit records up
to then, the stalls and boots just before, and whether anything was recording at all.
Nothing is guessed: in a hole the document is shown as the last one recorded, and said to
be that.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property

from setui.core.health import ConnectionState, Health
from setui.core.holes import MIN_HOLE, Hole
from setui.core.impact import Impact, impact_words
from setui.core.model import Document, DocumentError, Event
from setui.core.timefmt import stamp
from setui.core.tracker import Change, ChangeKind
from setui.monitor.state import EventLife, MonitorState
from setui.store.agent import holds_of
from setui.store.history import TOUCH_INTERVAL
from setui.store.reading import Record, RecordingParts
from setui.store.records import AuditRecord, ChangeRecord, IncarnationRecord
from setui.store.story import hold_words, hook_run_words

__all__ = ["RECENT_IMPACT", "Moment", "Recording", "load_recording", "recorded_lives"]

_LEFT = ("completed", "cancelled", "gone")


# How long before a moment a stall or a boot is still told with it (the replay's line).
RECENT_IMPACT = timedelta(minutes=5)


@dataclass(frozen=True)
class Moment:
    """What the record says about one moment, beside the monitor state."""

    at: datetime
    index: int | None  # the incarnation current then, by position in the recording
    hole: Hole | None  # nothing was recording then
    audit: tuple[AuditRecord, ...]  # the audit records up to then, oldest first
    # The stalls and boots measured up to RECENT_IMPACT before it, oldest first.
    impacts: tuple[Impact, ...] = ()


@dataclass(frozen=True)
class Recording(RecordingParts):
    """One endpoint's record (store.reading.RecordingParts: incarnations, audit records,
    holes, what was measured, oldest first), its documents parsed."""

    # Each record's document, parsed once when read (None: unreadable), so moving the
    # cursor on the event loop only folds what is already in memory.
    documents: tuple[Document | None, ...] = ()

    def document(self, index: int) -> Document | None:
        if index < len(self.documents):
            return self.documents[index]
        try:
            return self.records[index].document()
        except (DocumentError, ValueError):
            return None

    @cached_property
    def times(self) -> list[datetime]:
        """When each incarnation was first seen: the stops of the cursor."""
        return [r.first_seen for r in self.records]

    def index_at(self, at: datetime) -> int | None:
        """The position of the incarnation current at ``at`` (None: before the first)."""
        position = bisect.bisect_right(self.times, at) - 1
        return position if position >= 0 else None

    def step(self, at: datetime, direction: int) -> datetime:
        """The first-seen moment of the incarnation before (-1) or after (+1) ``at``;
        ``at`` itself when there is none that way."""
        times = self.times
        if direction > 0:
            position = bisect.bisect_right(times, at)
            return times[position] if position < len(times) else at
        position = bisect.bisect_left(times, at) - 1
        return times[position] if position >= 0 else at

    def clamp(self, at: datetime) -> datetime:
        return min(max(at, self.start), self.end)

    def opening(self) -> datetime:
        """Where a replay opens by default: the first incarnation from ``start`` on that
        has events (an empty one would show nothing), else ``start``."""
        first = self.index_at(self.start)
        for position in range(first if first is not None else 0, len(self.records)):
            document = self.document(position)
            if document is not None and document.events:
                return max(self.records[position].first_seen, self.start)
        return self.start

    def vm_name_at(self, at: datetime) -> str | None:
        """This VM's name as the record keeps it: the incarnation's current at ``at``, else
        the newest the record knows (None: not known, as in a store older than that)."""
        index = self.index_at(at)
        if index is not None and self.records[index].vm_name:
            return self.records[index].vm_name
        return next((r.vm_name for r in reversed(self.records) if r.vm_name), None)

    def hole_at(self, at: datetime) -> Hole | None:
        for hole in self.holes:
            if hole.holds(at):
                return hole
        if not self.sessions_known:
            # A store from before recording sessions were kept: past a document's last
            # sighting (touched at least once a minute while polled) nothing is known.
            index = self.index_at(at)
            if index is not None:
                last = self.records[index].last_seen
                following = (self.records[index + 1].first_seen
                             if index + 1 < len(self.records) else self.end)
                if at > last + 2 * TOUCH_INTERVAL:
                    return Hole(last, following, endpoint=self.endpoint)
        return None

    def moment(self, at: datetime) -> Moment:
        stamp = [r.time for r in self.audit]
        upto = bisect.bisect_right(stamp, at)
        recent = tuple(i for i in self.impacts if at - RECENT_IMPACT <= i.at <= at)
        return Moment(at, self.index_at(at), self.hole_at(at), self.audit[:upto], recent)

    def measured_since(self, end: datetime) -> datetime | None:
        """Since when the agent's heartbeat has run without a break (none over
        ``MIN_HOLE``) up to ``end``; None when it was not running then. A session that
        has just begun reaches no further than its start until its first beat, and still
        counts: it runs."""
        since: datetime | None = None
        covered: datetime | None = None
        for begin, until in sorted(self.measuring):
            if begin > end:
                break
            if covered is None or begin > covered + MIN_HOLE:
                since, covered = begin, until
            else:
                covered = max(covered, until)
        return since if covered is not None and covered >= end else None

    def measured_over(self, start: datetime, end: datetime) -> bool:
        """Whether the agent's heartbeat ran from ``start`` to ``end`` without a break
        (so a stall or a boot then would be in the record)."""
        since = self.measured_since(end)
        return since is not None and since <= start + MIN_HOLE

    def state_at(self, at: datetime, state: MonitorState | None = None) -> MonitorState:
        """The monitor state at ``at``, folded into ``state`` (a fresh one by default):
        the caller may pass a subclass (the dashboard's session)."""
        state = state if state is not None else MonitorState()
        index = self.index_at(at)
        previous: Document | None = None
        current: Document | None = None
        record: IncarnationRecord | None = None
        for position, record in enumerate(self.records[: (index + 1) if index is not None
                                                       else 0]):
            document = self.document(position)
            if document is None:
                continue  # an unreadable row: its changes cannot be given events
            current = document
            for change in record.changes:
                made = _change(change, record, current, previous)
                if made is not None:
                    state.record(made)
            if previous is None or previous.incarnation != current.incarnation:
                state.incarnation_since = record.first_seen
            previous = current
        state.document = current
        hole = self.hole_at(at)
        if current is None or record is None:
            state.health = Health(state=ConnectionState.ENABLING)
            state.last_seen = None
            return state
        if hole is not None:
            seen = min(max(hole.start, record.first_seen), at)
            state.last_seen = seen
            state.health = Health(state=ConnectionState.STALE, last_success=seen,
                                  first_call_pending=False, clock_skew=record.clock_skew,
                                  last_error="nothing was recording")
        else:
            state.last_seen = at
            state.health = Health(state=ConnectionState.LIVE, last_success=at,
                                  first_call_pending=False, clock_skew=record.clock_skew)
        for impact in self.impacts:  # what was measured of each event, in its life
            life = state.lives.get(impact.event_id or "")
            if life is not None and impact.at <= at:
                life.notes.append((impact.at, f"measured: {impact_words(impact, local=False)}"))
        self._fold_agent(state, at)
        for life in state.lives.values():
            life.notes.sort(key=lambda note: note[0])
        return state

    def _fold_agent(self, state: MonitorState, at: datetime) -> None:
        """The holds people set on the agent's automation and the agent's hook runs, up
        to ``at``, in the lives of their events: as they stood at that moment."""
        lives = {event_id.casefold(): life for event_id, life in state.lives.items()}
        for hold in holds_of(r for r in self.audit if r.time <= at):
            life = lives.get(hold.event_id.casefold())
            if life is not None:
                life.notes.append((hold.since, hold_words(hold)))
        for run in self.hook_runs:
            life = lives.get(run.event_id.casefold())
            if life is None or run.started > at:
                continue
            if run.ended is not None and run.ended > at:
                words = (f"{run.step} hook (rule {run.rule}) running since "
                         f"{stamp(run.started, local=False)}")
            else:
                words = hook_run_words(run)
            life.notes.append((run.started, words))


def _change(stored: ChangeRecord, record: IncarnationRecord, current: Document,
            previous: Document | None) -> Change | None:
    """A stored change with the events it was about, taken from the stored documents:
    the one it came in for what is there now, the one before for what left."""
    try:
        kind = ChangeKind(stored.kind)
    except ValueError:
        return None
    event: Event | None = None
    before: Event | None = None
    if stored.event_id is not None:
        now_event = current.event(stored.event_id)
        old_event = previous.event(stored.event_id) if previous is not None else None
        if stored.kind in _LEFT:
            event, before = old_event, old_event
        else:
            event, before = now_event, old_event
        if event is None:
            return None  # the story does not match the documents it was stored with
    return Change(kind, record.incarnation, record.first_seen, event, before,
                  detail=stored.detail, initial=stored.initial, certain=stored.certain,
                  missed=stored.missed)


def recorded_lives(records: Iterable[IncarnationRecord], event_ids: Iterable[str],
                   ) -> dict[str, EventLife]:
    """The lives of ``event_ids`` as the record tells them, folded from the stored changes
    of ``records`` (each incarnation that stored a change of one of them, in any order):
    where a restarted monitor takes each event's life up. An event's departures are left
    out (it is there again), and so is a change whose document cannot be read."""
    wanted = {i.casefold() for i in event_ids}
    state = MonitorState()
    for record in sorted(records, key=lambda r: (r.first_seen, r.row_id)):
        try:
            document = record.document()
        except (DocumentError, ValueError):
            continue
        for stored in record.changes:
            if (stored.event_id or "").casefold() not in wanted or stored.kind in _LEFT:
                continue
            made = _change(stored, record, document, None)
            if made is not None:
                state.record(made)
    return {i: life for i, life in state.lives.items() if i.casefold() in wanted}


def load_recording(record: Record, *, since: datetime | None = None,
                   until: datetime | None = None,
                   endpoint: str | None = None) -> Recording | None:
    """One endpoint's record (the newest one's, unless named) for the moments from
    ``since`` to ``until`` (store.stored.gather says what it holds), from a store or from the
    agent alike; None when nothing was recorded there. Blocking: call it on a thread."""
    parts = record.recording(since=since, until=until, endpoint=endpoint)
    if parts is None:
        return None
    return Recording(**vars(parts), documents=tuple(_parsed(r) for r in parts.records))


def _parsed(record: IncarnationRecord) -> Document | None:
    try:
        return record.document()
    except (DocumentError, ValueError):
        return None

