"""What flows between the monitor, the app and the screens, and the session record.

The requests a screen posts up when a key asks the app for something (approve, hold,
details, poll, history, audit): the screen never calls the app. ``PollUpdate`` carries
one :class:`PollResult` that the monitor has already folded into the state; a burst of
them collapses into the newest (``can_replace``) unless the older one carries changes.
:class:`Session` is the monitor's state (each event's life so far, the events that are
gone, kept greyed on the timeline) plus the approvals made here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from textual.message import Message

from setui.approval.outcome import ApprovalOutcome
from setui.core.health import ConnectionState, PollResult
from setui.core.model import Document
from setui.core.tracker import Change
from setui.monitor.state import EventLife, GoneEvent, MonitorState

__all__ = ["ApprovalDone", "ApprovalNote", "ApprovalRequested", "AuditRequested",
           "DetailsRequested", "EventLife", "EventRequest", "GoneEvent", "HistoryRequested",
           "HoldRequested", "PollRequested", "PollUpdate", "Session"]


class PollUpdate(Message):
    """One poll attempt's result, posted by the polling worker once the monitor took it."""

    def __init__(self, result: PollResult, announce: tuple[Change, ...] = (),
                 previous_state: ConnectionState | None = None) -> None:
        super().__init__()
        self.result = result
        self.announce = announce
        self.previous_state = previous_state

    def can_replace(self, message: Message) -> bool:
        # An older result without changes is superseded by this one, as long as it does
        # not hold a document this one lacks (it would be missing from the history).
        if not isinstance(message, PollUpdate) or message.result.changes \
                or message.previous_state is not None:
            return False
        older, newer = message.result.document, self.result.document
        return older is None or (newer is not None and older.incarnation == newer.incarnation)


class EventRequest(Message):
    """A key on a screen asks the app to act on an event; the app that hosts the screen
    answers it (a replay answers it otherwise, or not at all)."""

    def __init__(self, event_id: str) -> None:
        super().__init__()
        self.event_id = event_id


class ApprovalRequested(EventRequest):
    """``a``: approve this event (the app refuses with the reason, or asks first)."""


class HoldRequested(EventRequest):
    """``H``: hold or release `setui agent` for this event."""


class DetailsRequested(EventRequest):
    """``Enter``/``d``: open this event's details."""


class PollRequested(Message):
    """``r``: ask the service now."""


class HistoryRequested(Message):
    """``h``: open the history."""


class AuditRequested(Message):
    """``l``: open the audit log."""


class ApprovalDone(Message):
    """An approval (or its refusal) finished; ``notes`` are by EventId. ``announce``
    False: the operator was already told (a refusal is said before it is recorded)."""

    def __init__(self, notes: list[ApprovalNote], *, announce: bool = True,
                 ask_again: list[ApprovalOutcome] | None = None,
                 document: Document | None = None) -> None:
        super().__init__()
        self.notes = notes
        self.announce = announce
        # The approvals to be asked again (what was confirmed is not what would be
        # approved now), and the document the approver read last before it stopped them.
        self.ask_again = ask_again or []
        self.document = document


@dataclass(frozen=True)
class ApprovalNote:
    """What this dashboard did about one event: shown on its row and in its details."""

    event_id: str
    at: datetime
    user: str
    approved: bool = False
    refused: bool = False
    pending: bool = False
    unknown: bool = False  # a try may have reached the service: neither approved nor failed
    message: str = ""
    # While the service fails: the try that failed last, why, and when the next one is.
    attempt: int = 0
    last_error: str = ""
    next_at: datetime | None = None

    def in_flight(self, now: datetime, *, short: bool = False) -> str:
        """"approving… attempt 3, last HTTP 500, next in 2 s" (``short``: for a cell)."""
        if not self.attempt:
            waited = max(0, int((now - self.at).total_seconds()))
            return f"approving… {waited} s" if waited >= 2 and not short else "approving…"
        if short:
            return f"approving… #{self.attempt + 1}"
        text = f"approving… attempt {self.attempt + 1}, last {self.last_error}"
        if self.next_at is not None:
            left = (self.next_at - now).total_seconds()
            text += f", next in {left:.0f} s" if left >= 0.5 else ", trying now"
        return text


@dataclass
class Session(MonitorState):
    """The dashboard's record of this run: what the monitor knows (the document, the
    lives of events, the health), and the approvals made from this dashboard."""

    approvals: dict[str, ApprovalNote] = field(default_factory=dict)

    def note_approval(self, note: ApprovalNote) -> None:
        """Remember the latest approval note; a refusal does not hide an approval, nor
        one whose outcome is unknown."""
        current = self.approvals.get(note.event_id)
        if note.refused and current is not None and (current.approved or current.unknown):
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
