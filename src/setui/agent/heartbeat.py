"""The agent's heartbeat: a thread that ticks every 100 ms and notes each stall.

A tick reads three clocks: CLOCK_MONOTONIC (what ``time.monotonic`` counts), CLOCK_BOOTTIME
(the same, plus any time the kernel itself was suspended) and the wall clock. Between two
ticks each should move by one tick; when one moves more than :data:`THRESHOLD` beyond
that, the VM (or this process) was stopped that long, and the gap is handed on, with what
each clock counted. What they tell:

- a stall of the monotonic clock: this VM's kernel saw the time pass without running the
  agent. A hypervisor's pause for live migration is one; so is a process stopped, or
  starved of CPU, from inside the VM (which this cannot tell from a pause);
- the wall clock jumping further than the monotonic one: a pause the guest's clocks did
  not count (Hyper-V and KVM may stop the guest's clock with it), put right by the host's
  or NTP's correction of the wall clock; or a person or NTP setting the clock;
- CLOCK_BOOTTIME further than CLOCK_MONOTONIC: the kernel was suspended (not a pause a
  hypervisor makes: the guest does not know of those).

The thread only reads clocks and compares; what a stall is tied to, and keeping it, is
the agent's (agent.impact), handed over with ``on_stall`` (called on this thread).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["INTERVAL", "THRESHOLD", "Heartbeat", "Reading", "Stall", "Tick", "stall_between"]

INTERVAL = 0.1  # seconds between ticks
THRESHOLD = 0.5  # a clock that moved this much more than a tick between two: a stall


def _boottime_reader() -> Callable[[], float | None]:
    clock = getattr(time, "CLOCK_BOOTTIME", None)  # Linux only
    if clock is None:
        return lambda: None
    return functools.partial(time.clock_gettime, clock)


class Reading(NamedTuple):
    """The three clocks at one tick (boottime None where the system has none), and what
    the owner said was current then (``context``: a reference, taken as it is). A named
    tuple: one is made ten times a second, at a fifth of a frozen dataclass's cost."""

    mono: float
    wall: float
    boottime: float | None
    context: object = None


# What a tick reads, as a plain tuple (a Reading is one): mono, wall, boottime, context.
Tick = tuple[float, float, float | None, object]


@dataclass(frozen=True)
class Stall:
    """A gap between two ticks, less the tick: how long each clock says it lasted."""

    before: Reading  # the last tick before it
    after: Reading  # the first tick after it
    seconds: float  # the monotonic clock's
    wall_seconds: float
    boottime_seconds: float | None


def stall_between(before: Reading, after: Reading, *, interval: float = INTERVAL,
                  threshold: float = THRESHOLD) -> Stall | None:
    """The stall between two ticks, if any clock moved ``threshold`` more than a tick."""
    mono = after.mono - before.mono - interval
    wall = after.wall - before.wall - interval
    boottime = (after.boottime - before.boottime - interval
                if after.boottime is not None and before.boottime is not None else None)
    if max(mono, wall, boottime if boottime is not None else mono) < threshold:
        return None
    return Stall(before, after, max(mono, 0.0), wall, boottime)


class Heartbeat:
    """``start()`` the thread; ``on_stall`` hears of each stall; ``stop()`` ends it."""

    def __init__(self, on_stall: Callable[[Stall], None], *, interval: float = INTERVAL,
                 threshold: float = THRESHOLD, read: Callable[[], Tick] | None = None,
                 context: Callable[[], object] | None = None) -> None:
        self.on_stall = on_stall
        self.interval = interval
        self.threshold = threshold
        # Read at each tick (one attribute: no lock, no copy), so a stall knows what was
        # current at its last tick before, whatever the owner's loop did since.
        self._context = context or (lambda: None)
        self._read = read or self._clocks()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self.native_id: int | None = None  # the thread's id for the kernel (bench/)

    def _clocks(self) -> Callable[[], Tick]:
        """What a tick reads: a plain tuple of the clocks and the context, made by calls
        bound once (a Reading is made of it only for a stall)."""
        mono, wall, boottime, context = time.monotonic, time.time, _boottime_reader(), \
            self._context
        return lambda: (mono(), wall(), boottime(), context())

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="setui-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Ends the thread within a tick."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _run(self) -> None:
        self.native_id = threading.get_native_id()
        read, interval, threshold = self._read, self.interval, self.threshold
        stopped, sleep = self._stopped.is_set, time.sleep
        late = interval + threshold
        last = read()
        # A tick is a sleep (one clock_nanosleep: a wake costs the kernel half what an
        # Event's timed wait does), three clock reads and a compare, in plain tuples: the
        # wake is most of its cost (bench/heartbeat.py). A wake a little late (the GIL,
        # the scheduler) is far under the threshold.
        while not stopped():
            sleep(interval)
            now = read()
            if now[0] - last[0] >= late or now[1] - last[1] >= late or (
                    now[2] is not None and last[2] is not None and now[2] - last[2] >= late):
                stall = stall_between(Reading(*last), Reading(*now), interval=interval,
                                      threshold=threshold)
                if stall is not None:
                    self.on_stall(stall)
            last = now
