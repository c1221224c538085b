"""The human's window onto the agent: the dashboard shows what it plans and does for the
selected event, and H holds (and releases) its automation, audit-logged."""

from __future__ import annotations

from datetime import timedelta

from setui.store.agent import HOLD, RELEASE, AgentLog
from setui.ui.widgets.summary import EventSummary
from tests.support.dashboard import WIDE, MakeDashboard, start, table


async def test_the_summary_shows_the_agents_plan_and_h_holds_it(
        make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    assert d.store is not None
    log = AgentLog(d.store, d.app.config.endpoint)
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        selected = table(d).selected_key
        assert selected is not None
        summary = d.app.main_screen.query_one(EventSummary)
        assert "agent:" not in summary.plain()  # no agent has touched it: nothing shown
        now = d.now()
        log.set_step(selected, "match", rule="drain", state="done", at=now,
                     detail="prepare 'drain', approve after prepare")
        log.set_step(selected, "prepare", rule="drain", state="running", at=now,
                     detail="prepare 'drain'", started=now - timedelta(seconds=12))
        await d.wait_for(pilot, lambda: "agent: rule drain: prepare 'drain' running 0:12, "
                         "approve after prepare" in summary.plain())
        await pilot.press("H")
        await d.wait_for(pilot, lambda: log.held([selected]) == {selected})
        await d.wait_for(pilot, lambda: "HELD" in summary.plain())
        await pilot.press("H")
        await d.wait_for(pilot, lambda: log.held([selected]) == set())
        await d.wait_for(pilot, lambda: "HELD" not in summary.plain())
    records = [r for r in d.store.audit_log.records(oldest_first=True)
               if r.action in (HOLD, RELEASE)]
    assert [r.action for r in records] == [HOLD, RELEASE]
    assert all(r.user == "oncall" and r.event_id == selected for r in records)
    assert records[0].event is not None and records[0].incarnation is not None
