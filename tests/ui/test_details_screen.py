"""The details screen follows its event: the countdown runs, the start and the leaving are
shown as they happen, r says what it will show next, and long values wrap under their
own column. Driven through the real app against the emulator on a manual clock."""

from __future__ import annotations

from typing import Any

from textual.widgets import Static

from setui.core.model import Event
from setui.core.timefmt import stamp
from setui.ui.screens.details import DetailsScreen
from setui.ui.screens.main import MainScreen
from setui.ui.widgets.events import EventsTable

Dashboard = Any  # the conftest fixtures' types, loosely, as in test_app.py
MakeDashboard = Any

WIDE = (120, 36)
NARROW = (80, 24)
LONG_DESCRIPTION = ("Virtual machine is going to be redeployed because of a predicted hardware "
                    "failure on its host; the platform will move it to healthy hardware and "
                    "local temporary disk data will be lost.")


def freeze(d: Dashboard) -> Event:
    """The busy scenario's Freeze of web-0 and web-1: NotBefore at scenario second 310,
    completed at 375."""
    document = d.app.session.document
    assert document is not None
    return next(e for e in document.events
                if e.event_type == "Freeze" and e.resources == ("web-0", "web-1"))


def body(screen: DetailsScreen) -> str:
    return str(screen.query_one("#details-body", Static).render())


def title(screen: DetailsScreen) -> str:
    return str(screen.query_one("#details-title", Static).render())


async def start(d: Dashboard, pilot: Any) -> None:
    await d.settle(pilot)
    await d.wait_for(pilot, lambda: d.app.vm_name == "web-0")
    await pilot.pause()


async def open_details(d: Dashboard, pilot: Any, event: Event) -> DetailsScreen:
    """Select the event's row and press Enter, as an operator would."""
    table = d.app.main_screen.query_one(EventsTable)
    assert table.select_key(event.event_id)
    await pilot.pause()
    await pilot.press("enter")
    await d.wait_for(pilot, lambda: isinstance(d.app.screen, DetailsScreen))
    screen = d.app.screen
    assert isinstance(screen, DetailsScreen)
    await pilot.pause()
    return screen


async def test_countdown_runs_while_the_screen_is_open(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard(at=300)
    async with d.app.run_test(size=NARROW) as pilot:
        await start(d, pilot)
        screen = await open_details(d, pilot, freeze(d))
        assert "!! T-0:10" in body(screen)
        d.clock.advance(1)
        screen.refresh_details()  # what the screen's 1-second tick does
        await pilot.pause()
        assert "!! T-0:09" in body(screen) and "T-0:10" not in body(screen)
        # The tick itself runs without being called: the next second shows by itself.
        d.clock.advance(1)
        await d.wait_for(pilot, lambda: "!! T-0:08" in body(screen))


async def test_the_start_and_the_leaving_show_while_open(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard(at=300)
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        event = freeze(d)
        screen = await open_details(d, pilot, event)
        assert "gone" not in title(screen)
        await d.advance(pilot, 20)  # it started at 310
        screen.refresh_details()
        await pilot.pause()
        text = body(screen)
        assert "Started  ▶ started 0:" in text and " ago" in text
        assert "UTC (11:05:10 CET)  started (incarnation" in text
        await d.advance(pilot, 60)  # completed at 375
        life = d.app.session.lives[event.event_id]
        assert life.fate == "completed" and life.gone_incarnation is not None
        await d.wait_for(pilot, lambda: "gone" in title(screen))
        text = body(screen)
        gone_at = stamp(life.gone_at, date=False)  # 10:06:20 UTC (11:06:20 CET)
        assert (f"{gone_at}  gone: completed, left the document at incarnation "
                f"{life.gone_incarnation}") in text
        assert text.startswith("!! No longer in the document: completed at")
        assert "gone: completed" in title(screen)
        assert event.event_id in text  # its last known fields are still there
        await pilot.press("escape")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, MainScreen))


async def test_r_says_what_it_will_show(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard(at=300)
    async with d.app.run_test(size=NARROW) as pilot:
        await start(d, pilot)
        event = freeze(d)
        screen = await open_details(d, pilot, event)

        def r_says() -> str:
            return screen.active_bindings["r"].binding.description

        assert r_says() == "Raw JSON"
        await pilot.press("r")
        await pilot.pause()
        assert screen.showing_raw and r_says() == "Fields"
        assert f'"EventId": "{event.event_id}"' in body(screen)
        # The tick keeps the raw view: it must not flip back to the fields.
        d.clock.advance(1)
        screen.refresh_details()
        await pilot.pause()
        assert body(screen).startswith("Raw JSON of the event")
        await pilot.press("r")
        await pilot.pause()
        assert not screen.showing_raw and r_says() == "Raw JSON"
        assert body(screen).startswith("Fields")


async def test_type_and_id_are_in_the_title_only(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard(at=300)
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        event = freeze(d)
        screen = await open_details(d, pilot, event)
        assert title(screen) == f"Event Freeze {event.event_id}"
        text = body(screen)
        assert text.startswith("Fields\n")
        assert text.count(event.event_id) == 1  # the EventId field, nowhere else


async def test_long_description_hangs_under_its_column(make_dashboard: MakeDashboard,
                                                      write_scenario: Any) -> None:
    scenario = write_scenario("long", {
        "vm_name": "web-0",
        "events": [{"type": "Redeploy", "at": 0, "notice": "10m", "duration": -1,
                    "resources": ["web-0"], "description": LONG_DESCRIPTION}],
    })
    d = make_dashboard(scenario, at=30)
    async with d.app.run_test(size=NARROW) as pilot:
        await start(d, pilot)
        d.app.open_details(d.app.session.document.events[0].event_id)
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, DetailsScreen))
        screen = d.app.screen
        await pilot.pause()
        width = screen.query_one("#details-body", Static).size.width
        lines = body(screen).splitlines()
        first = next(i for i, line in enumerate(lines) if line.startswith("  Description"))
        assert lines[first].startswith("  Description       Virtual machine")
        rest = lines[first + 1:first + 4]
        assert len(rest) == 3 and all(line.startswith(" " * 20) and line[20] != " "
                                      for line in rest), rest
        shown = " ".join(line[20:].strip() for line in lines[first:first + 4])
        assert shown == LONG_DESCRIPTION
        assert all(len(line) <= width for line in lines[first:first + 4])


async def test_the_notice_and_what_was_measured_are_shown(make_dashboard: MakeDashboard
                                                           ) -> None:
    """The busy scenario's Freeze appears at second 10 with 5 minutes' notice, while the
    dashboard watches: less than the 15 documented. The agent measured its pause."""
    from setui.core.impact import STALL, STARTED, Impact

    d = make_dashboard(at=5)
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        await d.advance(pilot, 5)  # seen as it appears
        event = freeze(d)
        assert d.store is not None
        d.store.sessions.record_impact(Impact(
            STALL, d.now(), 4.8, d.app.config.endpoint, wall_seconds=4.8,
            event_id=event.event_id, event_type="Freeze", announced=5, tie=STARTED))
        screen = await open_details(d, pilot, event)
        await d.wait_for(pilot, lambda: "the VM was paused 4.8s" in body(screen))
        text = body(screen)
        assert "Notice            5m 00s: LESS than the 15m 00s documented for a Freeze" in text
        assert "Impact            Freeze, announced 5s: the VM was paused 4.8s at" in text


async def test_an_event_there_before_the_dashboard_has_an_unknown_notice(
        make_dashboard: MakeDashboard) -> None:
    d = make_dashboard(at=300)  # everything in the first document it sees
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        screen = await open_details(d, pilot, freeze(d))
        await d.wait_for(pilot, lambda: "no stall or boot recorded" in body(screen))
        assert ("Notice            not known: it was already in the document when recording "
                "began") in body(screen)
