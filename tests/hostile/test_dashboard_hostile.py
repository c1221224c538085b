"""The dashboard with hostile text and huge documents, through Pilot.

Every screen's rendered text (main screen, summary, timeline, details, approval dialog,
history) shows markup literally and holds no raw control character; with 1,000 events
or 10,000 resources keys are still handled. Responsiveness is checked by waiting for
conditions with a generous deadline, never by timing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from setui.ui.screens.confirm import ConfirmationModal
from setui.ui.screens.details import DetailsScreen
from setui.ui.screens.history import HistoryScreen
from setui.ui.widgets.events import EventsTable
from setui.ui.widgets.summary import EventSummary
from tests.support.hostile_data import (
    HUGE,
    RAW_CONTROL_TEXT,
    hostile_scenario_data,
    write_hostile_scenario,
)

WIDE = (140, 40)
DEADLINE = 20.0  # seconds; generous for a loaded 2-core machine, not a timing assertion


def screen_text(app: Any) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def assert_clean(text: str, where: str) -> None:
    found = RAW_CONTROL_TEXT.search(text)
    assert found is None, f"{where}: raw {found.group()!r} in {text[:200]!r}"


async def loaded(d: Any, pilot: Any, rows: int) -> EventsTable:
    table = d.app.main_screen.query_one(EventsTable)
    await d.wait_for(pilot, lambda: len(table.keys) >= rows, timeout=DEADLINE)
    return table


async def test_every_screen_shows_hostile_text_literally(make_dashboard: Any,
                                                         tmp_path: Path) -> None:
    scenario = write_hostile_scenario(tmp_path / "h.json", hostile_scenario_data())
    d = make_dashboard(scenario, at=30)
    async with d.app.run_test(size=WIDE) as pilot:
        table = await loaded(d, pilot, 4)
        summaries = []
        for row in range(4):  # each event in turn: table, summary, timeline
            table.move_cursor(row=row, animate=False)
            await pilot.pause()
            assert_clean(screen_text(d.app), f"main screen, row {row}")
            summary = d.app.main_screen.query_one(EventSummary).plain()
            assert_clean(summary, "summary")
            assert len(summary) < 2 * WIDE[0] + 10  # 100 KB cut to the screen
            summaries.append(summary)
        assert "[bold red]ALERT[/bold red]" in "".join(summaries)  # markup, literally
        assert "\\x1b" in "".join(summaries)  # an escape, visibly
        for key in table.keys:  # cells are cut: a 100 KB name is not a 100 KB cell
            for column in ("type", "resources"):
                assert len(table.cell_text(key, column)) <= 40
        table.move_cursor(row=table.keys.index("[bold]huge[/bold]"), animate=False)
        await pilot.press("enter")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, DetailsScreen))
        await pilot.pause()
        assert_clean(screen_text(d.app), "details screen")
        body = str(d.app.screen.query_one("#details-body").render())
        assert_clean(body, "details body")
        assert "[bold]huge[/bold]" in body
        assert len(body) < len(HUGE) + 200_000  # shown, but not blown up
        await pilot.press("escape")
        await d.wait_for(pilot, lambda: d.app.screen is d.app.main_screen)
        table.move_cursor(row=0, animate=False)
        await pilot.press("a")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, ConfirmationModal))
        await pilot.pause()
        assert_clean(screen_text(d.app), "approval dialog")
        assert "[bold red]ALERT[/bold red]" in screen_text(d.app) or "[" in screen_text(d.app)
        await pilot.press("n")
        await d.wait_for(pilot, lambda: d.app.screen is d.app.main_screen)
        assert not d.posts()
        await pilot.press("h")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, HistoryScreen))
        await pilot.pause()
        assert_clean(screen_text(d.app), "history screen")
        for notice in d.notices():
            assert_clean(notice, "notification")


async def test_a_thousand_events_stay_responsive(make_dashboard: Any, tmp_path: Path) -> None:
    events = [{"id": f"evt-{i:04d}", "type": "Freeze", "notice": 900 + i,
               "description": "[link=x]y[/link] \x1b[2J", "resources": ["vm-0", f"vm-{i}"]}
              for i in range(1000)]
    scenario = write_hostile_scenario(tmp_path / "many.json", hostile_scenario_data(events))
    d = make_dashboard(scenario, at=1)
    async with d.app.run_test(size=WIDE) as pilot:
        table = await loaded(d, pilot, 1000)
        assert table.size.height < 40  # the rows scroll inside the screen
        first = table.selected_key
        await pilot.press("down")
        await d.wait_for(pilot, lambda: table.selected_key != first, timeout=DEADLINE)
        await pilot.press("a")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, ConfirmationModal),
                         timeout=DEADLINE)
        await pilot.press("n")
        await d.wait_for(pilot, lambda: d.app.screen is d.app.main_screen, timeout=DEADLINE)
        await pilot.press("m")
        await d.wait_for(pilot, lambda: d.app.main_screen.this_vm_only, timeout=DEADLINE)
        await pilot.press("slash")
        await d.wait_for(pilot, lambda: d.app.main_screen.query_one("#filter").has_focus,
                         timeout=DEADLINE)
        await pilot.press("0", "9", "9", "9")
        await d.wait_for(pilot, lambda: table.keys == ["evt-0999"], timeout=DEADLINE)
        # A second of ticking with nothing changed does not rebuild the rows.
        rebuilds = table.rebuilds
        gets = len(d.gets())
        await d.wait_for(pilot, lambda: len(d.gets()) >= gets + 3, timeout=DEADLINE)
        assert table.rebuilds == rebuilds
        assert not d.posts()
        assert_clean(screen_text(d.app), "main screen with 1,000 events")


async def test_ten_thousand_resources_on_one_event(make_dashboard: Any, tmp_path: Path) -> None:
    events = [{"id": "big", "type": "Reboot", "notice": 900,
               "resources": ["vm-0"] + [f"\x1b[31mvm-{r}[/]" for r in range(10_000)]},
              {"id": "small", "type": "Freeze", "notice": 1200}]
    scenario = write_hostile_scenario(tmp_path / "res.json", hostile_scenario_data(events))
    d = make_dashboard(scenario, at=1)
    async with d.app.run_test(size=WIDE) as pilot:
        table = await loaded(d, pilot, 2)
        table.select_key("big")
        await pilot.pause()
        summary = d.app.main_screen.query_one(EventSummary).plain()
        assert_clean(summary, "summary")
        assert len(table.cell_text("big", "resources")) <= 40
        await pilot.press("down")
        await d.wait_for(pilot, lambda: table.selected_key == "small", timeout=DEADLINE)
        await pilot.press("up", "enter")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, DetailsScreen),
                         timeout=DEADLINE)
        await pilot.pause()
        assert_clean(screen_text(d.app), "details with 10,000 resources")
        await pilot.press("escape")
        await d.wait_for(pilot, lambda: d.app.screen is d.app.main_screen, timeout=DEADLINE)


async def test_an_event_id_with_a_lone_surrogate(make_dashboard: Any, tmp_path: Path) -> None:
    """Valid JSON (``"EV-\\ud800"``), no valid UTF-8: the details screen, its story from
    the store and the history show it escaped, and nothing crashes."""
    events = [{"id": "EV-\ud800", "type": "Reboot", "notice": 900},
              {"id": "EV-\udcff-2", "type": "Freeze", "notice": 1200}]
    scenario = write_hostile_scenario(tmp_path / "surrogate.json", hostile_scenario_data(events))
    d = make_dashboard(scenario, at=1)
    async with d.app.run_test(size=WIDE) as pilot:
        table = await loaded(d, pilot, 2)
        for row in range(2):
            table.move_cursor(row=row, animate=False)
            await pilot.press("enter")
            await d.wait_for(pilot, lambda: isinstance(d.app.screen, DetailsScreen))
            # Its story, read from the store by that id, arrives (not "reading...").
            await d.wait_for(pilot, lambda: "#1  appeared" in screen_text(d.app),
                             timeout=DEADLINE)
            text = screen_text(d.app)
            assert_clean(text, "details screen")
            assert "EV-\\ud800" in text or "EV-\\udcff-2" in text
            await pilot.press("escape")
            await d.wait_for(pilot, lambda: d.app.screen is d.app.main_screen)
        await pilot.press("h")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, HistoryScreen))
        await pilot.pause()
        assert_clean(screen_text(d.app), "history screen")
