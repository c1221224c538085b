"""The dashboard writes time one way (tests/support/timeforms.py) on every screen that shows one:
the main screen, an event's details after a reschedule, the approval dialog, the history
and one incarnation's diff, the audit log. Through the real app and Pilot, against the
emulator on a manual clock, in a zone that is not UTC."""

from __future__ import annotations

from typing import Any

from setui.ui.screens.audit import AuditScreen
from setui.ui.screens.confirm import ConfirmationModal
from setui.ui.screens.details import DetailsScreen
from setui.ui.screens.history import HistoryScreen, IncarnationScreen
from setui.ui.screens.main import MainScreen
from setui.ui.widgets.events import EventsTable
from tests.support.timeforms import foreign_in_text

MakeDashboard = Any
TALL = (160, 80)  # every line of the longer screens in view


def _text(app: Any) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def test_every_screen_writes_time_one_way(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard(at=230)
    seen: dict[str, str] = {}
    async with d.app.run_test(size=TALL) as pilot:
        await d.settle(pilot)
        await d.wait_for(pilot, lambda: d.app.vm_name == "web-0")
        await d.advance(pilot, 20)  # the Redeploy of db-0 is moved at second 240
        document = d.app.session.document
        assert document is not None
        moved = next(e for e in document.events if e.event_type == "Redeploy")
        seen["main"] = _text(d.app)
        table = d.app.main_screen.query_one(EventsTable)
        assert table.select_key(moved.event_id)
        await pilot.pause()
        await pilot.press("enter")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, DetailsScreen))
        await pilot.pause()
        seen["details"] = _text(d.app)
        assert "rescheduled" in seen["details"]
        await pilot.press("escape")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, MainScreen))
        await pilot.press("a")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, ConfirmationModal))
        await pilot.pause()
        seen["approval dialog"] = _text(d.app)
        await pilot.press("n")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, MainScreen))
        await pilot.press("h")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, HistoryScreen)
                         and bool(d.app.screen.records))
        await pilot.pause()
        history = d.app.screen
        seen["history"] = _text(d.app)
        await pilot.press("enter")  # the newest incarnation: the reschedule
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, IncarnationScreen))
        await pilot.pause()
        seen["incarnation"] = _text(d.app).split("Raw document")[0]
        assert "NotBefore" in seen["incarnation"]
        await pilot.press("escape")
        await d.wait_for(pilot, lambda: d.app.screen is history)
        await pilot.press("escape")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, MainScreen))
        await pilot.press("l")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, AuditScreen))
        await pilot.pause(0.2)
        seen["audit"] = _text(d.app)
    foreign = [f for name, text in seen.items() for f in foreign_in_text(text, name)]
    assert not foreign, "\n".join(foreign)
