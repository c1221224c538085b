"""The pane under the timeline (the agent's plan, then what just happened), its whole
view on ``w``, the keys of each mode on the bar, and the words of the agent's steps.

The attached layout is drawn here from a fixed plan (the real agent's is in
tests/api/test_dashboard_attached.py), so its snapshots are the same on every run."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from setui.agent.plan import event_plan, not_early, plan_text, step_words
from setui.core.model import parse_document
from setui.core.tracker import Tracker
from setui.store.agent import HOLD, RELEASE
from setui.store.records import Step
from setui.ui.agentwindow import due_while_held
from setui.ui.changelog import ChangeLog, Hold
from setui.ui.compat import FooterKey
from setui.ui.format import Palette
from setui.ui.host import PlannedEvent, WindowView
from setui.ui.screens.window import WindowScreen
from setui.ui.widgets.window import WindowPane, pane_lines
from tests.support.dashboard import NARROW, WIDE, Dashboard, MakeDashboard, screen_text, start

T = datetime(2026, 11, 24, 10, 0, tzinfo=timezone.utc)
REFUSED = ("refused: it also starts for 1 other VM: web-1; approving it needs other_vms = "
           "true in the rule (rule drain does not say it)")


def keys(d: Dashboard) -> list[str]:
    return [f"{k.key_display} {k.description}" for k in d.app.screen.query(FooterKey)]


def pane(d: Dashboard) -> str:
    return d.app.main_screen.query_one(WindowPane).plain()


# -- the words of the steps -------------------------------------------------------------------
def test_a_refused_early_approval_is_said_as_what_it_means() -> None:
    assert not_early(REFUSED) == ("not approved early: it also starts for web-1 "
                                  "(other_vms is not set)")
    approve = Step("E", "approve", "drain", "failed", REFUSED, None, T)
    assert step_words("approve", "approve after prepare", approve, T) == (
        "not approved early: it also starts for web-1 (other_vms is not set)")
    # Any other refusal is not this one, and a real failure stays a failure.
    assert not_early("refused: the audit log cannot be written") is None
    failed = Step("E", "approve", "drain", "failed", "failed: HTTP 500", None, T)
    assert step_words("approve", "approve", failed, T) == "approval failed: failed: HTTP 500"


@pytest.mark.parametrize(("step", "state", "detail", "words"), [
    ("prepare", "running", "prepare 'drain'", "prepare 'drain' running 0:12"),
    ("prepare", "done", "prepare 'drain' exited 0", "prepare 'drain' exited 0"),
    ("prepare", "failed", "prepare 'drain' exited 1",
     "prepare 'drain' exited 1; not approved: the platform starts the event at NotBefore"),
    ("approve", "running", "approve", "approving now 0:12"),
    ("approve", "done", "approved: the service answered HTTP 200 in 3 ms",
     "approved: the service answered HTTP 200 in 3 ms"),
    ("approve", "unknown", "unknown: the connection dropped",
     "approval outcome unknown (the request may have arrived): unknown: the connection "
     "dropped"),
    ("approve", "skipped", "prepare failed: no approval",
     "not approved early: prepare failed: no approval"),
    ("approve", "waiting", "waiting: 1 of 1 in ss-web busy",
     "approve waiting: 1 of 1 in ss-web busy"),
])
def test_every_step_state_in_words(step: str, state: str, detail: str, words: str) -> None:
    row = Step("E", step, "drain", state, detail, T - timedelta(seconds=12), T)
    assert step_words(step, f"{step} 'drain'" if step != "approve" else "approve", row,
                      T) == words


def test_the_plan_line_says_not_approved_early() -> None:
    steps = [Step("E", "match", "drain", "done", "prepare 'drain', approve after prepare",
                  None, T),
             Step("E", "prepare", "drain", "done", "prepare 'drain' exited 0", T, T),
             Step("E", "approve", "drain", "failed", REFUSED, None, T)]
    assert plan_text(steps, now=T) == (
        "rule drain: prepare 'drain' exited 0, not approved early: it also starts for web-1 "
        "(other_vms is not set)")


def test_a_held_event_past_its_approve_time_says_it_is_due_and_who_holds_it() -> None:
    document = parse_document({"DocumentIncarnation": 1, "Events": [{
        "EventId": "E", "EventType": "Reboot", "ResourceType": "VirtualMachine",
        "Resources": ["web-0"], "EventStatus": "Scheduled",
        "NotBefore": "Tue, 24 Nov 2026 10:01:00 GMT"}]})
    event = document.events[0]
    plan = event_plan([Step("E", "match", "late", "done", "approve 120 s before NotBefore",
                            None, T)], now=T)
    assert plan is not None
    early = due_while_held(plan, event, T - timedelta(seconds=61), Hold("alice", T))
    assert early.steps[0].words == "approve 120 s before NotBefore"
    due = due_while_held(plan, event, T, Hold("alice", T - timedelta(seconds=30)))
    assert due.steps[0].words == "approve due, held by alice since 09:59:30 UTC"


# -- the change log ---------------------------------------------------------------------------
def test_the_log_takes_changes_steps_and_the_audit_log_newest_first() -> None:
    log = ChangeLog()
    tracker = Tracker()
    one = parse_document({"DocumentIncarnation": 1, "Events": []})
    two = parse_document({"DocumentIncarnation": 2, "Events": [{
        "EventId": "F020BA2E-3BC0", "EventType": "Freeze", "ResourceType": "VirtualMachine",
        "Resources": ["web-0"], "EventStatus": "Scheduled",
        "NotBefore": "Tue, 24 Nov 2026 10:01:00 GMT"}]})
    log.took(tracker.update(one, T - timedelta(seconds=5)), "web-0")
    log.took(tracker.update(two, T), "web-0")

    def name(event_id: str) -> tuple[str, bool]:
        return f"Freeze {event_id[:8]}", True

    log.planned([Step("F020BA2E-3BC0", "prepare", "drain", "done",
                      "prepare 'drain' exited 0", T, T + timedelta(seconds=2))], T, name)
    from setui.store.records import AuditRecord

    def record(seq: int, action: str, at: datetime) -> AuditRecord:
        return AuditRecord(seq, action, at, "alice\x1b[31m", "vm", "e", None, "F020BA2E-3BC0",
                           None, None, None, None, None, None, {}, "", "")

    log.audited([record(7, HOLD, T + timedelta(seconds=3)),
                 record(8, RELEASE, T + timedelta(seconds=4))], name)
    log.audited([record(7, HOLD, T + timedelta(seconds=3))], name)  # once only
    said = [(e.what, e.text) for e in log.entries()]
    assert [w for w, _ in said] == ["released", "held", "prepare", "short notice",
                                    "appeared"]
    assert "\x1b" not in " ".join(t for _, t in said)  # the user's name made printable
    assert said[2][1] == "rule drain: prepare 'drain' exited 0"
    assert said[3][1].startswith("1m 00s: LESS than the 15m 00s documented")
    assert log.holds == {}


# -- the dashboard ------------------------------------------------------------------------------
async def test_standalone_the_pane_is_the_change_log_and_w_shows_it_whole(
        make_dashboard: MakeDashboard) -> None:
    d = make_dashboard(at=200)
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        await d.advance(pilot, 240, step=20)
        await d.wait_for(pilot, lambda: "completed" in pane(d))
        text = pane(d)
        assert "The agent's plan" not in text
        assert text.splitlines()[0] == "What just happened, newest first"
        assert "appeared at start" in text and "started" in text
        # Newest first.
        assert text.index("completed") < text.index("appeared at start")
        shown = keys(d)
        assert "w Log" in shown and not any("Hold" in k for k in shown), shown
        await pilot.press("w")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, WindowScreen))
        whole = d.app.screen.plain()  # type: ignore[attr-defined]  # Textual's Screen[object]
        assert len(whole.splitlines()) >= len(d.app.change_log) + 1
        await pilot.press("escape")
        await d.wait_for(pilot, lambda: d.app.screen is d.app.main_screen)


def attached_view(d: Dashboard) -> WindowView:
    """A fixed plan, as the agent's pushes would give it: the dashboard drawn attached."""
    document = d.app.session.document
    assert document is not None
    now = d.app.now()
    plans = []
    for i, event in enumerate(document.events[:3]):
        steps = [Step(event.event_id, "match", "drain", "done",
                      "prepare 'drain', approve after prepare, recover 'undrain'", None, now),
                 Step(event.event_id, "prepare", "drain", "done", "prepare 'drain' exited 0",
                      now, now)]
        if i == 0:
            steps.append(Step(event.event_id, "approve", "drain", "failed", REFUSED, None,
                              now))
        plan = event_plan(steps, now=now)
        held = i == 1
        plans.append(PlannedEvent(event.event_id, f"{event.event_type.value} "
                                  f"{event.event_id[:8]}", event.affects("web-0"), plan, held,
                                  Hold("alice", now) if held else None))
    return WindowView(attached=True, plans=tuple(plans), log=d.app.change_log)


def _attached_snapshot_app(make_dashboard: MakeDashboard) -> tuple[Dashboard, Any]:
    d = make_dashboard(at=200, shown_endpoint=True)

    async def run_before(pilot: Any) -> None:
        await start(d, pilot)
        await d.advance(pilot, 240, step=20)
        view = attached_view(d)
        d.app.window = lambda: view  # type: ignore[method-assign]
        d.app.main_screen.attached = True
        d.app.main_screen.refresh_bindings()
        d.app.clear_notifications()
        d.app.main_screen.refresh_view()
        await pilot.pause()
        await pilot.pause()

    return d, run_before


@pytest.mark.parametrize("size", [WIDE, NARROW, (60, 20)], ids=["120x36", "80x24", "60x20"])
async def test_attached_the_bar_has_the_hold_key_and_the_pane_the_plan(
        make_dashboard: MakeDashboard, size: tuple[int, int]) -> None:
    d, run_before = _attached_snapshot_app(make_dashboard)
    async with d.app.run_test(size=size) as pilot:
        await run_before(pilot)
        shown = keys(d)
        for key in ("a Approve", "H Hold agent", "w Plan+log", "? Help", "q Quit"):
            assert key in shown, shown
        text = pane(d)
        assert text.startswith("The agent's plan")
        assert "not approved early: it also starts for web-1" in text
        if size != (60, 20):  # there, the plan's first line is all that fits
            assert "What just happened" in text
        assert "failed" not in screen_text(d).split("The agent's plan")[1]


@pytest.mark.parametrize("size", [WIDE, NARROW, (60, 20)], ids=["120x36", "80x24", "60x20"])
def test_snapshot_attached_pane(make_dashboard: MakeDashboard, snap_compare: Any,
                                size: tuple[int, int]) -> None:
    d, run_before = _attached_snapshot_app(make_dashboard)
    assert snap_compare(d.app, terminal_size=size, run_before=run_before)


def test_the_pane_folds_to_the_lines_it_has() -> None:
    log = ChangeLog()
    for i in range(10):
        log.add(T + timedelta(seconds=i), "appeared", f"Reboot {i:08d}", "this VM")
    steps = [Step("E", "match", "drain", "done", "prepare 'drain', approve after prepare",
                  None, T)]
    plan = event_plan(steps, now=T)
    plans = tuple(PlannedEvent(f"E{i}", f"Reboot {i:08d}", True, plan) for i in range(4))
    view = WindowView(attached=True, plans=plans, log=log)
    palette = Palette()
    whole = [t.plain for t in pane_lines(view, T, palette, 20, 100)]
    assert whole[0] == "The agent's plan" and whole[2] == "  · prepare 'drain'"
    folded = [t.plain for t in pane_lines(view, T, palette, 8, 100)]
    assert folded[0] == "The agent's plan  w shows it whole"
    assert folded[1].startswith("Reboot 00000000 (this VM)  rule drain: prepare 'drain', ")
    assert folded[5].startswith("What just happened, newest first  10 in all: w")
    assert folded[6].startswith("10:00:09")
    short = [t.plain for t in pane_lines(view, T, palette, 4, 60)]
    assert short[0] == "The agent's plan  3 more, w shows all" and len(short) == 4


def test_a_stall_the_agent_measured_is_logged_once() -> None:
    from setui.core.impact import Impact

    log = ChangeLog()
    stall = Impact("stall", T, 4.8, event_id="F020BA2E-3BC0", event_type="Freeze",
                   announced=5, tie="started")
    log.measured([stall], lambda event_id: (f"Freeze {event_id[:8]}", True))
    log.measured([stall], lambda event_id: (f"Freeze {event_id[:8]}", True))
    [entry] = log.entries()
    assert (entry.what, entry.name, entry.mine) == ("measured", "Freeze F020BA2E", True)
    assert "the VM was paused 4.8s" in entry.text, entry.text


def test_the_log_in_the_pane_scrolls_past_its_newest_entries() -> None:
    log = ChangeLog()
    for i in range(10):
        log.add(T + timedelta(seconds=i), "appeared", f"Reboot {i:08d}", "this VM")
    view = WindowView(attached=False, plans=(), log=log)
    lines = [t.plain for t in pane_lines(view, T, Palette(), 4, 100, skip=2)]
    assert lines[0] == "What just happened, newest first  2 newer above (scroll up); 10 in all: w"
    assert [line[:8] for line in lines[1:]] == ["10:00:07", "10:00:06", "10:00:05"]
    # No further than the oldest entry at the bottom.
    last = [t.plain for t in pane_lines(view, T, Palette(), 4, 100, skip=50)]
    assert last[-1].startswith("10:00:00") and "7 newer above" in last[0]


async def test_the_mouse_wheel_over_the_pane_scrolls_the_log(
        make_dashboard: MakeDashboard) -> None:
    from textual.events import MouseScrollDown, MouseScrollUp

    d = make_dashboard(at=200)
    async with d.app.run_test(size=NARROW) as pilot:
        await start(d, pilot)
        await d.advance(pilot, 240, step=20)
        widget = d.app.main_screen.query_one(WindowPane)
        await d.wait_for(pilot, lambda: "in all: w" in pane(d))
        newest = pane(d).splitlines()[1]
        for _ in range(3):
            widget.post_message(MouseScrollDown(widget, 1, 1, 0, 0, 0, False, False, False))
        await d.wait_for(pilot, lambda: "3 newer above" in pane(d))
        assert newest not in pane(d)
        for _ in range(5):
            widget.post_message(MouseScrollUp(widget, 1, 1, 0, 0, 0, False, False, False))
        await d.wait_for(pilot, lambda: "newer above" not in pane(d))
        assert pane(d).splitlines()[1] == newest
