"""Replay through the real app and Pilot, over a recorded store: the dashboard at a
chosen moment, the cursor's steps, play, the holes, and no way to approve."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timedelta
from typing import Any

import pytest
from textual.app import App
from textual.screen import Screen
from textual.widgets.data_table import ColumnKey

from setui.settings.config import Config
from setui.store import Store
from setui.ui.replay_app import ReplayApp
from setui.ui.screens.confirm import ConfirmationModal
from setui.ui.screens.history import HistoryScreen
from setui.ui.screens.replay import ReplayScreen
from setui.ui.widgets.events import EventsTable
from setui.ui.widgets.status import StatusBar
from tests.support.dashboard import wait_for
from tests.support.incident import HOLE
from tests.support.recording import START
from tests.support.screenhost import ScreenApp

REBOOT = "A1B2C3D4-0000-4000-8000-000000000001"
FREEZE = "A1B2C3D4-0000-4000-8000-000000000002"
REDEPLOY = "A1B2C3D4-0000-4000-8000-000000000003"
CONFIG = Config(vm_name="web-0")


def at(seconds: float) -> datetime:
    return START + timedelta(seconds=seconds)


def screen_text(app: App[Any]) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def opened(app: ReplayApp, pilot: Any) -> ReplayScreen:
    screen = app.replay_screen
    await wait_for(pilot, lambda: screen.moment is not None)
    await pilot.pause()
    return screen


async def test_the_dashboard_as_it_was_at_a_chosen_moment(recorded: Store) -> None:
    app = ReplayApp(config=CONFIG, store=recorded.record, at=at(95))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app, pilot)
        assert screen.moment == at(95)
        table = screen.query_one(EventsTable)
        assert set(table.keys) == {REBOOT, FREEZE, REDEPLOY}
        # Countdowns are relative to the cursor: the Freeze was moved to 60 s + 5 min.
        assert "T-4:25" in table.cell_text(FREEZE, "countdown")
        assert "T-2:55" in table.cell_text(REDEPLOY, "countdown")
        # The Reboot started 3 s before the cursor, approved early by alice.
        assert "started 0:03 ago" in table.cell_text(REBOOT, "countdown")
        assert "alice" in table.cell_text(REBOOT, "approved")
        # What was recorded, anyone's: not "Approved here" (this replay approved nothing).
        assert table.columns[ColumnKey("approved")].label.plain == "Approved"
        status = screen.query_one(StatusBar).plain()
        assert "REPLAY Nov 24" in status
        assert "03:01:35 UTC" in status  # the cursor, as the clock on the right
        assert "incarnation 6" in status
        assert "http://127.0.0.1:8099" in status  # the record's endpoint, not the config's
        assert "paused" in status


async def test_left_right_step_one_incarnation_and_brackets_one_minute(
        recorded: Store) -> None:
    app = ReplayApp(config=CONFIG, store=recorded.record, at=at(45))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app, pilot)
        await pilot.press("right")
        assert screen.moment == at(60)  # incarnation 5, the reschedule
        assert screen.setui.session.document.incarnation == 5
        await pilot.press("right")
        assert screen.moment == at(92)  # incarnation 6: the Reboot started
        await pilot.press("left", "left")
        assert screen.moment == at(30)  # back past the moment we started from
        await pilot.press("right_square_bracket")
        assert screen.moment == at(90)
        await pilot.press("left_square_bracket", "left_square_bracket")
        assert screen.moment == at(0)  # the record's start: the cursor stops there
        await pilot.press("left")
        assert screen.moment == at(0)


async def test_space_plays_at_1x_10x_60x_then_pauses(recorded: Store) -> None:
    app = ReplayApp(config=CONFIG, store=recorded.record, at=at(0))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app, pilot)
        speeds = []
        for _ in range(4):
            await pilot.press("space")
            speeds.append(screen.setui.speed)
        assert speeds == [1, 10, 60, 0]
        await pilot.press("space", "space", "space")  # 60x
        assert "playing 60x" in screen.query_one(StatusBar).plain()
        await wait_for(pilot, lambda: screen.moment is not None and screen.moment >= at(30))
        # Playing moves the whole dashboard: the Reboot appeared at 10 s.
        await wait_for(pilot, lambda: REBOOT in screen.query_one(EventsTable).keys)
        await pilot.press("space")
        assert screen.setui.speed == 0


async def test_nothing_in_a_replay_can_approve(recorded: Store) -> None:
    app = ReplayApp(config=CONFIG, store=recorded.record, at=at(60))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app, pilot)
        actions = {binding.action for binding in screen._bindings.key_to_bindings.get("a", [])}
        assert not actions
        assert all(b.action != "approve" for bs in screen._bindings.key_to_bindings.values()
                   for b in bs)
        await pilot.press("a", "y")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmationModal)
        assert app.screen is screen
        assert "Approve" not in screen_text(app).splitlines()[-1]
        assert len(recorded.audit_log.records(limit=None)) == 3  # the recorded ones, nothing new


async def test_a_hole_says_nothing_was_recording_and_what_left_meanwhile(
        recorded: Store) -> None:
    app = ReplayApp(config=CONFIG, store=recorded.record, at=at(HOLE[0] + 20))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app, pilot)
        status = screen.query_one(StatusBar).plain()
        assert "nothing was recording from 03:04:00 to 03:05:30 UTC" in status
        assert "not recording" in status and "waiting" not in status
        assert "T-0:10?" in screen.query_one(EventsTable).cell_text(REDEPLOY, "countdown")
        await pilot.press("right")  # the first incarnation after the hole
        assert screen.moment == at(HOLE[1])
        life = screen.setui.session.lives[REDEPLOY]
        assert (life.fate, life.fate_certain) == ("gone", False)


async def test_replay_at_80x24_keeps_the_label_the_moment_and_the_rows(
        recorded: Store) -> None:
    app = ReplayApp(config=CONFIG, store=recorded.record, at=at(95))
    async with app.run_test(size=(80, 24)) as pilot:
        await opened(app, pilot)
        lines = screen_text(app).splitlines()
        assert len(lines) == 24
        assert "REPLAY Nov 24" in lines[0] and "UTC" in lines[0]
        text = "\n".join(lines)
        assert "Reboot" in text and "Freeze" in text and "Redeploy" in text
        assert "Play" in lines[-1] and "Approve" not in lines[-1]


async def test_p_in_the_history_replays_that_incarnation(recorded: Store) -> None:
    history = HistoryScreen(recorded.record, config=CONFIG, vm_name="web-0")
    app = ScreenApp(history)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: len(history.records) == 9)
        # Newest first: 10, 8, 7, then 6 (a row saying nothing was recording may stand
        # between them: the cursor moves until incarnation 6 is the one selected).
        for _ in range(len(history.rows)):
            chosen = history._selected()
            if chosen is not None and chosen.incarnation == 6:
                break
            await pilot.press("down")
        chosen = history._selected()
        assert chosen is not None and chosen.incarnation == 6
        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, ReplayScreen)
                       and app.screen.moment is not None)  # type: ignore[attr-defined]  # Screen[None] in a Screen[object]: mypy narrows to nothing
        replay: Screen[Any] = app.screen
        assert isinstance(replay, ReplayScreen)
        assert replay.moment == at(92)
        assert "REPLAY" in replay.query_one(StatusBar).plain()
        assert "VM web-0" in replay.query_one(StatusBar).plain()  # the history's host's
        await pilot.press("q")  # back to the history, not out of the app
        await wait_for(pilot, lambda: app.screen is history)


async def test_without_a_record_the_replay_says_why_and_still_quits(tmp_path: Any) -> None:
    app = ReplayApp(config=CONFIG, store=None, store_problem="nothing has been recorded yet")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        text = screen_text(app)
        assert "no record to replay: nothing has been recorded yet" in text
        await pilot.press("right", "space", "a")  # nothing to move, nothing to approve
        await pilot.press("q")
        await wait_for(pilot, lambda: not app.is_running)


@pytest.mark.slow
def test_replay_refuses_a_backwards_window_in_words(tmp_path: Any) -> None:
    env = dict(os.environ, SETUI_DATA_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "setui.cli", "replay", "--from", "1h",
                           "--to", "2h"], capture_output=True, text=True, env=env,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert "--from is after --to" in done.stderr and "Traceback" not in done.stderr
    done = subprocess.run([sys.executable, "-m", "setui.cli", "replay", "--from", "soon"],
                          capture_output=True, text=True, env=env, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "not a time" in done.stderr


@pytest.mark.parametrize("size", [(80, 24), (120, 36)], ids=["80x24", "120x36"])
def test_snapshot_replay_in_the_hole(recorded: Store, snap_compare: Any,
                                     size: tuple[int, int]) -> None:
    """The REPLAY label and moment, a countdown marked with ?, the hole said in words, the
    cursor keys in the footer and no Approve: at 80x24 as at 120x36."""
    app = ReplayApp(config=CONFIG, store=recorded.record, at=at(HOLE[0] + 10))

    async def run_before(pilot: Any) -> None:
        await wait_for(pilot, lambda: app.replay_screen.moment is not None)
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)


async def test_a_replay_quits_on_ctrl_c_and_says_the_size_it_needs(recorded: Store) -> None:
    """What every setui app does in a terminal (setui.ui.shell) holds for the replay too."""
    from setui.ui.screens.small import TooSmallScreen

    app = ReplayApp(config=CONFIG, store=recorded.record, at=at(95))
    async with app.run_test(size=(50, 16)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TooSmallScreen))
        await pilot.resize_terminal(80, 24)
        await wait_for(pilot, lambda: isinstance(app.screen, ReplayScreen))
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: not app.is_running)


async def test_without_a_vm_name_the_record_says_which_vm_it_is(recorded: Store) -> None:
    app = ReplayApp(config=Config(), store=recorded.record, at=at(95))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app, pilot)
        status = screen.query_one(StatusBar).plain()
        assert "VM web-0" in status and "not known" not in status
        table = screen.query_one(EventsTable)
        assert table.cell_text(REBOOT, "resources").startswith("▲ web-0")


async def test_the_status_line_says_what_the_record_says(recorded: Store) -> None:
    app = ReplayApp(config=CONFIG, store=recorded.record, at=at(95))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app, pilot)
        status = screen.query_one(StatusBar).plain()
        assert "recorded live" in status
        assert "STALE" not in status and "old" not in status and "ago" not in status
        screen.go(at(HOLE[0] + 20))
        await pilot.pause()
        status = screen.query_one(StatusBar).plain()
        assert "STALE" not in status
        assert "last recorded answer 20s before" in status
        assert "history NOT recorded" not in status  # a replay records nothing


async def test_it_opens_on_the_first_incarnation_with_events(recorded: Store) -> None:
    app = ReplayApp(config=CONFIG, store=recorded.record)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app, pilot)
        assert screen.moment == at(10)  # the Reboot appeared; the record began empty at 0
        assert REBOOT in screen.query_one(EventsTable).keys


async def test_an_empty_moment_points_to_the_next_change(recorded: Store) -> None:
    app = ReplayApp(config=CONFIG, store=recorded.record, at=at(0))
    async with app.run_test(size=(120, 36)) as pilot:
        await opened(app, pilot)
        text = screen_text(app)
        assert "Nothing scheduled here" in text
        assert "→ next change, 03:00:10 UTC" in text
