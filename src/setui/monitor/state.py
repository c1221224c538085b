"""What the monitor knows at this moment: the document, each event's life, the health.

Every front end reads the same state: the dashboard draws it, ``setui watch`` prints
its changes, and later front ends (the agent, replay) take the same road. It is fed one
:class:`~setui.core.health.PollResult` at a time and keeps what a single result cannot
say: when an event first appeared, when it started (and whether that is exact), the
NotBefore it had while Scheduled (the service empties it once Started), and how it left.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from setui.core.health import ConnectionState, Health, PollResult
from setui.core.model import Document, Event
from setui.core.tracker import Change, ChangeKind

__all__ = ["ANNOUNCED", "EventLife", "GoneEvent", "MonitorState", "MonitorUpdate"]


@dataclass
class EventLife:
    """An event's life as this monitor saw it."""

    event_id: str
    first_seen: datetime
    first_incarnation: int
    initial: bool  # in the first document of the session: it may be older
    started_at: datetime | None = None
    started_incarnation: int | None = None
    started_exact: bool = True  # False: already Started when first seen, or seen across a gap
    gone_at: datetime | None = None
    gone_incarnation: int | None = None
    fate: str | None = None  # "completed", "cancelled" or "gone" (not known whether it ran)
    fate_certain: bool = True
    not_before: datetime | None = None  # the last NotBefore it had while Scheduled
    notes: list[tuple[datetime, str]] = field(default_factory=list)
    # How it was announced, for its notice (core.notice): the NotBefore it first had,
    # whether it was seen to appear as it happened (not across a gap), and already Started.
    announced: datetime | None = None
    appeared_certain: bool = False
    appeared_started: bool = False


@dataclass(frozen=True)
class GoneEvent:
    """An event that left the document this session: kept for the timeline."""

    event: Event
    fate: str  # completed, cancelled or gone
    at: datetime
    incarnation: int
    started_at: datetime | None = None
    certain: bool = True
    detail: str = ""


# What is news to a person: an event came, started, or left.
ANNOUNCED = (ChangeKind.APPEARED, ChangeKind.STARTED, ChangeKind.COMPLETED,
             ChangeKind.CANCELLED, ChangeKind.GONE)
_LEFT = (ChangeKind.COMPLETED, ChangeKind.CANCELLED, ChangeKind.GONE)
MAX_GONE = 200  # gone events kept for the timeline and details: the newest ones
MAX_ANOMALIES = 200


@dataclass
class MonitorState:
    """The monitor's record of this run; fed one PollResult at a time."""

    document: Document | None = None
    health: Health = field(default_factory=Health)
    lives: dict[str, EventLife] = field(default_factory=dict)
    gone: list[GoneEvent] = field(default_factory=list)
    anomalies: list[Change] = field(default_factory=list)
    last_seen: datetime | None = None  # the last fresh answer, in the monitor's clock
    incarnation_since: datetime | None = None  # when the current incarnation was first seen

    def apply(self, result: PollResult) -> tuple[list[Change], ConnectionState | None]:
        """Take one result. Returns the changes worth announcing (new, started, gone;
        never those of the first document) and the previous connection state when it
        changed (None otherwise)."""
        previous = self.health.state
        self.health = result.health
        before = self.document.incarnation if self.document is not None else None
        if result.document is not None:
            self.document = result.document
        if result.fresh and result.seen_at is not None:
            self.last_seen = result.seen_at
            if self.document is not None and self.document.incarnation != before:
                self.incarnation_since = result.seen_at
        announce: list[Change] = []
        for change in result.changes:
            self.record(change)
            if change.kind in ANNOUNCED and not change.initial:
                announce.append(change)
        return announce, (previous if previous is not result.health.state else None)

    def record(self, change: Change) -> None:
        """Fold one change into the lives of the events."""
        event = change.event
        if change.kind is ChangeKind.ANOMALY or event is None:
            self.anomalies.append(change)
            del self.anomalies[:-MAX_ANOMALIES]
            return
        life = self.lives.get(event.event_id)
        if change.kind is ChangeKind.APPEARED and change.initial and life is not None \
                and life.gone_at is None:
            self._seen_again(life, change)
            return
        if change.kind is ChangeKind.APPEARED or life is None:
            appeared = change.kind is ChangeKind.APPEARED
            life = EventLife(event.event_id, change.seen_at, change.incarnation, change.initial,
                             not_before=event.not_before, announced=event.not_before,
                             appeared_certain=appeared and change.certain,
                             appeared_started=appeared and event.is_started)
            self.lives[event.event_id] = life
            if event.is_started:
                life.started_at = change.seen_at
                life.started_incarnation = change.incarnation
                life.started_exact = not change.initial
                life.notes.append((change.seen_at, "appeared already started"))
            if change.kind is not ChangeKind.APPEARED:
                self._record_more(life, change)
            return
        self._record_more(life, change)

    def _seen_again(self, life: EventLife, change: Change) -> None:
        """The first document of a session holds an event whose life is known already
        (a restarted monitor took it up from the record): the life goes on from there.
        One that is Started now but was not when last recorded started while nothing
        watched: when is not known, only that it was before this sighting."""
        event = change.event
        assert event is not None
        if event.is_scheduled and event.not_before is not None:
            life.not_before = event.not_before
        if event.is_started and life.started_at is None:
            life.started_at = change.seen_at
            life.started_incarnation = change.incarnation
            life.started_exact = False
            life.notes.append((change.seen_at, "already started when seen again: it "
                                               "started while nothing was watching"))

    def _record_more(self, life: EventLife, change: Change) -> None:
        event = change.event
        assert event is not None
        if event.is_scheduled and event.not_before is not None:
            life.not_before = event.not_before
        if change.kind is ChangeKind.STARTED:
            life.started_at = change.seen_at
            life.started_incarnation = change.incarnation
            life.started_exact = change.certain
            if change.detail:
                life.notes.append((change.seen_at, change.detail))
        elif change.kind in _LEFT:
            life.gone_at = change.seen_at
            life.gone_incarnation = change.incarnation
            life.fate = change.kind.value
            life.fate_certain = change.certain
            if change.detail:
                life.notes.append((change.seen_at, f"{change.kind.value}: {change.detail}"))
            self.gone.insert(0, GoneEvent(event, change.kind.value, change.seen_at,
                                          change.incarnation, life.started_at,
                                          certain=change.certain, detail=change.detail))
            del self.gone[MAX_GONE:]
        else:
            life.notes.append((change.seen_at, f"{change.kind.value}: {change.detail}"))


@dataclass(frozen=True)
class MonitorUpdate:
    """One poll attempt, already folded into the monitor's state (the agent's, for a
    front end attached to it: setui.api.attached)."""

    result: PollResult
    announce: tuple[Change, ...]  # the changes that are news (not the first document's)
    previous_state: ConnectionState | None  # the connection state before, when it changed
