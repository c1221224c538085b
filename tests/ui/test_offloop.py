"""The screens read the store on a thread: a store that does not answer (another writer
holds it) leaves the dashboard answering keys, and its answer arrives when it comes."""

from __future__ import annotations

import threading
from typing import Any

from textual.widgets import DataTable, Static

from setui.ui.screens.audit import AuditScreen
from setui.ui.screens.history import HistoryScreen
from tests.support.dashboard import MakeDashboard, start
from tests.support.waiting import PATIENCE


def hold(store: Any, name: str) -> threading.Event:
    """Make ``store.<name>`` wait until the returned event is set (as a locked database)."""
    release = threading.Event()
    real = getattr(store, name)

    def held(*args: Any, **kwargs: Any) -> Any:
        release.wait(PATIENCE)
        return real(*args, **kwargs)

    setattr(store, name, held)
    return release


async def test_history_loads_on_a_thread_while_the_keys_still_work(
        make_dashboard: MakeDashboard) -> None:
    d = make_dashboard("busy", at=300)
    async with d.app.run_test(size=(120, 36)) as pilot:
        await start(d, pilot)
        release = hold(d.store.record, "history")
        try:
            await pilot.press("h")
            await d.wait_for(pilot, lambda: isinstance(d.app.screen, HistoryScreen))
            screen = d.app.screen
            status = screen.query_one("#history-status", Static)
            await d.wait_for(pilot, lambda: "Loading the history" in str(status.render()))
            # The loop is free: a key is handled while the store still holds the query.
            await pilot.press("question_mark")
            await d.wait_for(pilot, lambda: type(d.app.screen).__name__ == "HelpScreen")
            await pilot.press("escape")
            await d.wait_for(pilot, lambda: d.app.screen is screen)
            assert screen.query_one(DataTable).row_count == 0
        finally:
            release.set()
        await d.wait_for(pilot, lambda: screen.query_one(DataTable).row_count > 0)


async def test_a_screen_closed_before_its_answer_takes_no_harm(
        make_dashboard: MakeDashboard) -> None:
    d = make_dashboard("busy", at=300)
    async with d.app.run_test(size=(120, 36)) as pilot:
        await start(d, pilot)
        release = hold(d.store.record, "audit")
        try:
            await pilot.press("l")
            await d.wait_for(pilot, lambda: isinstance(d.app.screen, AuditScreen))
            await pilot.press("escape")
            await d.wait_for(pilot, lambda: d.app.screen is d.app.main_screen)
        finally:
            release.set()
        await d.wait_for(pilot, lambda: not [w for w in d.app.workers
                                             if w.group == "audit-load" and w.is_running])
        await pilot.pause()
        assert d.app.is_running and d.app.screen is d.app.main_screen
