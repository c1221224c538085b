"""The events document as a pure function of scenario time and the approvals received.

Nothing here looks at a clock: the server turns wall time into scenario seconds and
asks. Because the state at second ``t`` depends only on the scenario and on approvals,
a test with a manual clock sees the same documents every run, and the incarnation is
the number of distinct states the Events array has gone through up to ``t`` (plus one),
whatever the polling pattern was.
"""

from __future__ import annotations

import math
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from setui.emulator.scenario import EventSpec, Scenario, natural_start

__all__ = ["EventState", "Instance", "Lifecycle", "ScenarioPlayer"]

_LOOP_NAMESPACE = uuid.UUID("0b6d7c1a-2f5e-4e47-8a43-3c1f9d6e2b70")


@dataclass(frozen=True)
class Instance:
    """One play of an event spec: loop ``loop`` of a repeating scenario, shifted in time."""

    event_id: str
    spec: EventSpec
    index: int
    loop: int
    offset: float


@dataclass(frozen=True)
class Lifecycle:
    appear: float
    start: float | None  # None: cancelled while Scheduled
    end: float  # gone from the document (completed or cancelled)
    not_befores: tuple[tuple[float, float], ...]  # (from this time, NotBefore) pairs


@dataclass(frozen=True)
class EventState:
    """An event as the document shows it at one moment."""

    instance: Instance
    started: bool
    not_before: float | None  # scenario seconds; None once Started

    @property
    def event_id(self) -> str:
        return self.instance.event_id

    @property
    def spec(self) -> EventSpec:
        return self.instance.spec


class ScenarioPlayer:
    """Plays a scenario. ``display`` maps a scenario-time NotBefore to what the document
    shows (a whole POSIX second); changes below that resolution are not changes."""

    def __init__(self, scenario: Scenario, display: Callable[[float], int]) -> None:
        self.scenario = scenario
        self._display = display
        self._approvals: dict[str, float] = {}  # lower-case EventId -> scenario time
        self._approved_loops: set[int] = set()  # loops with an instance approved by a client
        self._lock = threading.RLock()
        self._length = scenario.loop_length()
        # How long one loop's events can last: without client approvals (every loop), and
        # at most (the few loops a client approved something in).
        self._span = scenario.natural_end()
        self._approved_span = max((scenario.latest_end(spec) for spec in scenario.events),
                                  default=0.0)
        if scenario.repeat and not self._length >= max(1.0, self._span):
            # parse_scenario refuses this with the file named; a Scenario built in code
            # would otherwise make every document cost more copies of every event.
            raise ValueError(f"a repeating scenario's length must be at least 1 s and at "
                             f"least {self._span:g} s (one play of its events), got "
                             f"{self._length:g}")
        # Incarnation cache: state key and incarnation at scenario second _cursor.
        self._cursor: float | None = None
        self._cursor_inc = 1
        self._cursor_key: tuple[tuple[str, bool, int | None], ...] = ()

    # -- instances and their lives -------------------------------------------------------
    def _instances(self, t0: float, t1: float) -> Iterator[Instance]:
        """Every instance whose life may touch [t0, t1].

        A loop is at least as long as its events last unapproved (the scenario parser
        checks), so only a loop or two look back; an approval can keep an event beyond
        that, so the loops clients approved something in are looked at too."""
        if self.scenario.repeat:
            first = max(0, math.floor((t0 - self._span) / self._length))
            last = max(0, math.floor(t1 / self._length))
            reach = math.floor((t0 - self._approved_span) / self._length)
            loops = [*sorted(n for n in self._approved_loops if reach <= n < first),
                     *range(first, last + 1)]
        else:
            loops = [0]
        for loop in loops:
            offset = loop * self._length if self.scenario.repeat else 0.0
            for index, spec in enumerate(self.scenario.events):
                event_id = spec.id if loop == 0 else str(
                    uuid.uuid5(_LOOP_NAMESPACE, f"{spec.id}/{loop}")).upper()
                yield Instance(event_id, spec, index, loop, offset)

    def lifecycle(self, inst: Instance) -> Lifecycle:
        spec, off = inst.spec, inst.offset
        appear = spec.at + off
        if spec.status == "Started":
            start: float | None = appear
            not_befores: tuple[tuple[float, float], ...] = ()
        else:
            not_befores = ((appear, appear + spec.notice),
                           *((r.at + off, r.at + r.notice + off) for r in spec.reschedule))
            start = natural_start(spec) + off
            approvals = [when for when in (
                None if spec.approve_at is None else spec.approve_at + off,
                self._approvals.get(inst.event_id.lower()),
            ) if when is not None and appear <= when < start
                and (spec.cancel_at is None or when < spec.cancel_at + off)]
            if approvals:
                start = min(start, min(approvals) + self.scenario.approval_delay)
            if spec.cancel_at is not None and spec.cancel_at + off <= start:
                return Lifecycle(appear, None, spec.cancel_at + off, not_befores)
        assert start is not None
        end = start + self.scenario.impact(spec) + self.scenario.tail_of(spec)
        return Lifecycle(appear, start, end, not_befores)

    # -- the document at one moment -----------------------------------------------------
    def state(self, t: float) -> list[EventState]:
        """The events in the document at scenario second ``t``, in order of appearance."""
        t = max(t, 0.0)
        shown: list[tuple[float, int, int, EventState]] = []
        with self._lock:
            for inst in self._instances(t, t):
                life = self.lifecycle(inst)
                if not life.appear <= t < life.end:
                    continue
                if life.start is not None and t >= life.start:
                    event = EventState(inst, True, None)
                else:
                    not_before = [nb for since, nb in life.not_befores if since <= t][-1]
                    event = EventState(inst, False, not_before)
                shown.append((life.appear, inst.loop, inst.index, event))
        return [item[-1] for item in sorted(shown, key=lambda item: item[:3])]

    def _key(self, t: float) -> tuple[tuple[str, bool, int | None], ...]:
        return tuple(
            (e.event_id, e.started, None if e.not_before is None else self._display(e.not_before))
            for e in self.state(t))

    def change_points(self, t0: float, t1: float) -> list[float]:
        """Scenario seconds in (t0, t1] at which the document may change."""
        points: set[float] = set()
        with self._lock:
            for inst in self._instances(t0, t1):
                life = self.lifecycle(inst)
                candidates = [life.appear, life.end, *(since for since, _ in life.not_befores)]
                if life.start is not None:
                    candidates.append(life.start)
                points.update(p for p in candidates if t0 < p <= t1)
        return sorted(points)

    def incarnation(self, t: float) -> int:
        """1 for the first document, plus one for every change of the Events array."""
        t = max(t, 0.0)
        with self._lock:
            if self._cursor is None or t < self._cursor:
                self._cursor, self._cursor_inc, self._cursor_key = 0.0, 1, self._key(0.0)
            for point in self.change_points(self._cursor, t):
                key = self._key(point)
                if key != self._cursor_key:
                    self._cursor_inc += 1
                    self._cursor_key = key
            self._cursor = t
            return self._cursor_inc

    # -- approvals --------------------------------------------------------------------
    def find(self, event_id: str, t: float) -> EventState | None:
        """The event with this id (any case) in the document at ``t``."""
        wanted = event_id.lower()
        return next((e for e in self.state(t) if e.event_id.lower() == wanted), None)

    def approve(self, event_ids: list[str], t: float) -> list[str]:
        """Approve all, or none: returns the ids that are not in the document at ``t``."""
        # Before scenario second 0 the document is second 0's (state() says so): an
        # approval then is one at second 0, or it would take effect before the start.
        t = max(t, 0.0)
        with self._lock:
            unknown = [i for i in event_ids if self.find(i, t) is None]
            if unknown:
                return unknown
            for event_id in event_ids:
                self._approvals.setdefault(event_id.lower(), t)
                found = self.find(event_id, t)
                assert found is not None
                self._approved_loops.add(found.instance.loop)
            # An approval changes the future only, unless it takes effect at once.
            if self._cursor is not None and t + self.scenario.approval_delay <= self._cursor:
                self._cursor = None
            return []

    def played_out(self, t: float) -> bool:
        """True once a non-repeating scenario has nothing left to happen after ``t``."""
        if self.scenario.repeat:
            return False
        with self._lock:
            return not self.state(t) and not self.change_points(t, math.inf)
