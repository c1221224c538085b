"""The dashboard attached to a restarted agent shows the event's life the store knows: a
real agent against the emulator (on a clock the test moves) sees a Freeze appear and
start, is stopped, a minute passes, and a new agent starts on the same store and socket.
The dashboard attached to it, driven through Pilot, counts the Freeze as started from
its recorded start (exactly, not "≥" since the restart) and its details give the life
from its first sighting before the restart, not "in the first document setui saw"."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from setui.core.timefmt import clock as clock_face
from setui.core.timefmt import stamp
from setui.emulator.clock import ManualClock
from setui.emulator.scenario import parse_scenario
from setui.emulator.server import Emulator
from setui.monitor.state import EventLife
from setui.ui.screens.details import DetailsScreen
from setui.ui.widgets.events import EventsTable
from tests.api.test_dashboard_attached import dashboard, pick
from tests.support.api_helpers import plain_env, start_agent, stop
from tests.support.children import wait_until
from tests.support.dashboard import wait_for
from tests.support.served import life, served, started_life
from tests.support.waiting import PATIENCE

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.name != "posix", reason="Unix sockets")]

FREEZE_ID = "6A1B2C3D-0000-4000-8000-00000000BEEF"
FREEZE = f"""
name = "dashboard-restart-freeze"
vm_name = "app-vm-1"
tail = 600

[[events]]
id = "{FREEZE_ID}"
type = "Freeze"
at = 10
notice = "3s"
duration = 600
"""


@pytest.fixture
def clock() -> ManualClock:
    """The emulator's time, moved by the test: the Freeze appears after the agent's first
    answer, starts after it was seen Scheduled, and a minute passes while no agent runs."""
    return ManualClock(time.time())


@pytest.fixture
def freeze(clock: ManualClock) -> Iterator[Emulator]:
    emu = Emulator(parse_scenario(FREEZE), speed=1.0, clock=clock)
    emu.start()
    yield emu
    emu.stop()


def _life(sock: Path) -> EventLife | None:
    return life(sock, FREEZE_ID)


def _started(sock: Path) -> EventLife:
    return started_life(sock, FREEZE_ID)


async def test_the_dashboard_on_a_restarted_agent_shows_the_life_from_the_record(
        tmp_path: Path, freeze: Emulator, clock: ManualClock) -> None:
    sock = tmp_path / "api.sock"
    env = plain_env(tmp_path, sock="api.sock")
    proc, _ = start_agent(freeze.url, tmp_path, env=env)
    try:
        wait_until(lambda: served(sock), PATIENCE, "the agent's first answer, served")
        clock.set(freeze.epoch + 10)
        wait_until(lambda: _life(sock) is not None, PATIENCE, "the agent to see it appear")
        clock.set(freeze.epoch + 14)
        before = _started(sock)
    finally:
        assert stop(proc) == 0
    assert not before.initial and before.started_exact, before
    assert before.started_at is not None
    started_at = before.started_at
    clock.set(freeze.epoch + 74)  # a minute while nothing watches: still Started

    proc, _ = start_agent(freeze.url, tmp_path, env=env)
    try:
        wait_until(lambda: _life(sock) is not None, PATIENCE, "the new agent to serve it")
        app = dashboard(sock)
        async with app.run_test(size=(120, 36)) as pilot:
            await pick(app, pilot, FREEZE_ID)
            table = app.main_screen.query_one(EventsTable)
            await wait_for(pilot, lambda: "started " in table.cell_text(FREEZE_ID,
                                                                        "countdown"))
            cell = table.cell_text(FREEZE_ID, "countdown")
            # Counted from the recorded start, so exact: not "at least" since the restart.
            assert "≥" not in cell, cell
            await wait_for(pilot, lambda: table.cell_text(FREEZE_ID, "countdown") == (
                f"▶ started {clock_face((app.now() - started_at).total_seconds())} ago"))
            assert (app.now() - started_at).total_seconds() >= 60

            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, DetailsScreen)
                           and app.screen.is_mounted)  # type: ignore[attr-defined]
            body = str(app.screen.query_one("#details-body").render())
            life = body.split("Its life")[1].split("From the history and the audit log")[0]
            assert "in this session" not in life.splitlines()[0], life
            assert (f"{stamp(before.first_seen, date=False)}  appeared (incarnation "
                    f"{before.first_incarnation})") in life, life
            assert f"{stamp(started_at, date=False)}  started (incarnation " in life, life
            assert "in the first document setui saw" not in life, life
            assert "already started" not in life, life
            await pilot.press("escape")
    finally:
        assert stop(proc) == 0
