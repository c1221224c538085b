"""Turn successive documents into the story of each event.

The tracker is pure: no I/O and no clock of its own (the caller says when a document
was seen), so the same sequence of documents always tells the same story, in tests,
in ``setui watch`` and in the dashboard alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import Enum

from setui.core.model import Document, Event, format_not_before

__all__ = ["Change", "ChangeKind", "Tracker", "summarize"]


class ChangeKind(str, Enum):
    APPEARED = "appeared"
    STARTED = "started"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    RESCHEDULED = "rescheduled"
    CHANGED = "changed"
    ANOMALY = "anomaly"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Change:
    """One thing that happened between two documents.

    ``event`` is the event as it is now (for completed/cancelled: as it was last seen);
    ``previous`` is how it was before, where there was a before. Anomalies may carry
    no event at all.
    """

    kind: ChangeKind
    incarnation: int
    seen_at: datetime
    event: Event | None
    previous: Event | None = None
    detail: str = ""
    initial: bool = False

    @property
    def event_id(self) -> str | None:
        return self.event.event_id if self.event else None


# The fields compared to tell "changed" apart from nothing at all.
_COMPARED = ("event_type", "status", "resources", "resource_type", "description", "source",
             "duration")


class Tracker:
    """Feed it documents in the order they were seen; it returns what changed."""

    def __init__(self) -> None:
        self._incarnation: int | None = None
        self._content: str | None = None
        self._events: dict[str, Event] = {}

    @property
    def incarnation(self) -> int | None:
        return self._incarnation

    @property
    def events(self) -> dict[str, Event]:
        """The events of the last document, by EventId."""
        return dict(self._events)

    def update(self, doc: Document, seen_at: datetime) -> list[Change]:
        content = doc.canonical_json()
        first = self._incarnation is None
        changes: list[Change] = []
        if not first:
            assert self._incarnation is not None
            if doc.incarnation == self._incarnation and content == self._content:
                return []
            if doc.incarnation < self._incarnation:
                changes.append(Change(
                    ChangeKind.ANOMALY, doc.incarnation, seen_at, None,
                    detail=f"incarnation went down from {self._incarnation} to "
                           f"{doc.incarnation}",
                ))
            elif doc.incarnation == self._incarnation:
                changes.append(Change(
                    ChangeKind.ANOMALY, doc.incarnation, seen_at, None,
                    detail=f"incarnation {doc.incarnation} arrived again with different content",
                ))
        current, duplicates = _index(doc.events)
        for event_id in duplicates:
            changes.append(Change(
                ChangeKind.ANOMALY, doc.incarnation, seen_at, current[event_id],
                detail=f"EventId {event_id} appears more than once; the first is tracked",
            ))
        for event_id, event in current.items():
            before = self._events.get(event_id)
            if before is None:
                detail = "appeared already started" if event.is_started else ""
                changes.append(Change(ChangeKind.APPEARED, doc.incarnation, seen_at, event,
                                      detail=detail, initial=first))
            else:
                changes.extend(_compare(before, event, doc.incarnation, seen_at))
        for event_id, before in self._events.items():
            if event_id not in current:
                kind = ChangeKind.COMPLETED if before.is_started else ChangeKind.CANCELLED
                changes.append(Change(kind, doc.incarnation, seen_at, before, before))
        self._incarnation = doc.incarnation
        self._content = content
        self._events = current
        return changes


def _index(events: Iterable[Event]) -> tuple[dict[str, Event], list[str]]:
    current: dict[str, Event] = {}
    duplicates: list[str] = []
    for event in events:
        if event.event_id in current:
            if event.event_id not in duplicates:
                duplicates.append(event.event_id)
            continue
        current[event.event_id] = event
    return current, duplicates


def _compare(before: Event, after: Event, incarnation: int, seen_at: datetime) -> list[Change]:
    changes: list[Change] = []
    if before.is_scheduled and after.is_started:
        changes.append(Change(ChangeKind.STARTED, incarnation, seen_at, after, before))
    elif before.not_before != after.not_before and not (before.is_started or after.is_started):
        changes.append(Change(
            ChangeKind.RESCHEDULED, incarnation, seen_at, after, before,
            detail=f"NotBefore {format_not_before(before.not_before) or 'none'} -> "
                   f"{format_not_before(after.not_before) or 'none'}",
        ))
    moved = [
        name for name in _COMPARED
        if getattr(before, name) != getattr(after, name)
        and not (name == "status" and changes and changes[0].kind is ChangeKind.STARTED)
    ]
    if before.not_before != after.not_before and (before.is_started or after.is_started) \
            and not (changes and changes[0].kind is ChangeKind.STARTED):
        moved.append("not_before")
    if moved:
        changes.append(Change(ChangeKind.CHANGED, incarnation, seen_at, after, before,
                              detail=", ".join(_describe(name, before, after) for name in moved)))
    return changes


_LABELS = {
    "event_type": "EventType",
    "status": "EventStatus",
    "resources": "Resources",
    "resource_type": "ResourceType",
    "description": "Description",
    "source": "EventSource",
    "duration": "DurationInSeconds",
    "not_before": "NotBefore",
}


def _describe(name: str, before: Event, after: Event) -> str:
    if name in ("description", "resources"):
        return f"{_LABELS[name]} changed"
    if name == "not_before":
        old, new = format_not_before(before.not_before), format_not_before(after.not_before)
        return f"NotBefore {old or 'none'} -> {new or 'none'}"
    return f"{_LABELS[name]} {getattr(before, name)} -> {getattr(after, name)}"


def summarize(changes: Iterable[Change]) -> str:
    """One line for a history list: what an incarnation did, in words."""
    parts: list[str] = []
    for change in changes:
        if change.event is None:
            parts.append(f"anomaly: {change.detail}")
            continue
        what = f"{change.kind.value} {change.event.event_type} {change.event.event_id[:8]}"
        parts.append(what)
    return "; ".join(parts) if parts else "no event changes"
