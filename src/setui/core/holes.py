"""Where the holes (times when nothing was recording) go in a list of sightings, newest
first: each hole just before the newest sighting older than it. ``setui history`` (text and
``--json``) and the history screen list them in this one order.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Protocol, TypeVar

__all__ = ["Hole", "with_holes"]

Hole = tuple[datetime, datetime]  # (from, until), UTC


class _Seen(Protocol):
    @property
    def first_seen(self) -> datetime: ...


_R = TypeVar("_R", bound=_Seen)


def with_holes(records: Sequence[_R], holes: Sequence[Hole]) -> Iterator[_R | Hole]:
    """``records`` (newest first) with ``holes`` (oldest first, as the store gives them)
    placed among them; a hole older than every record is left out (the caller asked for
    holes from the oldest record on)."""
    pending = list(holes)
    for record in records:
        while pending and pending[-1][0] >= record.first_seen:
            yield pending.pop()
        yield record
