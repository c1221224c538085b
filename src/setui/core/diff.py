"""What differs between two stored documents: events added, removed, changed field by field.

The tracker tells an event's life as polls see it; this answers a reviewer's question
about two incarnations side by side, on the raw fields as the service sent them. ``setui
history show --diff`` and the dashboard's history screen both print this one answer,
each value as :func:`shown_value` writes it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from setui.core.model import Document, Event, parse_not_before
from setui.core.timefmt import iso, stamp

__all__ = ["ABSENT", "DocumentDiff", "EventDiff", "diff_documents", "field_time",
           "first_by_id", "machine_value", "shown_value"]


class _Absent:
    """A field the event did not carry: not the same as a field sent as null."""

    def __repr__(self) -> str:
        return "(absent)"


ABSENT: Any = _Absent()


@dataclass(frozen=True)
class EventDiff:
    """One event that differs; ``fields`` maps each differing raw field to (old, new),
    with :data:`ABSENT` where a side lacks it (empty unless ``change`` is "changed")."""

    change: Literal["added", "removed", "changed"]
    event: Event  # the newer version; the old one for a removed event
    old: Event | None
    fields: Mapping[str, tuple[Any, Any]]

    @property
    def event_id(self) -> str:
        return self.event.event_id


@dataclass(frozen=True)
class DocumentDiff:
    """``events``: added and changed in the newer document's order, then removed."""

    events: tuple[EventDiff, ...]
    unchanged: tuple[Event, ...]
    duplicates: int  # EventIds repeated in the newer document; the first of each counts

    def of(self, change: str) -> list[EventDiff]:
        return [e for e in self.events if e.change == change]


def first_by_id(events: Iterable[Event]) -> dict[str, Event]:
    """Each EventId's first event: the tracker follows the first of duplicates, so do we."""
    found: dict[str, Event] = {}
    for event in events:
        found.setdefault(event.event_id, event)
    return found


def diff_documents(current: Document, previous: Document | None) -> DocumentDiff:
    """The events of ``current`` against ``previous`` (None: every event is added)."""
    before = first_by_id(previous.events) if previous else {}
    after = first_by_id(current.events)
    found: list[EventDiff] = []
    unchanged: list[Event] = []
    for event_id, event in after.items():
        old = before.get(event_id)
        if old is None:
            found.append(EventDiff("added", event, None, {}))
            continue
        fields = _fields(old.raw, event.raw)
        if fields:
            found.append(EventDiff("changed", event, old, fields))
        else:
            unchanged.append(event)
    found.extend(EventDiff("removed", old, old, {})
                 for event_id, old in before.items() if event_id not in after)
    return DocumentDiff(tuple(found), tuple(unchanged), len(current.events) - len(after))


# The raw fields the service writes as times.
_TIME_FIELDS = frozenset({"NotBefore"})


def field_time(name: str, value: Any) -> datetime | None:
    """A raw field that holds a time (NotBefore), read as the parser reads it; None for
    any other field, an empty one (started) or one that cannot be read (shown as sent)."""
    if name not in _TIME_FIELDS or not isinstance(value, str) or not value:
        return None
    try:
        return parse_not_before(value)
    except ValueError:
        return None


def shown_value(name: str, value: Any) -> str:
    """A raw field's value for people: a time the one way (core.timefmt), anything else as
    JSON, ``(absent)`` where the event lacks the field."""
    if value is ABSENT:
        return "(absent)"
    moment = field_time(name, value)
    return stamp(moment, local=False) if moment is not None else json.dumps(
        value, ensure_ascii=False)


def machine_value(name: str, value: Any) -> Any:
    """A raw field's value for ``--json``: a time as ISO 8601 UTC, null where absent."""
    if value is ABSENT:
        return None
    moment = field_time(name, value)
    return iso(moment) if moment is not None else value


def _fields(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    names = list(old) + [name for name in new if name not in old]
    changed = {name: (old.get(name, ABSENT), new.get(name, ABSENT)) for name in names}
    return {name: pair for name, pair in changed.items() if pair[0] != pair[1]}
