"""The monitor over real loopback HTTP: recording off the event loop, sessions, resuming."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from setui.commands.watch import opening_changes
from setui.core.client import ImdsClient
from setui.core.tracker import ChangeKind
from setui.emulator.clock import ManualClock
from setui.emulator.scenario import load_scenario
from setui.emulator.server import Emulator
from setui.monitor import Monitor, MonitorUpdate
from setui.store import Store
from setui.store.history import History
from tests.support.waiting import PATIENCE

FREEZE = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"


class BlockingHistory(History):
    """A history whose writes wait for the test, as a database locked by another writer."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.release = threading.Event()
        self.entered = threading.Event()
        self.completed = 0

    def record(self, *args: Any, **kwargs: Any) -> bool:
        self.entered.set()
        self.release.wait(PATIENCE)
        self.completed += 1
        return super().record(*args, **kwargs)


class BlockingStore(Store):
    """A store whose history's writes wait for the test (BlockingHistory)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.history = self.blocking = BlockingHistory(self.database)


async def take(updates: Any, count: int) -> list[MonitorUpdate]:
    return [await asyncio.wait_for(updates.__anext__(), PATIENCE) for _ in range(count)]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_800_000_000.0)


@pytest.fixture
def emulator(clock: ManualClock) -> Iterator[Emulator]:
    """The live-migration scenario 70 s in (its Freeze announced), on a clock the test moves."""
    with Emulator(load_scenario("live-migration"), clock=clock, speed=1.0) as emulator:
        clock.set(emulator.epoch + 70)
        yield emulator


@contextlib.asynccontextmanager
async def monitoring(emulator: Emulator, store: Store, **options: Any) -> AsyncIterator[
        tuple[Monitor, AsyncGenerator[MonitorUpdate, None]]]:
    """A monitor polling ``emulator`` every 0.2 s into ``store`` through a client of its
    own, and its updates (not started yet); both closed after."""
    async with ImdsClient(emulator.url, rate=50, burst=20) as client:
        monitor = Monitor(client, endpoint=emulator.url, interval=0.2, store=store, **options)
        updates = monitor.updates()
        try:
            yield monitor, updates
        finally:
            await updates.aclose()


async def test_a_store_that_blocks_does_not_stop_polling(
        tmp_path: Path, emulator: Emulator) -> None:
    store = BlockingStore(tmp_path / "setui.db")
    async with monitoring(emulator, store, vm_name="WestNO_0") as (monitor, updates):
        try:
            # Were the write on this loop, it would hang here: the store never answers.
            first = await take(updates, 4)
            # Polling went on while the first write still waited: no write had finished
            # (on the loop, each answer would have waited for its write to end first).
            assert store.blocking.entered.is_set() and store.blocking.completed == 0
            assert all(u.result.fresh for u in first)
            assert monitor.state.lives[FREEZE].fate is None  # the state moved on regardless
        finally:
            store.blocking.release.set()
    assert [r.incarnation for r in store.history.incarnations()] == [2]
    store.close()


async def test_a_session_is_recorded_and_closed_and_the_next_one_resumes_the_story(
        tmp_path: Path, emulator: Emulator, clock: ManualClock) -> None:
    store = Store(tmp_path / "setui.db")
    async with monitoring(emulator, store, command="setui watch") as (_monitor, updates):
        [update] = await take(updates, 1)
        assert [c.kind for c in update.result.changes] == [ChangeKind.APPEARED]
    [session] = store.sessions.spans(endpoint=emulator.url)
    assert session.command == "setui watch" and session.stopped is not None

    clock.set(emulator.epoch + 3600)  # the Freeze ran and left while nothing watched
    async with monitoring(emulator, store) as (_monitor, updates):
        [update] = await take(updates, 1)
    [gone] = [c for c in update.result.changes if c.event_id == FREEZE]
    assert gone.kind is ChangeKind.GONE and not gone.certain
    assert "setui was not watching" in gone.detail
    assert len(store.sessions.spans(endpoint=emulator.url)) == 2
    newest = store.history.incarnations(limit=1)[0]
    assert [(c.kind, c.certain) for c in newest.changes if c.event_id == FREEZE] == [
        ("gone", False)]
    store.close()


async def test_a_session_whose_heartbeat_runs_says_it_measures_from_its_first_row(
        tmp_path: Path, emulator: Emulator) -> None:
    """The agent's heartbeat starts before its first poll; a report read right after the
    session opened must not find it "not measured" (the flag came one write later)."""
    store = Store(tmp_path / "setui.db")
    try:
        async with monitoring(emulator, store, command="setui agent") as (monitor, updates):
            assert monitor.recorder is not None
            monitor.recorder.measures = True  # as agent.impact.ImpactWatch.start does
            await take(updates, 1)
            [session] = store.sessions.spans(endpoint=emulator.url)
            assert session.measures
    finally:
        store.close()


async def _until(updates: Any, done: Any, what: str) -> None:
    """Updates taken until ``done()`` holds (each poll answers in a moment)."""
    for _ in range(500):
        if done():
            return
        await take(updates, 1)
    pytest.fail(f"no update brought {what}")


async def test_a_restarted_monitor_continues_each_present_events_life_from_the_record(
        tmp_path: Path, emulator: Emulator, clock: ManualClock) -> None:
    """Seen to appear and to start by one monitor; the next one on the same store keeps
    when, and how surely, instead of "in the first document" and "started at least"."""
    store = Store(tmp_path / "setui.db")
    clock.set(emulator.epoch + 30)  # before the Freeze appears
    async with monitoring(emulator, store) as (monitor, updates):
        await take(updates, 1)
        clock.set(emulator.epoch + 70)
        await _until(updates, lambda: FREEZE in monitor.state.lives, "the Freeze")
        clock.set(emulator.epoch + 970)
        await _until(updates, lambda: monitor.state.lives[FREEZE].started_at is not None,
                     "its start")
        before = monitor.state.lives[FREEZE]
    assert not before.initial and before.started_exact

    clock.set(emulator.epoch + 980)
    async with monitoring(emulator, store) as (monitor, updates):
        [update] = await take(updates, 1)
        after = monitor.state.lives[FREEZE]
        told = opening_changes(update.result.changes, monitor.state.lives)
    assert (after.first_seen, after.first_incarnation, after.initial, after.announced) == (
        before.first_seen, before.first_incarnation, False, before.announced)
    assert (after.started_at, after.started_incarnation, after.started_exact) == (
        before.started_at, before.started_incarnation, True)
    # setui watch's first lines: the life from the record, not "appeared at start".
    assert [(c.kind, c.seen_at, c.initial, c.certain) for c in told] == [
        (ChangeKind.APPEARED, before.first_seen, False, True),
        (ChangeKind.STARTED, before.started_at, False, True)]
    assert told[0].event is not None and told[0].event.not_before == before.announced
    store.close()


async def test_an_event_that_started_while_nothing_watched_started_before_it_was_seen_again(
        tmp_path: Path, emulator: Emulator, clock: ManualClock) -> None:
    store = Store(tmp_path / "setui.db")
    clock.set(emulator.epoch + 30)
    async with monitoring(emulator, store) as (monitor, updates):
        await take(updates, 1)
        clock.set(emulator.epoch + 70)
        await _until(updates, lambda: FREEZE in monitor.state.lives, "the Freeze")
        before = monitor.state.lives[FREEZE]

    clock.set(emulator.epoch + 970)  # it started while nothing watched
    async with monitoring(emulator, store) as (monitor, updates):
        [update] = await take(updates, 1)
        after = monitor.state.lives[FREEZE]
    assert (after.first_seen, after.initial) == (before.first_seen, False)
    assert after.started_at == update.result.seen_at and not after.started_exact
    assert "started while nothing was watching" in after.notes[-1][1]
    store.close()
