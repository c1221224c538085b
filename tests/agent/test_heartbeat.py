"""The agent's heartbeat: what a gap between two ticks is, by each clock (agent.heartbeat)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from setui.agent.heartbeat import INTERVAL, Heartbeat, Reading, Stall, stall_between


def reading(mono: float, wall: float | None = None, boottime: float | None = None) -> Reading:
    return Reading(mono, mono + 1_000 if wall is None else wall,
                   mono + 5 if boottime is None else boottime)


def test_a_tick_on_time_or_a_little_late_is_no_stall() -> None:
    assert stall_between(reading(10), reading(10 + INTERVAL)) is None
    assert stall_between(reading(10), reading(10 + INTERVAL + 0.4)) is None


def test_a_gap_of_every_clock_is_a_stall_of_its_length_less_the_tick() -> None:
    stall = stall_between(reading(10), reading(14.9))
    assert stall is not None
    assert round(stall.seconds, 3) == round(stall.wall_seconds, 3) == 4.8
    assert stall.boottime_seconds is not None and round(stall.boottime_seconds, 3) == 4.8


def test_a_pause_the_monotonic_clock_did_not_count_shows_in_the_wall_clock() -> None:
    # The guest's clock stopped with it; the host put the wall clock right afterwards.
    stall = stall_between(reading(10, wall=100), reading(10 + INTERVAL, wall=105))
    assert stall is not None
    assert stall.seconds == 0 and round(stall.wall_seconds, 3) == 4.9


def test_a_suspend_shows_in_boottime_alone() -> None:
    stall = stall_between(reading(10, boottime=20), reading(10 + INTERVAL, boottime=80))
    assert stall is not None and stall.seconds == 0
    assert stall.boottime_seconds is not None and round(stall.boottime_seconds, 3) == 59.9


def test_without_boottime_the_other_two_decide() -> None:
    quiet = stall_between(Reading(10, 100, None), Reading(10 + INTERVAL, 100 + INTERVAL, None))
    assert quiet is None
    stall = stall_between(Reading(10, 100, None), Reading(13, 103, None))
    assert stall is not None and stall.boottime_seconds is None


def test_the_thread_hands_over_each_stall_it_reads() -> None:
    ticks: Iterator[Reading] = iter([reading(0), reading(0.1), reading(3.2), reading(3.3)])
    last = reading(3.3)
    seen: list[Stall] = []
    got = threading.Event()

    def read() -> Reading:
        return next(ticks, last)

    def on_stall(stall: Stall) -> None:
        seen.append(stall)
        got.set()

    beat = Heartbeat(on_stall, interval=0.01, read=read)
    beat.start()
    try:
        assert got.wait(30), "the heartbeat never handed over the stall"
    finally:
        beat.stop()
    assert len(seen) == 1 and round(seen[0].seconds, 3) == 3.09
    assert seen[0].before.mono == 0.1 and seen[0].after.mono == 3.2


def test_stop_ends_the_thread() -> None:
    beat = Heartbeat(lambda stall: None)
    beat.start()
    thread = beat._thread
    assert thread is not None and thread.is_alive()
    beat.stop()
    assert not thread.is_alive()
