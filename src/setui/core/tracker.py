"""Turn successive documents into the story of each event, saying what cannot be known.

The tracker is pure: no I/O and no clock of its own (the caller says when a document
was seen, and whether anything may have been missed since the one before), so the same
sequence of documents always tells the same story, in tests, in ``setui watch``, in the
store and in the dashboard alike.

An event that leaves the document is ``cancelled`` only when consecutive documents prove
it: Scheduled, then absent, with nothing missed between them and its NotBefore not yet
passed. Seen through a gap (failed polls, a skipped incarnation number, a restart, a
store that was not recording) it is ``gone``, never "cancelled": it may have run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import Enum

from setui.core.model import Document, Event
from setui.core.timefmt import duration, stamp

__all__ = ["Change", "ChangeKind", "Tracker", "early_start", "summarize"]


class ChangeKind(str, Enum):
    APPEARED = "appeared"
    STARTED = "started"
    COMPLETED = "completed"
    CANCELLED = "cancelled"  # proven: Scheduled, then absent, nothing missed, NotBefore ahead
    GONE = "gone"  # absent after a gap or after its NotBefore: whether it ran is not known
    RESCHEDULED = "rescheduled"
    CHANGED = "changed"
    ANOMALY = "anomaly"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Change:
    """One thing that happened between two documents.

    ``event`` is the event as it is now (for completed/cancelled/gone: as it was last
    seen); ``previous`` is how it was before, where there was a before. Anomalies may
    carry no event at all. ``certain`` is False when the change was seen across a gap,
    so when exactly (or whether) it happened is not known; ``missed`` counts the
    incarnations skipped between this document and the one before (0: none, or none
    that the numbers show).
    """

    kind: ChangeKind
    incarnation: int
    seen_at: datetime
    event: Event | None
    previous: Event | None = None
    detail: str = ""
    initial: bool = False
    certain: bool = True
    missed: int = 0

    @property
    def event_id(self) -> str | None:
        return self.event.event_id if self.event else None


# The fields compared to tell "changed" apart from nothing at all.
_COMPARED = ("event_type", "status", "resources", "resource_type", "description", "source",
             "duration")


class Tracker:
    """Feed it documents in the order they were seen; it returns what changed.

    ``baseline`` is a document seen before this tracker's life (the newest one in the
    store, at start-up): the first document is then compared with it across a gap, so
    what left while nothing was watching is reported as gone, not forgotten.
    """

    def __init__(self, baseline: Document | None = None) -> None:
        self._incarnation: int | None = None
        self._content: str | None = None
        self._events: dict[str, Event] = {}
        self._baseline = _index(baseline.events)[0] if baseline is not None else {}

    @property
    def incarnation(self) -> int | None:
        return self._incarnation

    @property
    def events(self) -> dict[str, Event]:
        """The events of the last document, by EventId."""
        return dict(self._events)

    def update(self, doc: Document, seen_at: datetime, *, gap: str | None = None,
               approved: frozenset[str] = frozenset()) -> list[Change]:
        """The changes ``doc`` brings. ``gap``: why something may have been missed since
        the document before (None: the caller saw every poll answered in time).
        ``approved``: EventIds known to have been approved, which makes "it probably
        ran" the likely story of one that vanished unseen."""
        content = doc.canonical_json()
        first = self._incarnation is None
        changes: list[Change] = []
        missed = 0
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
            missed = max(0, doc.incarnation - self._incarnation - 1)
        gaps = [gap] if gap else []
        if missed:
            gaps.append(f"incarnation{'s' if missed > 1 else ''} "
                        f"{_span(doc.incarnation - missed, doc.incarnation - 1)} never seen")
        why = "; ".join(gaps)
        current, duplicates = _index(doc.events)
        for event_id in duplicates:
            changes.append(Change(
                ChangeKind.ANOMALY, doc.incarnation, seen_at, current[event_id],
                detail=f"EventId {event_id} appears more than once; the first is tracked",
            ))
        before_events = self._events if not first else self._baseline
        for event_id, event in current.items():
            before = self._events.get(event_id)
            if before is None:
                detail = "appeared already started" if event.is_started else ""
                # Across a gap it may have appeared any time in it: when is not known.
                changes.append(Change(ChangeKind.APPEARED, doc.incarnation, seen_at, event,
                                      detail=detail, initial=first, certain=not why,
                                      missed=missed))
            else:
                changes.extend(_compare(before, event, doc.incarnation, seen_at, why, missed))
        if first and self._baseline:
            why = gap or "setui was not watching between the recorded document and this one"
        for event_id, before in before_events.items():
            if event_id not in current:
                changes.append(_departure(before, doc.incarnation, seen_at, why, missed,
                                          event_id in approved))
        self._incarnation = doc.incarnation
        self._content = content
        self._events = current
        self._baseline = {}
        return changes


def _span(low: int, high: int) -> str:
    return str(low) if low == high else f"{low}-{high}"


def _departure(before: Event, incarnation: int, seen_at: datetime, gap: str, missed: int,
               approved: bool) -> Change:
    """How an event that left the document is told: only what consecutive documents prove."""
    if before.is_started:
        # Seen Started, now absent: it ran. Only when it ended is unsure across a gap.
        detail = f"it ended sometime in a gap ({gap})" if gap else ""
        return Change(ChangeKind.COMPLETED, incarnation, seen_at, before, before,
                      detail=detail, certain=not gap, missed=missed)
    passed = before.not_before is not None and before.not_before <= seen_at
    if not gap and not passed:
        return Change(ChangeKind.CANCELLED, incarnation, seen_at, before, before,
                      missed=missed)
    if approved:
        likely = "it was approved: it probably ran"
    elif passed:
        likely = "its NotBefore had passed: it probably ran"
    else:
        likely = "it may have run or been cancelled"
    why = f"last seen Scheduled; {gap}" if gap else "last seen Scheduled"
    return Change(ChangeKind.GONE, incarnation, seen_at, before, before,
                  detail=f"{why}; {likely}", certain=False, missed=missed)


def early_start(before: Event, started_at: datetime) -> float | None:
    """Seconds an event started ahead of the NotBefore it had while Scheduled (None when
    it had none or did not start early): the sign that someone approved it."""
    if before.not_before is None:
        return None
    ahead = (before.not_before - started_at).total_seconds()
    return ahead if ahead >= 1 else None


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


def _compare(before: Event, after: Event, incarnation: int, seen_at: datetime, gap: str,
             missed: int) -> list[Change]:
    changes: list[Change] = []
    if before.is_scheduled and after.is_started:
        notes = []
        if gap:
            notes.append(f"started sometime in a gap ({gap})")
        ahead = early_start(before, seen_at)
        if ahead is not None:
            notes.append(f"started {'at least ' if gap else ''}{duration(ahead)} before its "
                         f"NotBefore {_time(before.not_before)}")
        changes.append(Change(ChangeKind.STARTED, incarnation, seen_at, after, before,
                              detail="; ".join(notes), certain=not gap, missed=missed))
    elif before.not_before != after.not_before and not (before.is_started or after.is_started):
        changes.append(Change(
            ChangeKind.RESCHEDULED, incarnation, seen_at, after, before,
            detail=f"NotBefore {_time(before.not_before)} -> {_time(after.not_before)}",
            missed=missed,
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
                              detail=", ".join(_describe(name, before, after) for name in moved),
                              missed=missed))
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
        return f"NotBefore {_time(before.not_before)} -> {_time(after.not_before)}"
    return f"{_LABELS[name]} {getattr(before, name)} -> {getattr(after, name)}"


def _time(moment: datetime | None) -> str:
    """A NotBefore in a change's words: the one way times are written (UTC alone, as the
    words are stored and read anywhere), or "none" once started."""
    return stamp(moment, local=False) if moment is not None else "none"


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
