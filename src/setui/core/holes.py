"""The holes in a record: when nothing recorded an endpoint, so what changed then was not
seen; and where they go in a list of sightings, newest first.

A hole is a property of the whole record, computed from all of it in one place
(:func:`find_holes`), so ``setui history`` (whatever ``--limit`` lists), its screen, the
replay and the report tell the same holes. What covers a moment:

- a recording session (``setui watch``, the dashboard, the agent), from its first answer
  to its stop; one still running, to now; one that died, to its last beat;
- a stored incarnation, from its first sighting to its last: the service changes the
  incarnation whenever the events change, so a document seen twice was there all along.
  A one-shot reading (``setui events``, ``setui approve``) leaves such a sighting: a
  session of one moment.

Before the first session nothing is said either way (a store older than sessions cannot
tell), and a pause under :data:`MIN_HOLE` is no hole: the poller's own rhythm, a restart.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol, TypeVar

__all__ = ["MIN_HOLE", "Hole", "find_holes", "with_holes"]

MIN_HOLE = timedelta(seconds=1)

Span = tuple[datetime, datetime]  # (from, until), UTC


@dataclass(frozen=True)
class Hole:
    """Nothing recorded ``endpoint`` from ``start`` to ``end``; an ``open`` hole has not
    ended: nothing records it now, and ``end`` is the moment it was asked about."""

    start: datetime
    end: datetime
    open: bool = False
    endpoint: str = ""

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()

    def overlaps(self, start: datetime | None, end: datetime | None) -> bool:
        """Whether any of it lies between ``start`` and ``end`` (None: no bound)."""
        return (end is None or self.start < end) and (start is None or self.end > start)

    def holds(self, moment: datetime) -> bool:
        """Whether nothing recorded at ``moment``: its ends were recorded moments."""
        return self.start < moment < self.end


def find_holes(sessions: Iterable[Span], sightings: Iterable[Span], *, now: datetime,
               endpoint: str = "") -> list[Hole]:
    """The holes of one endpoint's record, oldest first, each whole.

    ``sessions`` and ``sightings`` are what covers the record (see the module); ``now``
    is where an open hole ends, when nothing covers the time up to it."""
    recorded = list(sessions)
    if not recorded:
        return []
    begin = min(start for start, _ in recorded)
    spans = sorted((max(start, begin), end) for start, end in (*recorded, *sightings)
                   if end >= begin)
    holes: list[Hole] = []
    covered = begin
    for start, end in spans:
        if start - covered >= MIN_HOLE:
            holes.append(Hole(covered, start, endpoint=endpoint))
        covered = max(covered, end)
    if now - covered >= MIN_HOLE:
        holes.append(Hole(covered, now, open=True, endpoint=endpoint))
    return holes


class _Seen(Protocol):
    @property
    def first_seen(self) -> datetime: ...


class _Starts(Protocol):
    @property
    def start(self) -> datetime: ...


_R = TypeVar("_R", bound=_Seen)
_M = TypeVar("_M", bound=_Starts)


def with_holes(records: Sequence[_R], holes: Sequence[_M], *,
               complete: bool) -> Iterator[_R | _M]:
    """``records`` (newest first) with ``holes`` (oldest first) among them, each just
    above the newest record older than it. ``complete``: the records reach back to the
    start of what was asked, so holes older than all of them are listed last; otherwise
    those lie beyond the list, as the records before it do. Anything with a ``start`` is
    placed the same way: a stall or a boot (core.impact) too."""
    pending = sorted(holes, key=lambda hole: hole.start)
    for record in records:
        while pending and pending[-1].start >= record.first_seen:
            yield pending.pop()
        yield record
    if complete:
        yield from reversed(pending)
