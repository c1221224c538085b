"""What flows from the poller to the dashboard, and the session record it builds.

``PollUpdate`` carries one :class:`PollResult`; a burst of them collapses into the newest
(``can_replace``) unless the older one carries changes. :class:`Session` is the
dashboard's memory of this run: each event's life so far, the events that are gone
(kept greyed on the timeline), and the approvals made here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from textual.message import Message

from setui.core.health import ConnectionState, Health, PollResult
from setui.core.model import Document, Event
from setui.core.tracker import Change, ChangeKind

__all__ = ["ApprovalDone", "ApprovalNote", "EventLife", "GoneEvent", "PollUpdate", "Session"]


class PollUpdate(Message):
    """One poll attempt's result, posted by the polling worker."""

    def __init__(self, result: PollResult) -> None:
        super().__init__()
        self.result = result

    def can_replace(self, message: Message) -> bool:
        # An older result without changes is superseded by this one, as long as it does
        # not hold a document this one lacks (it would be missing from the history).
        if not isinstance(message, PollUpdate) or message.result.changes:
            return False
        older, newer = message.result.document, self.result.document
        return older is None or (newer is not None and older.incarnation == newer.incarnation)


class ApprovalDone(Message):
    """An approval (or its refusal) finished; ``notes`` are by EventId."""

    def __init__(self, notes: list[ApprovalNote]) -> None:
        super().__init__()
        self.notes = notes


@dataclass(frozen=True)
class ApprovalNote:
    """What this dashboard did about one event: shown on its row and in its details."""

    event_id: str
    at: datetime
    user: str
    approved: bool = False
    refused: bool = False
    pending: bool = False
    message: str = ""


@dataclass
class EventLife:
    """An event's life as this session saw it."""

    event_id: str
    first_seen: datetime
    first_incarnation: int
    initial: bool  # in the first document of the session: it may be older
    started_at: datetime | None = None
    started_incarnation: int | None = None
    started_exact: bool = True  # False: it was already Started when first seen
    gone_at: datetime | None = None
    gone_incarnation: int | None = None
    fate: str | None = None  # "completed" or "cancelled"
    notes: list[tuple[datetime, str]] = field(default_factory=list)


@dataclass(frozen=True)
class GoneEvent:
    """An event that left the document this session: kept for the timeline."""

    event: Event
    fate: str  # completed or cancelled
    at: datetime
    incarnation: int
    started_at: datetime | None = None


_ANNOUNCED = (ChangeKind.APPEARED, ChangeKind.STARTED, ChangeKind.COMPLETED,
              ChangeKind.CANCELLED)


@dataclass
class Session:
    """The dashboard's record of this run; fed one PollResult at a time."""

    document: Document | None = None
    health: Health = field(default_factory=Health)
    lives: dict[str, EventLife] = field(default_factory=dict)
    gone: list[GoneEvent] = field(default_factory=list)
    approvals: dict[str, ApprovalNote] = field(default_factory=dict)
    anomalies: list[Change] = field(default_factory=list)
    last_seen: datetime | None = None  # the last fresh answer, by the app's clock
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
            self._record(change)
            if change.kind in _ANNOUNCED and not change.initial:
                announce.append(change)
        return announce, (previous if previous is not result.health.state else None)

    def _record(self, change: Change) -> None:
        event = change.event
        if change.kind is ChangeKind.ANOMALY or event is None:
            self.anomalies.append(change)
            return
        life = self.lives.get(event.event_id)
        if change.kind is ChangeKind.APPEARED or life is None:
            life = EventLife(event.event_id, change.seen_at, change.incarnation, change.initial)
            self.lives[event.event_id] = life
            if event.is_started:
                life.started_at = change.seen_at
                life.started_incarnation = change.incarnation
                life.started_exact = not change.initial
                life.notes.append((change.seen_at, "appeared already started"))
            return
        if change.kind is ChangeKind.STARTED:
            life.started_at = change.seen_at
            life.started_incarnation = change.incarnation
            life.started_exact = True
        elif change.kind in (ChangeKind.COMPLETED, ChangeKind.CANCELLED):
            life.gone_at = change.seen_at
            life.gone_incarnation = change.incarnation
            life.fate = change.kind.value
            self.gone.insert(0, GoneEvent(event, change.kind.value, change.seen_at,
                                          change.incarnation, life.started_at))
        else:
            life.notes.append((change.seen_at, f"{change.kind.value}: {change.detail}"))

    def note_approval(self, note: ApprovalNote) -> None:
        """Remember the latest approval note; a refusal does not hide an approval."""
        current = self.approvals.get(note.event_id)
        if note.refused and current is not None and current.approved:
            return
        self.approvals[note.event_id] = note
        life = self.lives.get(note.event_id)
        if life is not None and not note.pending:
            life.notes.append((note.at, note.message or ("approved" if note.approved
                                                          else "not approved")))

    def pending(self, event_id: str) -> bool:
        note = self.approvals.get(event_id)
        return note is not None and note.pending

    def mark_pending(self, event_id: str, at: datetime, user: str) -> None:
        previous = self.approvals.get(event_id)
        if previous is not None and previous.approved:
            self.approvals[event_id] = replace(previous, pending=True)
        else:
            self.approvals[event_id] = ApprovalNote(event_id, at, user, pending=True)
