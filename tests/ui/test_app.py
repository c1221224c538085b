"""The dashboard driven by keys against the emulator: every key, approvals, screens,
themes, hostile text, and the emulator going away and coming back. Snapshots at the end.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from textual.command import CommandList, CommandPalette
from textual.widgets import Footer, Input, Markdown
from textual.widgets._footer import FooterKey

from setui.store import APPROVE_ATTEMPT, APPROVE_OUTCOME, DISMISSED, REFUSED
from setui.ui.screens.confirm import ConfirmationModal
from setui.ui.screens.details import DetailsScreen
from setui.ui.screens.main import MainScreen
from setui.ui.widgets.summary import EventSummary
from setui.ui.widgets.timeline import Timeline
from tests.support.dashboard import (
    NARROW,
    WIDE,
    Dashboard,
    MakeDashboard,
    event_of,
    open_dialog,
    screen_text,
    select,
    start,
    status,
    table,
)


# -- helpers ----------------------------------------------------------------------------------
def offers(app: Any) -> list[str]:
    """What the open command palette offers now (the first line of each), else nothing."""
    if not isinstance(app.screen, CommandPalette):
        return []
    commands = app.screen.query_one(CommandList)
    return [str(commands.get_option_at_index(i).prompt).splitlines()[0]
            for i in range(commands.option_count)]


def first_offer(app: Any) -> str:
    """The palette's first offer once it has searched (what Enter runs), or ""."""
    found = offers(app)
    return found[0] if found else ""


# -- the main screen ----------------------------------------------------------------------------
async def test_events_most_urgent_first_with_this_vm_marked(make_dashboard: MakeDashboard,
                                                            ) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        t = table(d)
        types = [t.cell_text(k, "type") for k in t.keys]
        # This VM's events first, most urgent first; then the neighbours'.
        assert types == ["Freeze", "Reboot", "Freeze", "Redeploy"]
        first, second, third, fourth = t.keys
        assert t.cell_text(first, "countdown") == "!! T-0:10"
        assert t.cell_text(first, "resources") == "▲ web-0 +1"
        assert t.cell_text(second, "countdown") == "T-5:40"
        assert t.cell_text(second, "source") == "User"
        assert t.cell_text(second, "impact") == "unknown"
        # Another VM's event: no alarm symbol, only the time.
        assert t.cell_text(third, "countdown") == "T-2:30"
        assert t.cell_text(third, "resources") == "web-1"
        assert t.cell_text(fourth, "impact") == "moves host"  # DurationInSeconds 0
        assert t.cell_text(first, "utc") == "10:05:10"
        assert t.cell_text(first, "local") == "11:05:10"
        text = status(d)
        assert "DEMO" in text and "VM web-0" in text and "● live" in text
        assert "incarnation 9" in text and "10:05:00 UTC" in text and "11:05:00 CET" in text
        assert d.app.title.startswith("setui DEMO")


async def test_countdown_ticks_by_updating_cells_not_rebuilding(
        make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        t = table(d)
        await pilot.press("down", "down")
        chosen = t.selected_key
        rebuilds = t.rebuilds
        d.clock.advance(1)
        d.app.main_screen.refresh_view()  # what the 1-second tick does
        await pilot.pause()
        assert t.cell_text(t.keys[0], "countdown") == "!! T-0:09"
        assert t.rebuilds == rebuilds
        assert t.selected_key == chosen


async def test_selection_follows_the_event_when_rows_change(make_dashboard: MakeDashboard,
                                                           ) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        reboot = event_of(d, "Reboot", "web-0")
        await select(d, pilot, reboot)
        # The web-1 Freeze is cancelled at 330 and the web-0 Freeze starts at 310.
        await d.advance(pilot, 40)
        assert table(d).selected_key == reboot.event_id
        assert len(table(d).keys) == 3


async def test_starts_and_disappearances_are_announced_with_the_bell(
        make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        assert d.app.bells == 0  # the first document is not news
        await d.advance(pilot, 40)
        notices = d.notices()
        assert any(n.startswith("Event started: Freeze for this VM") for n in notices)
        assert any(n.startswith("Event cancelled: Freeze for web-1") for n in notices)
        assert d.app.bells >= 1
        bells = d.app.bells
        await d.advance(pilot, 140)  # Host failure Reboot appears at 420; Freeze gone at 375
        assert any(n.startswith("Event completed: Freeze for this VM") for n in d.notices())
        assert any("appeared already started" in n for n in d.notices())
        assert d.app.bells > bells


async def test_no_bell_turns_the_bell_off(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard(bell=False)
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        await d.advance(pilot, 40)
        assert any(n.startswith("Event started") for n in d.notices())
        assert d.app.bells == 0


async def test_empty_document_says_so(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard(at=5)  # the busy scenario's first event comes at 10 s
    async with d.app.run_test(size=NARROW) as pilot:
        await start(d, pilot)
        text = screen_text(d)
        assert "No scheduled events." in text
        assert "Incarnation 1, unchanged since 10:00:05 UTC" in text
        assert not table(d).display


async def test_an_empty_document_is_old_news_while_the_service_does_not_answer(
        make_dashboard: MakeDashboard) -> None:
    """"No scheduled events ... unchanged since" was said while the service was
    unreachable: all that is known then is the last answer, and how old it is."""
    d = make_dashboard(at=5)
    async with d.app.run_test(size=NARROW) as pilot:
        await start(d, pilot)
        d.emulator.stop()
        await d.wait_for(pilot, lambda: "✖ unreachable" in status(d))
        d.app.main_screen.refresh_view()
        await pilot.pause()
        text = " ".join(screen_text(d).split())
        assert "unchanged since" not in text
        assert re.search(r"No scheduled events in the last answer \(incarnation 1, at "
                         r"10:00:05 UTC, [^)]+ old\)\.", text), text
        assert "The service is unreachable now: events may have been scheduled since." in text


async def test_gone_events_stay_greyed_on_the_timeline(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        await d.advance(pilot, 80)  # Freeze web-0 completed at 375, Freeze web-1 cancelled
        timeline = d.app.main_screen.query_one(Timeline).plain()
        assert "completed 10:06" in timeline
        assert "cancelled 10:05" in timeline
        assert [g.fate for g in d.app.session.gone] == ["completed", "cancelled"]


async def test_zoom_keys(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        timeline = d.app.main_screen.query_one(Timeline)
        assert timeline.plain().startswith("zoom -10m…+1h")
        await pilot.press("plus")
        assert timeline.plain().startswith("zoom -5m…+30m")
        await pilot.press("minus", "minus", "minus")
        assert timeline.plain().startswith("zoom -1h…+12h")
        for _ in range(10):
            await pilot.press("minus")
        assert timeline.plain().startswith("zoom -12h…+8d")


async def test_vim_keys_move_the_selection(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        t = table(d)
        await pilot.press("j", "j")
        assert t.cursor_row == 2
        await pilot.press("k")
        assert t.cursor_row == 1
        await pilot.press("G")
        assert t.cursor_row == 3
        await pilot.press("g")
        assert t.cursor_row == 0
        summary = d.app.main_screen.query_one(EventSummary).plain()
        assert summary.startswith("› Freeze  Scheduled  for web-0 (this VM), web-1  source "
                                  "Platform  impact 5 s")


async def test_m_shows_only_this_vm(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        await pilot.press("m")
        t = table(d)
        assert [t.cell_text(k, "type") for k in t.keys] == ["Freeze", "Reboot"]
        assert "this VM only" in status(d)
        await pilot.press("m")
        assert len(t.keys) == 4


async def test_slash_filters_rows(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        await pilot.press("slash")
        box = d.app.main_screen.query_one("#filter", Input)
        assert box.display and box.has_focus
        await pilot.press("d", "b")
        t = table(d)
        assert [t.cell_text(k, "type") for k in t.keys] == ["Redeploy"]
        await pilot.press("enter")
        assert t.has_focus
        assert "filter “db”" in status(d)
        await pilot.press("a")  # keys work again once the filter is entered
        assert isinstance(d.app.screen, ConfirmationModal)
        await pilot.press("n")
        await pilot.press("slash", "backspace", "backspace", "z", "z", "z")
        assert "No events to show: 4 hidden by filter “zzz”" in screen_text(d)
        await pilot.press("escape")
        assert len(t.keys) == 4 and not box.display


async def test_r_polls_now(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard(interval=30.0)
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        before = len(d.gets())
        await pilot.press("r")
        await d.wait_for(pilot, lambda: len(d.gets()) > before)


async def test_q_quits(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        await pilot.press("q")
        await d.wait_for(pilot, lambda: not d.app.is_running)


# -- approvals ----------------------------------------------------------------------------------
async def test_approve_confirmed_posts_once_and_records(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        reboot = event_of(d, "Reboot", "web-0")
        await select(d, pilot, reboot)
        d.app.confirm_guard = 0.0  # real time: the guard has a test of its own
        dialog = await open_dialog(d, pilot)
        text = dialog.plain()
        assert "lets Azure start this now instead of waiting for NotBefore" in text
        assert "web-0 (this VM)" in text
        assert "oncall from 10.0.0.5 on vm-web-0" in text
        assert "WARNING" not in text  # only this VM is affected
        await pilot.press("y")
        await d.wait_for(pilot, lambda: reboot.event_id in d.app.session.approvals
                       and not d.app.session.approvals[reboot.event_id].pending)
        posts = d.posts()
        assert len(posts) == 1
        assert json.loads(posts[0].body) == {"StartRequests": [{"EventId": reboot.event_id}]}
        assert posts[0].headers["metadata"] == "true"
        assert d.audit_actions() == [APPROVE_ATTEMPT, APPROVE_OUTCOME]
        outcome = d.store.audit_log.records()[0] if d.store else None
        assert outcome is not None and outcome.status == 200 and outcome.user == "oncall"
        await pilot.pause()
        assert table(d).cell_text(reboot.event_id, "approved") == "10:05:00 by oncall"
        assert "approved 10:05:00 by oncall" in d.app.main_screen.query_one(
            EventSummary).plain()
        assert any(n.startswith("Approved: The service answered HTTP 200")
                   for n in d.notices())


async def test_other_vms_warn_and_need_yes_typed(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=NARROW) as pilot:
        await start(d, pilot)
        freeze = event_of(d, "Freeze", "web-0", "web-1")
        await select(d, pilot, freeze)
        d.app.confirm_guard = 0.0  # real time: the guard has a test of its own
        dialog = await open_dialog(d, pilot)
        text = dialog.plain()
        assert "WARNING: this also starts it for 1 other VM: web-1" in text
        assert "type  yes  then  Enter  approve" in text
        assert dialog.has_class("loud")
        await pilot.press("enter", "y", "enter", "n")  # "y" alone is not "yes"
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, MainScreen))
        await d.wait_for(pilot, lambda: d.audit_actions() == [DISMISSED])
        assert d.posts() == []
        dialog = await open_dialog(d, pilot)
        await pilot.press("y", "e", "s", "enter")
        await d.wait_for(pilot, lambda: len(d.posts()) == 1)
        await d.wait_for(pilot, lambda: d.audit_actions() == [DISMISSED, APPROVE_ATTEMPT,
                                                              APPROVE_OUTCOME])
        await pilot.pause()
        assert table(d).cell_text(freeze.event_id, "approved") == "✓ 10:05:00"


async def test_approve_cancelled_sends_nothing_and_records_the_cancel(
        make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        await select(d, pilot, event_of(d, "Reboot", "web-0"))
        d.app.confirm_guard = 0.0  # real time: the guard has a test of its own
        await open_dialog(d, pilot)
        await pilot.press("n")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, MainScreen))
        await open_dialog(d, pilot)
        await pilot.press("escape")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, MainScreen))
        await d.wait_for(pilot, lambda: d.audit_actions() == [DISMISSED, DISMISSED]
                         and any("nothing was sent" in n for n in d.notices()))
        assert d.posts() == []


async def test_only_y_after_the_guard_approves(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        await select(d, pilot, event_of(d, "Reboot", "web-0"))
        # A guard no test machine can outrun: y and Enter inside it are typed ahead or a
        # held key, never a decision.
        d.app.confirm_guard = 60.0
        dialog = await open_dialog(d, pilot)
        assert "Keys pressed in the first 60 s are ignored" in str(
            dialog.query_one("#dialog-note").render())
        await pilot.press("y", "y")
        assert dialog.ignored == 2
        assert d.app.screen is dialog
        assert "was ignored: press it again if you mean it" in str(
            dialog.query_one("#dialog-note").render())
        await pilot.press("n")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, MainScreen))
        # No guard at all: still, no key but y approves (Enter is the dashboard's Details).
        d.app.confirm_guard = 0.0
        dialog = await open_dialog(d, pilot)
        await pilot.press("x", "a", "space", "Y", "j", "tab", "1", "enter")
        assert d.app.screen is dialog
        await pilot.press("n")
        await d.wait_for(pilot, lambda: d.audit_actions() == [DISMISSED, DISMISSED])
        assert d.posts() == []


async def test_approving_a_started_event_is_refused(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        await d.advance(pilot, 20)  # the web-0 Freeze started at 310
        freeze = event_of(d, "Freeze", "web-0", "web-1")
        assert freeze.is_started
        await select(d, pilot, freeze)
        assert table(d).cell_text(freeze.event_id, "countdown") == "▶ started 0:10 ago"
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(d.app.screen, MainScreen)  # no dialog
        assert d.posts() == []
        assert d.audit_actions() == [REFUSED]
        assert any("Not approved: " in n and "has already started" in n for n in d.notices())


async def test_an_event_that_left_while_the_dialog_was_open_is_refused(
        make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        cancelled = event_of(d, "Freeze", "web-1")  # cancelled by Azure at 330
        await select(d, pilot, cancelled)
        dialog = await open_dialog(d, pilot)
        await d.advance(pilot, 40)
        # The open dialog follows the event: it says that approving would be refused.
        await d.wait_for(pilot, lambda: "is no longer in the document" in dialog.plain())
        await pilot.press("y", "e", "s", "enter")  # it did not list web-0: "yes" typed
        await d.wait_for(pilot, lambda: REFUSED in d.audit_actions())
        assert d.posts() == []
        assert any("is not in the current document" in n for n in d.notices())


async def test_read_only_has_no_approve_key(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard(read_only=True)
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        assert "READ-ONLY" in status(d)
        footer = d.app.main_screen.query_one(Footer)
        assert "Approve" not in [k.description for k in footer.query(FooterKey)]
        await pilot.press("a", "a", "a")
        await pilot.pause()
        assert isinstance(d.app.screen, MainScreen)
        assert d.posts() == []
        said = [n for n in d.notices() if "Approvals are off" in n]
        assert len(said) == 1 and "--read-only" in said[0]  # said once, and why
        assert d.audit_actions() == []  # nothing was attempted: nothing to record
        await pilot.press("question_mark")
        await pilot.pause()
        help_text = str(d.app.screen.query_one("#help-body", Markdown).source)  # type: ignore[attr-defined]
        assert "| `a` |" not in help_text and "Approvals are off" in help_text


async def test_without_an_audit_log_approval_is_refused(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard(store=False)
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        assert "history NOT recorded: the test has no store" in status(d)
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(d.app.screen, MainScreen)
        assert d.posts() == []
        assert any("audit log cannot be written" in n for n in d.notices())


async def test_standalone_it_says_so_and_why_once_and_polls_as_ever(
        make_dashboard: MakeDashboard) -> None:
    """No agent answered at the socket (setui.api.attach said why): the status line says
    "standalone" beside whose history it is, the reason is said once, and it polls."""
    d = make_dashboard()
    d.app.standalone = "standalone: no agent at /run/setui/api.sock"
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        await d.advance(pilot, 10)
        assert "standalone  ·  history: only while open" in status(d)
        assert [n for n in d.notices() if "agent" in n] == [
            "Standalone: no agent at /run/setui/api.sock; this dashboard polls IMDS itself."]
        assert len(d.gets()) >= 2
    told = make_dashboard()
    told.app.standalone = ""  # --standalone: asked for, nothing to explain
    async with told.app.run_test(size=WIDE) as pilot:
        await start(told, pilot)
        assert "standalone" in status(told)
        assert not [n for n in told.notices() if "agent" in n]


async def test_over_the_agents_store_it_reads_records_nothing_and_says_why_it_approves_nothing(
        make_dashboard: MakeDashboard) -> None:
    """A member of group setui without the agent's socket: the store is the agent's to
    write; the dashboard reads it, records nothing beside it, and refuses in its words."""
    d = make_dashboard(store="read-only")
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        await d.advance(pilot, 20)
        assert "history: the agent's, read-only" in status(d)
        assert "NOT recorded" not in status(d)
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(d.app.screen, MainScreen)
        assert d.posts() == []
        assert any("this is the agent's store" in n and "approve through the agent" in n
                   for n in d.notices())
    assert d.store is not None and d.store.history.incarnations(limit=None) == []
    assert d.audit_actions() == []


async def test_a_store_that_fails_is_shown_and_events_stay_live(
        make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=NARROW) as pilot:
        await start(d, pilot)
        assert d.store is not None
        d.store.close()
        await d.advance(pilot, 40)
        # The reason fits 80 columns: the file, not its whole path, and no preamble.
        assert "history NOT recorded: the store …/setui.db is closed" in status(d)
        assert len(table(d).keys) == 3  # still live
        assert any(n.startswith("None: Cannot record the history") or
                   "Cannot record the history" in n for n in d.notices())


# -- other screens ------------------------------------------------------------------------------
async def test_details_with_raw_json(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=NARROW) as pilot:
        await start(d, pilot)
        freeze = event_of(d, "Freeze", "web-0", "web-1")
        await select(d, pilot, freeze)
        await pilot.press("enter")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, DetailsScreen))
        body = str(d.app.screen.query_one("#details-body").render())
        assert freeze.event_id in body
        assert "web-0  ◀ this VM" in body
        assert "in the first document setui saw (incarnation 9)" in body
        assert "DurationInSeconds" in body and "→ impact 5 s" in body
        await pilot.press("r")
        raw = str(d.app.screen.query_one("#details-body").render())
        assert '"EventId": "' + freeze.event_id + '"' in raw
        await pilot.press("escape")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, MainScreen))
        await pilot.press("d")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, DetailsScreen))
        await pilot.press("escape")


async def test_history_navigation(make_dashboard: MakeDashboard) -> None:
    from setui.ui.screens.history import HistoryScreen, IncarnationScreen

    d = make_dashboard()
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        await d.advance(pilot, 40)
        await pilot.press("h")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, HistoryScreen))
        history = d.app.screen
        assert isinstance(history, HistoryScreen)
        assert [r.incarnation for r in history.records][:2] == [11, 10]  # type: ignore[attr-defined]
        await pilot.press("j")
        await pilot.press("enter")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, IncarnationScreen))
        assert d.app.screen.record.incarnation == 10  # type: ignore[attr-defined]
        await pilot.press("escape")
        await d.wait_for(pilot, lambda: d.app.screen is history)
        await pilot.press("escape")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, MainScreen))


async def test_audit_log_screen(make_dashboard: MakeDashboard) -> None:
    from setui.ui.screens.audit import AuditScreen

    d = make_dashboard()
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        await open_dialog(d, pilot)
        await pilot.press("n")
        await pilot.press("l")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, AuditScreen))
        await pilot.press("escape")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, MainScreen))


async def test_command_palette_offers_the_actions(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        titles = [c.title for c in d.app.get_system_commands(
            d.app.main_screen)]  # type: ignore[arg-type]  # a Screen[None] for a Screen[object]
        for title in ("Theme", "Approve the selected event", "History", "Audit log",
                      "Poll now", "Filter events", "This VM only", "Help", "Quit"):
            assert title in titles
        # The palette's approve still asks: it opens the dialog, nothing more.
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"approve the selected")
        await d.wait_for(pilot, lambda: first_offer(d.app).startswith("Approve the selected"))
        await pilot.press("enter")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, ConfirmationModal))
        await pilot.press("n")
        assert d.posts() == []


async def test_theme_switch_from_the_palette(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        assert d.app.theme == "setui-dark"
        dark = d.app.palette
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"theme")
        await d.wait_for(pilot, lambda: first_offer(d.app).startswith("Theme"))
        await pilot.press("enter")
        # The theme search offers setui's themes, not Textual's twenty.
        await d.wait_for(pilot, lambda: first_offer(d.app).startswith("setui-"))
        offered = offers(d.app)
        assert all(name.startswith("setui-") for name in offered), offered
        assert "nord" not in " ".join(offered)
        await pilot.press(*"setui-light")
        await d.wait_for(pilot, lambda: first_offer(d.app) == "setui-light")
        await pilot.press("enter")
        await d.wait_for(pilot, lambda: d.app.theme == "setui-light")
        await pilot.pause()
        assert d.app.palette != dark


async def test_theme_option_and_unknown_theme(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard(theme="setui-mono")
    async with d.app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        assert d.app.theme == "setui-mono"
    d = make_dashboard(theme="no-such-theme")
    async with d.app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        assert d.app.theme == "setui-dark"
        assert any("'no-such-theme' is not known" in n for n in d.notices())


async def test_no_color_picks_the_mono_theme(make_dashboard: MakeDashboard,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    d = make_dashboard()
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        assert d.app.theme == "setui-mono"
        # Urgency still reads: the symbols are in the text.
        assert table(d).cell_text(table(d).keys[0], "countdown") == "!! T-0:10"


@pytest.mark.parametrize(("value", "theme"), [("", "setui-dark"), ("0", "setui-mono")])
async def test_no_color_counts_when_set_and_not_empty(
        make_dashboard: MakeDashboard, monkeypatch: pytest.MonkeyPatch, value: str,
        theme: str) -> None:
    monkeypatch.setenv("NO_COLOR", value)  # no-color.org: any value but the empty one
    d = make_dashboard()
    async with d.app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        assert d.app.theme == theme


async def test_a_chosen_theme_wins_over_no_color(make_dashboard: MakeDashboard,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")  # user configuration overrides it, per no-color.org
    d = make_dashboard(theme="setui-light")
    async with d.app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        assert d.app.theme == "setui-light"


# -- hostile text -------------------------------------------------------------------------------
HOSTILE_DESCRIPTION = ("[bold red]x[/] [link=http://e]y[/link] \x1b[31mred "
                       "\x1b]8;;http://e\x07link")


async def test_markup_and_escapes_from_the_network_are_shown_literally(
        make_dashboard: MakeDashboard, write_scenario: Any) -> None:
    scenario = write_scenario("hostile", {
        "vm_name": "web-0",
        "events": [{
            "type": "Reboot", "at": 0, "notice": "10m", "duration": 5,
            "id": "[b]ID[/b]\x1b[2J",
            "resources": ["web-0", "[red]evil[/red]\x1b[1A"],
            "description": HOSTILE_DESCRIPTION,
        }, {
            "type": "Hibernate[/]\x1b[5m", "at": 0, "notice": "20m", "resources": ["web-0"],
        }],
    })
    d = make_dashboard(scenario, at=30)
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        summary = d.app.main_screen.query_one(EventSummary).plain()
        assert "“[bold red]x[/] [link=http://e]y[/link] \\x1b[31mred \\x1b]8;;" in summary
        assert "[red]evil[/red]\\x1b[1A" in summary
        text = screen_text(d)
        assert "[bold red]x[/]" in text
        assert "\x1b" not in text and "\x07" not in text
        t = table(d)
        assert t.cell_text(t.keys[1], "type") == "Hibernate[/…"
        await pilot.press("enter")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, DetailsScreen))
        body = str(d.app.screen.query_one("#details-body").render())
        assert "[b]ID[/b]\\x1b[2J" in body
        assert HOSTILE_DESCRIPTION.replace("\x1b", "\\x1b").replace("\x07", "\\x07") in body
        assert "\x1b" not in body
        await pilot.press("escape")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, MainScreen))
        dialog = await open_dialog(d, pilot)
        body = dialog.plain()
        assert "[bold red]x[/]" in body and "\x1b" not in body
        assert "WARNING: this also starts it for 1 other VM: [red]evil[/red]\\x1b[1A" in body
        await pilot.press("n")


# -- the connection -----------------------------------------------------------------------------
async def test_survives_the_emulator_going_away_and_coming_back(
        make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        d.emulator.stop()
        await d.wait_for(pilot, lambda: "✖ unreachable" in status(d))
        text = status(d)
        assert "connection refused" in text
        assert "showing the last answer" in text
        assert len(table(d).keys) == 4  # the last known events stay on screen
        assert any(n.startswith("Connection unreachable") for n in d.notices())
        d.emulator.restart()
        await pilot.press("r")  # do not wait for the backoff
        await d.wait_for(pilot, lambda: "● live" in status(d))
        assert any(n.startswith("Connection live") for n in d.notices())


async def test_enabling_is_shown_before_the_first_answer(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard(poll=False, vm_name="web-0")
    async with d.app.run_test(size=NARROW) as pilot:
        await pilot.pause()
        assert "◌ enabling: first call" in status(d)
        assert "Waiting for the first answer" in screen_text(d)


# -- snapshots ----------------------------------------------------------------------------------
def _snapshot_app(make_dashboard: MakeDashboard, **config: Any) -> tuple[Dashboard, Any]:
    """The busy scenario from 200 s to 440 s: current, started, completed, cancelled."""
    d = make_dashboard(at=200, shown_endpoint=True, **config)

    async def run_before(pilot: Any) -> None:
        await start(d, pilot)
        await d.advance(pilot, 240, step=20)
        d.app.clear_notifications()
        await pilot.pause()

    return d, run_before


@pytest.mark.parametrize("size", [WIDE, NARROW, (60, 20), (200, 60)],
                         ids=["120x36", "80x24", "60x20", "200x60"])
def test_snapshot_main(make_dashboard: MakeDashboard, snap_compare: Any,
                       size: tuple[int, int]) -> None:
    d, run_before = _snapshot_app(make_dashboard)
    assert snap_compare(d.app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("theme", ["setui-light", "setui-mono", "setui-amber"])
def test_snapshot_main_in_each_theme(make_dashboard: MakeDashboard, snap_compare: Any,
                                     theme: str) -> None:
    d, run_before = _snapshot_app(make_dashboard, theme=theme)
    assert snap_compare(d.app, terminal_size=NARROW, run_before=run_before)


@pytest.mark.parametrize("size", [WIDE, NARROW], ids=["120x36", "80x24"])
def test_snapshot_approve_dialog(make_dashboard: MakeDashboard, snap_compare: Any,
                                 size: tuple[int, int]) -> None:
    d, advance = _snapshot_app(make_dashboard)

    async def run_before(pilot: Any) -> None:
        await advance(pilot)
        await select(d, pilot, event_of(d, "Reboot", "web-0"))
        await open_dialog(d, pilot)

    assert snap_compare(d.app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", [WIDE, NARROW], ids=["120x36", "80x24"])
def test_snapshot_history(make_dashboard: MakeDashboard, snap_compare: Any,
                          size: tuple[int, int]) -> None:
    d, advance = _snapshot_app(make_dashboard)

    async def run_before(pilot: Any) -> None:
        await advance(pilot)
        await pilot.press("h")
        await pilot.pause()

    assert snap_compare(d.app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", [NARROW, (60, 20)], ids=["80x24", "60x20"])
def test_snapshot_notices(make_dashboard: MakeDashboard, snap_compare: Any,
                          size: tuple[int, int]) -> None:
    """The notice line above the keys: a loud one and a long one, the dashboard moved up
    to make room, nothing drawn over it."""
    d, advance = _snapshot_app(make_dashboard)

    async def run_before(pilot: Any) -> None:
        await advance(pilot)
        d.app.notify("Reboot for this VM has started.", title="Event started",
                     severity="error", timeout=600, markup=False)
        d.app.notify("Incarnation 14, 4 events (2 for this VM): nothing new. The service "
                     "answered in 3 ms; the next poll is in 1 s.",
                     title="Poll: the service answered", timeout=600, markup=False)
        await pilot.pause()
        await pilot.pause()

    assert snap_compare(d.app, terminal_size=size, run_before=run_before)
