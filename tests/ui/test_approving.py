"""The dashboard's approvals alone (setui.ui.approving): an Approvals over a bare Textual
app that gives it only its Front, with the real Approver and Monitor against the emulator
over loopback and a store in tmp_path. No dashboard: no main screen, no status line."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from textual.app import App

from setui.approval.approver import Approver
from setui.core.client import ImdsClient
from setui.emulator.server import Emulator, ManualClock
from setui.monitor import Monitor
from setui.store import APPROVE_ATTEMPT, APPROVE_OUTCOME, DISMISSED, REFUSED, Store
from setui.system.identity import Identity
from setui.ui.approving import Approvals
from setui.ui.messages import ApprovalDone, Session
from setui.ui.screens.confirm import ConfirmationModal
from tests.support.dashboard import wait_for
from tests.support.emulated import freeze_announced, posts

EVENT_ID = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"  # the Freeze of WestNO_0 and WestNO_1
NOWHERE = "00000000-0000-0000-0000-000000000000"  # in no document
WHO = Identity(user="alice", ssh_client="10.1.2.3", host="vm-web-0")
SIZE = (120, 36)


class Bare(App[None]):
    """Nothing but what the approvals ask of an app: a monitor polling the emulator, its
    clock, a redraw (counted) and a notice line (kept)."""

    def __init__(self, emulator: Emulator, clock: ManualClock, store: Store, *,
                 read_only: str | None = None) -> None:
        super().__init__()
        self.confirm_guard = 0.0  # real time: the dashboard's tests try the guard
        self.vm_name: str | None = "WestNO_0"
        self.session = Session()
        self.notices: list[str] = []
        self.redraws = 0
        self.client = ImdsClient(emulator.url)
        self.monitor = Monitor(self.client, endpoint=emulator.url, interval=0.2,
                               state=self.session,
                               wall=lambda: datetime.fromtimestamp(clock(), timezone.utc))
        approver = Approver(self.client, store.audit_log, endpoint=emulator.url, identity=WHO,
                            wall=self.now)
        self.approvals = Approvals(self, approver, self.session, identity=WHO,
                                   mono=time.monotonic, read_only=read_only)

    def on_mount(self) -> None:
        self.run_worker(self._poll(), group="poll", exit_on_error=False)

    async def _poll(self) -> None:
        async for _update in self.monitor.updates():
            self.redraw()

    async def on_unmount(self) -> None:
        await self.monitor.aclose()
        await self.client.aclose()

    def now(self) -> datetime:
        return self.monitor.now()

    def redraw(self) -> None:
        self.redraws += 1

    def notify(self, message: str, *, title: str = "", severity: Any = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        self.notices.append(f"{title}: {message}" if title else message)

    def on_approval_done(self, message: ApprovalDone) -> None:
        self.approvals.done(message)

    async def action_quit(self) -> None:
        self.approvals.quit()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def emulator(clock: ManualClock) -> Iterator[Emulator]:
    with freeze_announced(clock) as emu:
        yield emu


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open_dir(tmp_path / "data") as opened:
        yield opened


def actions(store: Store) -> list[str]:
    return [r.action for r in store.audit_log.records(oldest_first=True)]


def dialog(app: Bare) -> ConfirmationModal | None:
    screen = app.screen
    return screen if isinstance(screen, ConfirmationModal) and screen.is_mounted else None  # type: ignore[attr-defined]


async def asked(app: Bare, pilot: Any) -> ConfirmationModal:
    """Ask to approve the Freeze once the monitor has the document; the dialog mounted."""
    await wait_for(pilot, lambda: app.session.document is not None)
    app.approvals.request(EVENT_ID)
    await wait_for(pilot, lambda: dialog(app) is not None)
    shown = dialog(app)
    assert shown is not None
    return shown


async def test_yes_typed_approves_the_event_once_and_says_so(
        emulator: Emulator, clock: ManualClock, store: Store) -> None:
    app = Bare(emulator, clock, store)
    async with app.run_test(size=SIZE) as pilot:
        shown = await asked(app, pilot)
        assert shown.prompt.typed  # it starts for WestNO_1 too: "yes" must be typed
        await pilot.press("y", "e", "s", "enter")
        await wait_for(pilot, lambda: any(n.startswith("Approved: ") for n in app.notices))
        note = app.session.approvals[EVENT_ID]
        assert note.approved and not note.pending and note.user == "alice"
        assert [json.loads(p.body) for p in posts(emulator)] == [
            {"StartRequests": [{"EventId": EVENT_ID}]}]
        assert actions(store) == [APPROVE_ATTEMPT, APPROVE_OUTCOME]
        assert app.approvals.in_flight() == []


async def test_no_sends_nothing_and_the_cancel_is_recorded(
        emulator: Emulator, clock: ManualClock, store: Store) -> None:
    app = Bare(emulator, clock, store)
    async with app.run_test(size=SIZE) as pilot:
        await asked(app, pilot)
        await pilot.press("n")
        await wait_for(pilot, lambda: "Approval cancelled: nothing was sent." in app.notices)
        assert dialog(app) is None and EVENT_ID not in app.session.approvals
        assert posts(emulator) == [] and actions(store) == [DISMISSED]


async def test_an_event_not_in_the_document_is_refused_with_its_record(
        emulator: Emulator, clock: ManualClock, store: Store) -> None:
    app = Bare(emulator, clock, store)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.session.document is not None)
        app.approvals.request(NOWHERE)
        await wait_for(pilot, lambda: actions(store) == [REFUSED])
        await wait_for(pilot, lambda: NOWHERE in app.session.approvals)
        assert app.session.approvals[NOWHERE].refused
        assert app.notices == [f"Not approved: EventId {NOWHERE} is not in the current "
                               "document (incarnation 2)"]
        assert dialog(app) is None and posts(emulator) == []


async def test_read_only_refuses_once_in_words_and_records_nothing(
        emulator: Emulator, clock: ManualClock, store: Store) -> None:
    app = Bare(emulator, clock, store, read_only="the test's --read-only")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.session.document is not None)
        app.approvals.request(EVENT_ID)
        app.approvals.request(EVENT_ID)  # said once: the status line keeps saying it
        await pilot.pause()
        assert app.notices == ["Read-only: Approvals are off: this dashboard runs read-only "
                               "(the test's --read-only)."]
        assert dialog(app) is None and actions(store) == [] and posts(emulator) == []


async def test_quitting_with_an_approval_in_flight_asks_first(
        emulator: Emulator, clock: ManualClock, store: Store,
        capsys: pytest.CaptureFixture[str]) -> None:
    app = Bare(emulator, clock, store)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.session.document is not None)
        app.session.mark_pending(EVENT_ID, app.now(), "alice")
        await pilot.press("ctrl+q")
        await wait_for(pilot, lambda: dialog(app) is not None)
        asking = dialog(app)
        assert asking is not None and "An approval is in flight" in asking.plain()
        assert "may or may not reach the service" in asking.plain()
        await pilot.press("n")  # stay
        await wait_for(pilot, lambda: dialog(app) is None)
        assert app.is_running
        await pilot.press("ctrl+q")
        await wait_for(pilot, lambda: dialog(app) is not None)
        await pilot.press("y")
        await wait_for(pilot, lambda: not app.is_running)
    said = " ".join(capsys.readouterr().err.split())  # printed on exit, wrapped
    assert f"setui quit while approving {EVENT_ID} (approving…" in said
