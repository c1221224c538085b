"""The approval dialog and an approval in flight, through Pilot against the emulator:
what was shown is what is approved, nothing hides the dialog, keys cannot approve by
accident, and an approval that keeps failing is visible, bounded and never lost."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from textual import events
from textual.widgets import Static

from setui.core.backoff import Backoff
from setui.core.client import ImdsClient
from setui.emulator.faults import Faults
from setui.settings.config import Config
from setui.store import APPROVE_ATTEMPT, APPROVE_OUTCOME, DISMISSED, REFUSED, Store
from setui.ui.app import SetuiApp
from setui.ui.screens.confirm import ConfirmationModal
from setui.ui.screens.main import MainScreen
from setui.ui.widgets.summary import EventSummary
from tests.support.dashboard import (
    IDENTITY,
    NARROW,
    Dashboard,
    MakeDashboard,
    open_dialog,
    screen_text,
    select,
    start,
    table,
)
from tests.support.scripted import Answer, Drop, ScriptedImds
from tests.support.scripted import document as scripted_document
from tests.support.scripted import event as scripted_event

MINE = "F02C2EDE-3B1C-4D5E-9F00-0123456789AB"
NOT_BEFORE = "Sun, 22 Nov 2026 11:00:00 GMT"  # an hour after the dashboard's clock


def event(resources: list[str], *, kind: str = "Freeze", status: str = "Scheduled",
          event_id: str = MINE, not_before: str = NOT_BEFORE) -> dict[str, Any]:
    return {"EventId": event_id, "EventType": kind, "ResourceType": "VirtualMachine",
            "Resources": resources, "EventStatus": status,
            "NotBefore": not_before if status == "Scheduled" else "",
            "Description": "maintenance", "EventSource": "Platform", "DurationInSeconds": 5}


def pinned(d: Any, incarnation: int, *events_: dict[str, Any]) -> None:
    d.emulator.pin_document({"DocumentIncarnation": incarnation, "Events": list(events_)})


async def ready(d: Any, pilot: Any, incarnation: int) -> None:
    await start(d, pilot)
    await d.wait_for(pilot, lambda: d.app.session.document is not None
                     and d.app.session.document.incarnation == incarnation)
    await select(d, pilot, d.app.session.document.events[0])
    d.app.confirm_guard = 0.0  # real time: the guard has a test of its own


def dialog_of(d: Any) -> ConfirmationModal | None:
    screen = d.app.screen
    return screen if isinstance(screen, ConfirmationModal) else None


async def asked_again(d: Any, pilot: Any, first: ConfirmationModal) -> ConfirmationModal:
    """The dialog opened again after ``first`` was answered."""
    await d.wait_for(pilot, lambda: dialog_of(d) is not None and dialog_of(d) is not first)
    again = dialog_of(d)
    assert again is not None
    return again


async def test_a_change_under_the_open_dialog_is_never_posted(
        make_dashboard: MakeDashboard) -> None:
    """The issue's tmux check: "Freeze, this VM only" on screen; the service turns the
    same EventId into a Redeploy of eleven VMs; y sends nothing and shows the change."""
    d = make_dashboard()
    pinned(d, 50, event(["web-0"]))
    async with d.app.run_test(size=NARROW) as pilot:
        await ready(d, pilot, 50)
        first = await open_dialog(d, pilot)
        assert not first.prompt.typed  # this VM alone: one key
        eleven = ["web-0", *(f"web-{i}" for i in range(1, 11))]
        pinned(d, 51, event(eleven, kind="Redeploy"))
        await pilot.press("y")  # within the dialog's refresh: the dashboard has not seen it
        again = await asked_again(d, pilot, first)
        text = again.plain()
        assert "It changed since you confirmed, so nothing was sent" in text
        assert "type: Freeze -> Redeploy" in text
        assert "WARNING: this also starts it for 10 other VMs" in text
        assert again.prompt.typed  # now other VMs: "yes" must be typed
        assert d.posts() == []
        refused = d.store.audit_log.records()[0] if d.store else None
        assert refused is not None and refused.action == REFUSED
        assert refused.event["EventType"] == "Freeze"  # the snapshot that was confirmed
        await pilot.press("n")
        await d.wait_for(pilot, lambda: d.audit_actions() == [REFUSED, DISMISSED])
        assert d.posts() == []
        # Asked again and confirmed, it is the Redeploy that is approved, and recorded so.
        await open_dialog(d, pilot)
        await pilot.press("y", "e", "s", "enter")
        await d.wait_for(pilot, lambda: len(d.posts()) == 1)
        await d.wait_for(pilot, lambda: APPROVE_OUTCOME in d.audit_actions())
        attempt = next(r for r in d.store.audit_log.records() if r.action == APPROVE_ATTEMPT)
        assert attempt.event["EventType"] == "Redeploy" and attempt.incarnation == 51


async def test_a_repeated_event_id_is_refused(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    pinned(d, 60, event(["web-0"]), event(["web-0", "web-1", "web-2"], kind="Redeploy"))
    async with d.app.run_test(size=NARROW) as pilot:
        await ready(d, pilot, 60)
        await pilot.press("a")
        await d.wait_for(pilot, lambda: REFUSED in d.audit_actions())
        assert isinstance(d.app.screen, MainScreen)  # no dialog for it
        assert any("appears 2 times in the document" in n for n in d.notices())
        assert d.posts() == []


async def test_ctrl_c_cancels_and_pasted_text_never_approves(
        make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    pinned(d, 70, event(["web-0"]))
    async with d.app.run_test(size=NARROW) as pilot:
        await ready(d, pilot, 70)
        dialog = await open_dialog(d, pilot)
        dialog.post_message(events.Paste("y\nyes\n"))
        await pilot.pause()
        assert d.app.screen is dialog
        await pilot.press("ctrl+c")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, MainScreen))
        await d.wait_for(pilot, lambda: d.audit_actions() == [DISMISSED])
        assert d.app.is_running and d.posts() == []


async def test_y_then_enter_where_yes_must_be_typed_says_what_is_missing(
        make_dashboard: MakeDashboard) -> None:
    """A dialog that asks for "yes" typed (the event also starts for web-1): y then Enter
    approved nothing and said nothing. It says now that the word is not complete, and
    the rest of it still confirms."""
    d = make_dashboard()
    pinned(d, 70, event(["web-0", "web-1"]))
    async with d.app.run_test(size=NARROW) as pilot:
        await ready(d, pilot, 70)
        dialog = await open_dialog(d, pilot)
        assert dialog.prompt.typed
        note = dialog.query_one("#dialog-note", Static)
        await pilot.press("y", "enter")
        await pilot.pause()
        assert d.app.screen is dialog and d.posts() == []
        said = note.visual.plain  # type: ignore[attr-defined]
        assert "“y” is not “yes”" in said and "Enter" in said, said
        await pilot.press("enter")  # Enter again: still nothing, still said
        await pilot.pause()
        assert d.app.screen is dialog and "“y” is not “yes”" in note.visual.plain  # type: ignore[attr-defined]
        await pilot.press("e", "s", "enter")
        await d.wait_for(pilot, lambda: len(d.posts()) == 1)


async def check_the_dialog_is_whole(d: Any, size: tuple[int, int]) -> None:
    resources = ["web-0", *(f"neighbour-vm-{i:03d}" for i in range(40))]
    many = event(resources) | {"Description": "A description that goes on and on. " * 20}
    pinned(d, 80, many)
    async with d.app.run_test(size=size) as pilot:
        await ready(d, pilot, 80)
        for i in range(4):  # the connection flaps: notices arrive before and after
            d.app.notify(f"before {i}", markup=False)
        await pilot.pause()
        dialog = await open_dialog(d, pilot)
        for i in range(4):
            d.app.notify(f"while {i}", markup=False)
        await pilot.pause()
        await pilot.pause()
        assert "while 3" not in screen_text(d)  # no notice over the dialog
        screen = dialog.region
        for part in ("top", "starts", "who", "keys"):
            region = dialog.query_one(f"#dialog-{part}").region
            assert region.height >= 1 and screen.contains_region(region), (part, region)
        shown = screen_text(d)
        assert "WARNING: this also starts it for 40 other VMs" in shown
        assert "It will start for 41 VMs:" in shown
        assert "Recorded in the audit log as:" in shown
        assert "type  yes  then  Enter  approve [   ]   n / Esc  cancel" in shown
        scroll = dialog.query_one("#dialog-scroll")
        assert scroll.virtual_size.height > scroll.size.height  # the description scrolls
        await pilot.press("escape")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, MainScreen))
        # The notices that waited show once it closed (the newest few, as ever).
        await d.wait_for(pilot, lambda: "while 3" in screen_text(d))


async def test_the_dialog_is_whole_at_60x20_with_notices(make_dashboard: MakeDashboard) -> None:
    await check_the_dialog_is_whole(make_dashboard(), (60, 20))


async def test_the_dialog_is_whole_at_80x24_with_notices(make_dashboard: MakeDashboard) -> None:
    await check_the_dialog_is_whole(make_dashboard(), NARROW)


async def test_below_60x20_nothing_is_approved(make_dashboard: MakeDashboard) -> None:
    """The dialog open, the terminal shrinks below 60x20: what would be approved cannot be
    shown, so y approves nothing until it is large enough again."""
    d = make_dashboard()
    pinned(d, 90, event(["web-0"]))
    async with d.app.run_test(size=NARROW) as pilot:
        await ready(d, pilot, 90)
        dialog = await open_dialog(d, pilot)
        await pilot.resize_terminal(59, 19)
        await d.wait_for(pilot, lambda: d.app.screen is not dialog
                         or dialog.query_one("#dialog-small").display)
        assert "60x20" in screen_text(d)
        await pilot.press("y")
        await pilot.pause()
        assert d.posts() == [] and dialog in d.app.screen_stack
        await pilot.resize_terminal(80, 24)
        await d.wait_for(pilot, lambda: d.app.screen is dialog
                         and dialog.query_one("#dialog-keys").display)
        await pilot.press("y")
        await d.wait_for(pilot, lambda: len(d.posts()) == 1)


async def test_an_approval_against_a_failing_service_shows_its_tries_and_stops(
        make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    pinned(d, 100, event(["web-0"]))
    async with d.app.run_test(size=(120, 36)) as pilot:
        await ready(d, pilot, 100)
        d.emulator.set_faults(Faults(approve_statuses={500: 1.0}))
        await open_dialog(d, pilot)
        await pilot.press("y")
        note: Callable[[], Any] = lambda: d.app.session.approvals.get(MINE)  # noqa: E731
        await d.wait_for(pilot, lambda: note() is not None and note().attempt >= 2)
        await pilot.pause()
        assert table(d).cell_text(MINE, "approved").startswith("approving… #")
        summary = d.app.main_screen.query_one(EventSummary).plain()
        assert "approving… attempt" in summary and "last HTTP 500, next in" in summary
        # The event starts (Azure did not wait): the retries stop, and say why.
        pinned(d, 101, event(["web-0"], status="Started"))
        await d.wait_for(pilot, lambda: not note().pending, timeout=60)
        outcome = next(r for r in d.store.audit_log.records() if r.action == APPROVE_OUTCOME)
        assert "approval stopped after" in outcome.error and "has started since it was " \
            "shown" in outcome.error and "nothing more was sent" in outcome.error
        assert outcome.details["ending"] == "started"
        # Shown as it is now, as before a first send: started, so a yes is refused.
        await d.wait_for(pilot, lambda: dialog_of(d) is not None)
        text = dialog_of(d).plain()
        assert "It changed before a retry, so no retry was sent" in text
        assert "This event has started" in text
        await pilot.press("n")
        assert all(json.loads(p.body) == {"StartRequests": [{"EventId": MINE}]}
                   for p in d.posts())


async def test_a_change_before_a_retry_is_never_posted_and_is_shown(
        make_dashboard: MakeDashboard) -> None:
    """Confirmed; the first POST is answered 503 and, while setui waits to try again, the
    Freeze of this VM becomes a Redeploy of eleven VMs: the retry is not sent, and the
    dialog opens again on the change, as before the first send."""
    d = make_dashboard(client_options={"backoff": Backoff(base=4.0, cap=4.0)})  # 2-4 s
    pinned(d, 130, event(["web-0"]))
    async with d.app.run_test(size=NARROW) as pilot:
        await ready(d, pilot, 130)
        d.emulator.set_faults(Faults(approve_statuses={503: 1.0}))
        first = await open_dialog(d, pilot)
        await pilot.press("y")
        await d.wait_for(pilot, lambda: len(d.posts()) == 1)
        d.emulator.set_faults(None)  # a retry would now be accepted
        eleven = ["web-0", *(f"web-{i}" for i in range(1, 11))]
        pinned(d, 131, event(eleven, kind="Redeploy"))
        note: Callable[[], Any] = lambda: d.app.session.approvals.get(MINE)  # noqa: E731
        await d.wait_for(pilot, lambda: not note().pending, timeout=60)
        assert len(d.posts()) == 1
        again = await asked_again(d, pilot, first)
        text = again.plain()
        assert "It changed before a retry, so no retry was sent" in text
        assert "type: Freeze -> Redeploy" in text
        assert again.prompt.typed  # other VMs now: "yes" must be typed
        outcome = next(r for r in d.store.audit_log.records() if r.action == APPROVE_OUTCOME)
        assert outcome.details["ending"] == "changed"
        assert outcome.event["EventType"] == "Freeze"  # what was confirmed
        await pilot.press("n")
        await d.wait_for(pilot, lambda: DISMISSED in d.audit_actions())
        assert len(d.posts()) == 1


async def test_quitting_with_an_approval_in_flight_asks_and_says_its_state(
        make_dashboard: MakeDashboard, capsys: pytest.CaptureFixture[str]) -> None:
    d = make_dashboard()
    pinned(d, 110, event(["web-0"]))
    async with d.app.run_test(size=NARROW) as pilot:
        await ready(d, pilot, 110)
        d.emulator.set_faults(Faults(approve_statuses={500: 1.0}))
        await open_dialog(d, pilot)
        await pilot.press("y")
        await d.wait_for(pilot, lambda: len(d.posts()) >= 1)
        await pilot.press("q")
        await d.wait_for(pilot, lambda: dialog_of(d) is not None)
        asking = dialog_of(d)
        assert asking is not None and "An approval is in flight" in asking.plain()
        await pilot.press("n")  # stay
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, MainScreen))
        assert d.app.is_running
        await pilot.press("q")
        await d.wait_for(pilot, lambda: dialog_of(d) is not None)
        await pilot.press("y")
        await d.wait_for(pilot, lambda: not d.app.is_running)
    said = " ".join(capsys.readouterr().err.split())  # printed on exit, wrapped
    assert f"setui quit while approving {MINE} (approving… attempt" in said
    assert "may or may not have reached the service" in said
    outcome = next(r for r in d.store.audit_log.records() if r.action == APPROVE_OUTCOME)
    assert outcome.details["ending"] == "interrupted"
    # Quit while a try was under way, it may have arrived; between tries, none can have.
    maybe = any(t.get("may_have_arrived") for t in outcome.details["tries"])
    assert outcome.details["outcome"] == ("unknown" if maybe else "failed")


async def test_a_second_approval_asks_again_with_who_approved(
        make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    pinned(d, 120, event(["web-0"]))
    async with d.app.run_test(size=NARROW) as pilot:
        await ready(d, pilot, 120)
        await open_dialog(d, pilot)
        await pilot.press("y")
        await d.wait_for(pilot, lambda: APPROVE_OUTCOME in d.audit_actions())
        await open_dialog(d, pilot)
        await pilot.press("y")
        await d.wait_for(pilot, lambda: dialog_of(d) is not None
                         and "Approve it again?" in dialog_of(d).plain())
        assert "already approved by oncall" in dialog_of(d).plain()
        assert len(d.posts()) == 1
        await pilot.press("y")
        await d.wait_for(pilot, lambda: len(d.posts()) == 2)


def test_read_only_says_where_it_came_from(tmp_path: Any, monkeypatch: Any) -> None:
    from setui.cli import build_parser, resolve_config
    from setui.commands.dashboard import read_only_why

    def why(argv: list[str]) -> str | None:
        args = build_parser(argv).parse_args(argv)
        args.config_resolved = resolve_config(args)
        return read_only_why(args)

    assert why([]) is None
    assert why(["--read-only"]) == "the --read-only option"
    config = tmp_path / "config.toml"
    config.write_text("read-only = true\n", encoding="utf-8")
    monkeypatch.setenv("SETUI_CONFIG", str(config))
    assert why([]) == "read-only = true in the config file"


@pytest.fixture
def scripted_dashboard(tmp_path: Path, scripted: ScriptedImds) -> Iterator[Dashboard]:
    """The dashboard against the scripted service, for a sequence the emulator cannot
    make: a POST read and its connection dropped, then an answer to the retry."""
    scripted.serve(scripted_document(7, scripted_event(MINE, ["web-0"])))
    with Store.open_dir(tmp_path / "data") as store:
        app = SetuiApp(client=ImdsClient(scripted.url, rate=50.0, burst=20,
                                         backoff=Backoff(base=0.02, cap=0.05)),
                       config=Config(endpoint=scripted.url, data_dir=tmp_path / "data",
                                     interval=0.2, bell=True),
                       store=store, identity=IDENTITY)
        # No emulator and no manual clock: the scripted service answers in real time.
        yield Dashboard(app, None, None, store, 0.0)


async def test_an_approval_that_may_have_arrived_is_shown_and_noticed_as_unknown(
        scripted: ScriptedImds, scripted_dashboard: Dashboard) -> None:
    """The first POST is read and its connection closed unanswered; the retry is
    answered 400. Neither approved nor failed: the row says "? unknown" and the notice
    line says the outcome is unknown, marked as a warning."""
    d = scripted_dashboard
    scripted.on_posts(Drop(), Answer(400))
    async with d.app.run_test(size=NARROW) as pilot:
        # The service's clock is the real one here: wait for its row, not a moment.
        await d.wait_for(pilot, lambda: d.app.vm_name == "web-0"
                         and table(d).select_key(MINE))
        d.app.confirm_guard = 0.0
        await open_dialog(d, pilot)
        await pilot.press("y")
        note: Callable[[], Any] = lambda: d.app.session.approvals.get(MINE)  # noqa: E731
        await d.wait_for(pilot, lambda: note() is not None and not note().pending)
        assert note().unknown and not note().approved
        assert table(d).cell_text(MINE, "approved") == "? unknown"
        said = next(n for n in d.notices() if n.startswith("Outcome unknown: "))
        assert "try 1 of 2 may have reached the service" in said
        # On the notice line, as a warning in words, not colour alone.
        await d.wait_for(pilot, lambda: "! Outcome unknown: try 1 of 2 may have"
                         in " ".join(screen_text(d).split()))
    assert len(scripted.posts()) == 2
