"""Notices never cover what the operator is reading: the dashboard's news is a line of the
dashboard that pushes its content up; over the help, the details, the history, the
"needs at least 60x20" message and a replay, nothing appears at all until the dashboard
is back. (Textual's test harness hides toasts unless asked: these tests ask.)"""

from __future__ import annotations

from typing import Any

import pytest
from textual.widget import Widget

from setui.ui.format import Palette
from setui.ui.screens.details import DetailsScreen
from setui.ui.screens.help import HelpScreen
from setui.ui.screens.history import HistoryScreen
from setui.ui.screens.main import MainScreen
from setui.ui.screens.replay import ReplayScreen
from setui.ui.screens.small import TooSmallScreen
from setui.ui.widgets.notices import Notice, NoticeLine, notice_lines
from setui.ui.widgets.timeline import Timeline
from tests.support.dashboard import (
    NARROW,
    MakeDashboard,
    screen_text,
    start,
)

NEWS = "Freeze for web-9: NotBefore 12:34:56 UTC (the news marker)."
LONG = ("Reboot for web-3, web-4, web-5, web-6, web-7, web-8, web-9, web-10, web-11 "
        "and web-12: NotBefore 10:40:00 UTC, T-35:00; Redeploy for db-0 and db-1 at "
        "11:00:00 UTC, T-55:00; and the end of this news is HERE.")


def crowded(write_scenario: Any) -> Any:
    """Twelve events: the timeline's lanes reach down to the key bar at 60x20."""
    return write_scenario("crowded", {
        "vm_name": "web-0",
        "events": [{"type": "Reboot", "at": 0, "notice": f"{10 + i}m", "duration": 30,
                    "resources": [f"web-{i}"]} for i in range(12)],
    })


def covered(screen: Any, widget: Widget) -> list[tuple[int, int]]:
    """The cells of ``widget`` where something else is drawn on top of it."""
    region = widget.region
    found = []
    for y in range(region.y, region.bottom):
        for x in range(region.x, region.right):
            top, _ = screen.get_widget_at(x, y)
            if top is not widget and widget not in top.ancestors:
                found.append((x, y))
    return found


async def test_news_pushes_the_dashboard_up_and_is_read_whole(
        make_dashboard: MakeDashboard, write_scenario: Any) -> None:
    d = make_dashboard(crowded(write_scenario), at=30)
    async with d.app.run_test(size=(60, 20), notifications=True) as pilot:
        await start(d, pilot)
        screen = d.app.main_screen
        timeline = screen.query_one(Timeline)
        assert timeline.region.bottom >= 18  # the lanes reach the key bar
        d.app.notify(NEWS, title="New event", severity="warning", timeout=60, markup=False)
        d.app.notify(LONG, title="2 changes", timeout=60, markup=False)
        await pilot.pause()
        await pilot.pause()
        for widget in screen.query("StatusBar, EventsTable, EventSummary, Timeline, KeyBar"):
            assert covered(screen, widget) == [], widget
        shown = " ".join(screen_text(d).split())
        assert "New event: " + NEWS in shown
        assert "HERE." in shown  # the long one is not cut


@pytest.mark.parametrize("size", [(60, 20), NARROW])
async def test_a_long_notice_is_read_whole_above_the_keys(
        make_dashboard: MakeDashboard, size: tuple[int, int]) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=size, notifications=True) as pilot:
        await start(d, pilot)
        d.app.notify(LONG, title="2 changes", timeout=60, markup=False)
        await pilot.pause()
        await pilot.pause()
        lines = screen_text(d).splitlines()
        keys = len(lines) - 1
        assert "Help" in lines[keys]  # the key bar, whole, on the last line
        shown = " ".join(" ".join(lines[:keys]).split())
        assert " ".join(LONG.split()) in shown.replace("2 changes: ", "")


async def open_help(d: Any, pilot: Any) -> None:
    await pilot.press("question_mark")
    await d.wait_for(pilot, lambda: isinstance(d.app.screen, HelpScreen))


async def open_details(d: Any, pilot: Any) -> None:
    await pilot.press("enter")
    await d.wait_for(pilot, lambda: isinstance(d.app.screen, DetailsScreen))


async def open_history(d: Any, pilot: Any) -> None:
    await pilot.press("h")
    await d.wait_for(pilot, lambda: isinstance(d.app.screen, HistoryScreen)
                     and len(d.app.screen.records) > 0)


async def open_replay(d: Any, pilot: Any) -> None:
    await open_history(d, pilot)
    await pilot.press("p")
    await d.wait_for(pilot, lambda: isinstance(d.app.screen, ReplayScreen)
                     and d.app.screen.moment is not None)


@pytest.mark.parametrize("opener", [open_help, open_details, open_history, open_replay],
                         ids=["help", "details", "history", "replay"])
async def test_news_waits_while_another_screen_is_read(
        make_dashboard: MakeDashboard, opener: Any) -> None:
    """Nothing from the live dashboard appears over another screen (a replay is the past:
    the live news is not its news); it is on the dashboard when the operator is back."""
    d = make_dashboard()
    async with d.app.run_test(size=NARROW, notifications=True) as pilot:
        await start(d, pilot)
        await opener(d, pilot)
        top = d.app.screen
        d.app.notify(NEWS, title="New event", severity="warning", timeout=5, markup=False)
        await pilot.pause()
        await pilot.pause()
        assert d.app.screen is top
        assert "news marker" not in screen_text(d)
        while not isinstance(d.app.screen, MainScreen) or isinstance(d.app.screen,
                                                                    ReplayScreen):
            await pilot.press("escape" if not isinstance(d.app.screen, ReplayScreen) else "q")
            await pilot.pause()
        # Back on the dashboard: the news is there, its time counted from now.
        await d.wait_for(pilot, lambda: "New event: " + NEWS in " ".join(  # type: ignore[unreachable]
            screen_text(d).split()))


async def test_nothing_appears_over_the_size_needed(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=(50, 15), notifications=True) as pilot:
        await d.settle(pilot)
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, TooSmallScreen))
        before = screen_text(d)
        d.app.notify(NEWS, title="New event", severity="warning", timeout=60, markup=False)
        await pilot.pause()
        await pilot.pause()
        assert screen_text(d) == before
        assert "needs at least 60x20" in before


async def test_a_notice_is_wrapped_again_when_the_terminal_grows(
        make_dashboard: MakeDashboard) -> None:
    """News that came while the terminal was too small is wrapped to the width it is
    read at, not the one it came at."""
    d = make_dashboard()
    async with d.app.run_test(size=(50, 15)) as pilot:
        await d.settle(pilot)
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, TooSmallScreen))
        d.app.notify(LONG, title="2 changes", timeout=60, markup=False)
        await pilot.pause()
        await pilot.resize_terminal(120, 36)
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, MainScreen))
        lines = [line for line in screen_text(d).splitlines() if "web-" in line
                 and "Reboot for" in line]
        assert lines and len(lines[0].rstrip()) > 100, lines


def test_a_notice_is_drawn_printable_and_bounded() -> None:
    """A notice may quote the network: its control characters are escaped when drawn,
    whatever the caller did, and a huge one takes the lines it is given, no more."""
    hostile = Notice("Freeze\x1b[2J for \x07web-0\u202e" + "x" * 5000, title="New\x1b]0;t")
    lines = notice_lines([hostile], 60, 4, Palette())
    drawn = "".join(line.plain for line in lines)
    assert "\x1b" not in drawn and "\x07" not in drawn and "\u202e" not in drawn
    assert "\\x1b[2J" in drawn
    assert len(lines) == 4 and lines[-1].plain.endswith("…")


async def test_the_notice_line_ticks_only_while_a_notice_is_there(
        make_dashboard: MakeDashboard) -> None:
    """An idle dashboard's loop is not woken twice a second for an empty notice line: its
    timer runs while a notice waits to be seen or to leave, and the notice still leaves."""
    d = make_dashboard()
    async with d.app.run_test(size=NARROW, notifications=True) as pilot:
        await start(d, pilot)
        line = d.app.main_screen.query_one(NoticeLine)

        def ticking() -> bool:
            return any(t.name == "notices" and t._active.is_set() for t in line._timers)

        d.app.clear_notifications()
        await pilot.pause()
        assert not ticking()
        d.app.notify(NEWS, title="New event", timeout=0.2, markup=False)
        await pilot.pause()
        assert ticking()
        await d.wait_for(pilot, lambda: not line.notices.shown)
        await pilot.pause()
        assert not ticking()
        assert NEWS not in screen_text(d)
