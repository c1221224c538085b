"""The dashboard attached to a real agent (a child process on a loopback emulator, its
socket in the test's directory), driven through Pilot: the history from before it opened,
H as the agent's own hold, an approval made by the agent as this process, the agent
stopped and started again under it, and `setui` itself attaching in a terminal."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.widgets.data_table import ColumnKey

from setui.api.approving import AgentApprover
from setui.api.attach import attach
from setui.core.timefmt import time_of_day
from setui.emulator.faults import parse_faults
from setui.emulator.scenario import parse_scenario
from setui.emulator.server import Emulator
from setui.settings.config import Config
from setui.store import APPROVE_ATTEMPT, APPROVE_OUTCOME, Store
from setui.store.agent import HOLD, RELEASE
from setui.system.identity import account_name
from setui.ui.attached import AttachedApp
from setui.ui.screens.audit import AuditScreen
from setui.ui.screens.confirm import ConfirmationModal
from setui.ui.screens.details import DetailsScreen
from setui.ui.screens.history import HistoryScreen, IncarnationScreen
from setui.ui.screens.replay import ReplayScreen
from setui.ui.widgets.events import EventsTable
from setui.ui.widgets.status import StatusBar
from setui.ui.widgets.summary import EventSummary
from tests.support.api_helpers import Account, answer, plain_env, run_script_as, start_agent, stop
from tests.support.children import SETUI, wait_until
from tests.support.dashboard import wait_for
from tests.support.emulated import posts
from tests.support.waiting import PATIENCE

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.name != "posix", reason="Unix sockets")]

VM = "app-vm-1"
FIRST = "F020BA2E-3BC0-4C40-A10B-86575A9EABD5"
SECOND = "0B3E9C61-7D2A-4F55-9E1C-2D8A7F4B6C10"
THIRD = "5D7E1A20-44C3-4B9A-8F0E-6A1B2C3D4E5F"


def scenario(*, second_at: float = 2.0, notice: str = "15m") -> str:
    """A Reboot of this VM from the start, a Redeploy ``second_at`` seconds later, and a
    Freeze of another VM 8 s in (news to a dashboard opened before)."""
    return f"""
name = "attached"
vm_name = "{VM}"
tail = 600
approval_delay = 0.5

[[events]]
id = "{FIRST}"
type = "Reboot"
source = "User"
at = 0
notice = "{notice}"
duration = -1

[[events]]
id = "{SECOND}"
type = "Redeploy"
at = {second_at}
notice = "{notice}"

[[events]]
id = "{THIRD}"
type = "Freeze"
at = 8
notice = "{notice}"
resources = ["other-vm"]
duration = 5
"""


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    emu = Emulator(parse_scenario(scenario()), speed=1.0)
    emu.start()
    yield emu
    emu.stop()


def gets(emu: Emulator) -> list[Any]:
    return [r for r in emu.requests if r.method == "GET"]


def dashboard(sock: Path) -> AttachedApp:
    """The dashboard as `setui` opens it when the agent answers at ``sock``."""
    client, words = attach(Config(socket=sock))
    assert client is not None, words
    return AttachedApp(agent=client, config=Config(socket=sock))  # it closes the client


def status(app: AttachedApp) -> str:
    return app.main_screen.query_one(StatusBar).plain()


def audit(tmp_path: Path) -> list[Any]:
    with Store.open_dir(tmp_path / "data", readonly=True) as store:
        return store.audit_log.records(oldest_first=True)


async def pick(app: AttachedApp, pilot: Any, event_id: str) -> None:
    table = app.main_screen.query_one(EventsTable)
    await wait_for(pilot, lambda: table.select_key(event_id))
    await pilot.pause()


async def shown(app: AttachedApp, pilot: Any, event_id: str) -> None:
    """Until the agent's document, as the dashboard has it, holds the event."""
    await wait_for(pilot, lambda: app.session.document is not None
                   and app.session.document.event(event_id) is not None)


async def approve(app: AttachedApp, pilot: Any, event_id: str) -> None:
    """Select the event, press a and, once the dialog is up, y."""
    await pick(app, pilot, event_id)
    app.confirm_guard = 0.0  # real time: the guard has a test of its own
    await pilot.press("a")
    await wait_for(pilot, lambda: isinstance(app.screen, ConfirmationModal)
                   and app.screen.is_mounted)  # type: ignore[attr-defined]
    await pilot.press("y")


async def test_the_vm_learned_late_reaches_a_dashboard_attached_before(tmp_path: Path) -> None:
    """The agent learns this VM's name and vmId after it started (the compute metadata
    failing first): a dashboard attached meanwhile hears them pushed, without
    reconnecting, and a client connecting afterwards is greeted with them."""
    vm_id = "5c2b5e3e-0d7a-4f5e-9a57-0f4c1c6b7a01"
    emu = Emulator(parse_scenario(scenario()), speed=1.0, identity={"vmId": vm_id})
    emu.set_faults(parse_faults("compute-503=1"))
    emu.start()
    sock = tmp_path / "api.sock"
    proc, _ = start_agent(emu.url, tmp_path, env=plain_env(tmp_path, sock="api.sock"))
    try:
        app = dashboard(sock)
        assert (app.agent.hello.agent.vm_name, app.agent.hello.agent.vm_id) == (None, None)
        async with app.run_test(size=(120, 36)) as pilot:
            await shown(app, pilot, FIRST)
            assert app.vm_name is None
            emu.set_faults(None)
            await wait_for(pilot, lambda: app.vm_name == VM, PATIENCE)
            await wait_for(pilot, lambda: VM in status(app))
            await wait_for(pilot, lambda: app.attached.hello.agent.vm_id == vm_id)
            approver = app.approver
            assert isinstance(approver, AgentApprover) and approver.vm_id == vm_id
        client, _ = attach(Config(socket=sock))
        assert client is not None
        try:
            assert (client.hello.agent.vm_name, client.hello.agent.vm_id) == (VM, vm_id)
        finally:
            client.close()
    finally:
        assert stop(proc) == 0
        emu.stop()


async def test_it_shows_the_agents_history_from_before_it_opened_and_asks_imds_nothing(
        tmp_path: Path, emulator: Emulator) -> None:
    proc, _ = start_agent(emulator.url, tmp_path, env=plain_env(tmp_path, sock="api.sock"))
    try:
        with Store.open_dir(tmp_path / "data", readonly=True) as store:
            wait_until(lambda: len(store.history.incarnations(limit=5)) >= 2, PATIENCE,
                       "two incarnations recorded by the agent")
        app = dashboard(tmp_path / "api.sock")
        assert app.client is None and app.store is None and app.poller is None
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for(pilot, lambda: app.session.document is not None
                           and len(app.session.document.events) == 2)
            assert f"attached to the agent (pid {proc.pid}, up " in status(app)
            assert "history: only while open" not in status(app)
            assert app.vm_name == VM
            await pilot.press("h")
            await wait_for(pilot, lambda: isinstance(app.screen, HistoryScreen)
                           and len(app.screen.records) >= 2)  # type: ignore[attr-defined]
            screen = app.screen
            assert isinstance(screen, HistoryScreen)
            assert [r.incarnation for r in screen.records][-2:] == [2, 1]  # type: ignore[attr-defined]
            # What the agent recorded first: before this dashboard existed.
            assert screen.records[-1].first_seen < app.now()  # type: ignore[attr-defined]
            await pilot.press("G", "enter")  # the first incarnation, against none before
            await wait_for(pilot, lambda: isinstance(app.screen, IncarnationScreen))
            assert app.screen.record.incarnation == 1  # type: ignore[attr-defined]
            await pilot.press("escape")
            await wait_for(pilot, lambda: isinstance(app.screen, HistoryScreen))
            await pilot.press("p")  # the replay, from the agent's recording
            await wait_for(pilot, lambda: isinstance(app.screen, ReplayScreen)
                           and app.screen.recording is not None)  # type: ignore[attr-defined]
            await pilot.press("q", "escape")
            await wait_for(pilot, lambda: app.screen is app.main_screen)
            await pilot.press("l")
            await wait_for(pilot, lambda: isinstance(app.screen, AuditScreen) and "✓ Audit "
                           "chain ok" in str(app.screen.query_one("#audit-verify").render()))  # type: ignore[attr-defined]
            await pilot.press("escape")
            await pick(app, pilot, FIRST)
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, DetailsScreen) and "appeared"
                           in str(app.screen.query_one("#details-body").render()).split(  # type: ignore[attr-defined]
                               "From the history and the audit log")[-1])
            await pilot.press("escape")
            # News while it is open (pushed, not polled), said once.
            await wait_for(pilot, lambda: app.session.document is not None
                           and app.session.document.event(THIRD) is not None)
            await wait_for(pilot, lambda: any("Freeze" in n for n in app.notices))
            await pilot.pause()
            # Written as the notice writes it: the time of day, with the date when
            # NotBefore falls on another day than now (a run just before midnight).
            not_before = time_of_day(app.session.document.event(THIRD).not_before,
                                     app.now())
            assert [n for n in app.notices if "New event" in n] == [
                f"New event: Freeze for other-vm: NotBefore {not_before} UTC, T-15:00."]
    finally:
        assert stop(proc) == 0


HOLD_POLICY = """
[[rule]]
name = "late"
event_type = "Redeploy"
approve = "before-not-before"
approve_before = {before}
"""


async def test_h_holds_the_agents_rule_across_its_moment_and_releasing_lets_it_approve(
        tmp_path: Path) -> None:
    """The Redeploy appears 3 s in with 15 min of notice; the rule approves 890 s before
    NotBefore, 10 s after it appeared. Held from the dashboard first, it is not approved
    when that moment has passed (and polls after it); released, it is."""
    policy = tmp_path / "policy.toml"
    policy.write_text(HOLD_POLICY.format(before=890))
    with Emulator(parse_scenario(scenario(second_at=3.0)), speed=1.0) as emulator:
        proc, _ = start_agent(emulator.url, tmp_path, "--policy", str(policy),
                              env=plain_env(tmp_path, sock="api.sock"))
        try:
            app = dashboard(tmp_path / "api.sock")
            async with app.run_test(size=(120, 36)) as pilot:
                summary = app.main_screen.query_one(EventSummary)
                await wait_for(pilot, lambda: app.session.document is not None
                               and app.session.document.event(SECOND) is not None)
                await pick(app, pilot, SECOND)
                await wait_for(pilot, lambda: "rule late" in summary.plain())
                assert posts(emulator) == []
                await pilot.press("H")
                await wait_for(pilot, lambda: SECOND in app.attached.plan.held)
                await wait_for(pilot, lambda: "HELD" in summary.plain())
                event = app.session.document.event(SECOND)
                assert event is not None and event.not_before is not None
                due = event.not_before.timestamp() - 890
                # Past the moment, and five of the agent's polls after it.
                await wait_for(pilot, lambda: sum(r.time > due for r in gets(emulator)) >= 5,
                               timeout=PATIENCE + 15)
                assert posts(emulator) == []
                await pilot.press("H")
                await wait_for(pilot, lambda: len(posts(emulator)) == 1)
                await wait_for(pilot, lambda: SECOND not in app.attached.plan.held)
                # The agent's approval on the row, by its rule: the column says
                # "Approved" attached, not "Approved here" (nothing was approved here).
                table = app.main_screen.query_one(EventsTable)
                await wait_for(pilot, lambda: " by policy" in table.cell_text(SECOND,
                                                                              "approved"))
                assert table.columns[ColumnKey("approved")].label.plain == "Approved"
        finally:
            assert stop(proc) == 0
    holds = [r for r in audit(tmp_path) if r.action in (HOLD, RELEASE)]
    assert [r.action for r in holds] == [HOLD, RELEASE]
    assert all(r.user == account_name(os.getuid()) and r.details["api"]["pid"] == os.getpid()
               for r in holds)


async def test_an_approval_goes_through_the_agent_once_recorded_as_this_process(
        tmp_path: Path, emulator: Emulator) -> None:
    proc, _ = start_agent(emulator.url, tmp_path, env=plain_env(tmp_path, sock="api.sock"))
    try:
        app = dashboard(tmp_path / "api.sock")
        async with app.run_test(size=(120, 36)) as pilot:
            await shown(app, pilot, FIRST)
            await approve(app, pilot, FIRST)
            await wait_for(pilot, lambda: (note := app.session.approvals.get(FIRST))
                           is not None and note.approved)
            assert any(n.startswith("Approved:") for n in app.notices), app.notices
    finally:
        assert stop(proc) == 0
    assert len(posts(emulator)) == 1
    records = [r for r in audit(tmp_path) if r.event_id == FIRST]
    attempt = next(r for r in records if r.action == APPROVE_ATTEMPT)
    outcome = next(r for r in records if r.action == APPROVE_OUTCOME)
    assert attempt.user == outcome.user == account_name(os.getuid())
    assert attempt.details["api"]["uid"] == os.getuid()
    assert attempt.details["api"]["pid"] == os.getpid()
    assert outcome.attempt_seq == attempt.seq and outcome.status == 200


async def test_the_agent_restarts_under_it_and_an_approval_cut_off_is_looked_up(
        tmp_path: Path, emulator: Emulator) -> None:
    """Every POST answers 500, so the agent's approval keeps trying; the agent is stopped
    while it does. The dashboard says so (stale, countdowns "?"), the approval's outcome
    is unknown; the agent is started again, the dashboard reconnects, and what the
    agent's audit log says of that approval is shown."""
    env = plain_env(tmp_path, sock="api.sock")
    proc, _ = start_agent(emulator.url, tmp_path, env=env)
    again: subprocess.Popen[str] | None = None
    try:
        app = dashboard(tmp_path / "api.sock")
        async with app.run_test(size=(120, 36)) as pilot:
            await shown(app, pilot, FIRST)
            emulator.set_faults(parse_faults("approve-500=1"))
            await approve(app, pilot, FIRST)
            await wait_for(pilot, lambda: (note := app.session.approvals.get(FIRST))
                           is not None and note.attempt >= 1)  # a try failed: progress came
            assert "approving… attempt 2, last HTTP 500" in \
                app.main_screen.query_one(EventSummary).plain()
            await pilot.press("q")  # the agent approves: quitting would leave it to it
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmationModal))
            assert "Quitting leaves it to the agent" in app.screen.plain()  # type: ignore[attr-defined]
            await pilot.press("n")
            await wait_for(pilot, lambda: app.screen is app.main_screen)
            assert stop(proc) == 0
            await wait_for(pilot, lambda: "agent stopping" in status(app))
            assert "◐ stale: the agent is not answering" in status(app)
            assert app.stale()
            table = app.main_screen.query_one(EventsTable)
            await wait_for(pilot, lambda: table.cell_text(FIRST, "countdown").endswith("?"))
            await wait_for(pilot, lambda: (note := app.session.approvals.get(FIRST))
                           is not None and note.unknown)
            lost = app.session.approvals[FIRST].message
            assert lost.startswith("outcome unknown: ") and "; ask the agent" in lost
            emulator.set_faults(parse_faults(""))
            again, _ = start_agent(emulator.url, tmp_path, env=env)
            await wait_for(pilot, lambda: f"attached to the agent (pid {again.pid}, up "
                           in status(app), timeout=PATIENCE + 15)
            await wait_for(pilot, lambda: "the agent's audit log, record"
                           in app.session.approvals[FIRST].message)
            note = app.session.approvals[FIRST]
            assert not note.approved and not note.pending
            assert any("Reconnected: attached to the agent" in n for n in app.notices)
            assert len(set(app.notices)) == len(app.notices), app.notices  # each said once
    finally:
        stop(proc)
        if again is not None:
            assert stop(again) == 0
    records = [r for r in audit(tmp_path) if r.event_id == FIRST]
    outcome = next(r for r in records if r.action == APPROVE_OUTCOME)
    assert f"record {outcome.seq})" in note.message
    assert note.unknown == (outcome.result == "unknown")


def test_setui_in_a_terminal_attaches_to_the_agent_and_asks_imds_nothing(
        tmp_path: Path, emulator: Emulator) -> None:
    """The door itself: `setui` in a pseudo-terminal, the agent's socket in its
    environment, and an endpoint of its own that nothing may ask."""
    env = plain_env(tmp_path, sock="api.sock")
    proc, _ = start_agent(emulator.url, tmp_path, env=env)
    spy = Emulator(parse_scenario(scenario()), speed=1.0)
    env["SETUI_ENDPOINT"] = spy.start()
    try:
        master, slave = pty.openpty()
        dash = subprocess.Popen([*SETUI], stdin=slave, stdout=slave, stderr=slave,
                                env={**env, "TERM": "xterm-256color", "COLUMNS": "120",
                                     "LINES": "30"}, start_new_session=True)
        os.close(slave)
        seen = b""
        deadline = time.monotonic() + PATIENCE
        try:
            while b"attached to the agent" not in seen and time.monotonic() < deadline:
                if select.select([master], [], [], 0.5)[0]:
                    seen += os.read(master, 65536)
            assert b"attached to the agent" in seen
            os.write(master, b"q")
            assert dash.wait(timeout=PATIENCE) == 0
        finally:
            if dash.poll() is None:
                dash.kill()
                dash.wait()
            os.close(master)
    finally:
        assert stop(proc) == 0
        spy.stop()
    assert spy.requests == []


# The dashboard as another user runs it (setpriv), under Pilot in a process of its own.
NOT_AN_APPROVER = r'''
import asyncio, json, sys
from pathlib import Path
from setui.api.approving import AgentApprover
from setui.api.attach import attach
from setui.settings.config import Config
from setui.core.timefmt import time_of_day
from setui.ui.attached import AttachedApp
from setui.ui.screens.confirm import ConfirmationModal
from setui.ui.widgets.events import EventsTable

sock, event_id = Path(sys.argv[1]), sys.argv[2]

async def main():
    client, words = attach(Config(socket=sock))
    assert client is not None, words
    app = AttachedApp(agent=client, config=Config(socket=sock))
    async with app.run_test(size=(120, 36)) as pilot:
        table = app.main_screen.query_one(EventsTable)
        for _ in range(3000):
            if table.select_key(event_id):
                break
            await pilot.pause(0.01)
        await pilot.pause()
        key = app.main_screen.active_bindings["a"]
        await pilot.press("a")
        for _ in range(3000):
            if any(n.startswith("Not approved") for n in app.notices):
                break
            await pilot.pause(0.01)
        print(json.dumps({"action": key.binding.action, "enabled": key.enabled,
                          "dialog": isinstance(app.screen, ConfirmationModal),
                          "notices": list(app.notices)}))

asyncio.run(main())
'''


@pytest.mark.parametrize("approvers", [None, '["sapi-bob", "%sapi-ops-leads"]'])
def test_a_non_approvers_a_is_dimmed_and_says_who_may_approve(
        approvers: str | None, base: Path, emulator: Emulator,
        accounts: dict[str, Account]) -> None:
    """Who may approve as the agent's config has it (its group, or the approvers it
    names), and what to do: said once in each notice."""
    if approvers is not None:
        (base / "config.toml").write_text(f"approvers = {approvers}\n")
    proc, _ = start_agent(emulator.url, base)
    try:
        script = base / "not_an_approver.py"
        script.write_text(NOT_AN_APPROVER)
        seen = answer(run_script_as(accounts["carol"], [str(script),
                                                        str(base / "run" / "api.sock"),
                                                        FIRST]))
    finally:
        assert stop(proc) == 0
    assert seen["action"] == "approve" and seen["enabled"] is False  # shown, dimmed
    assert seen["dialog"] is False
    if approvers is None:
        why = ("the agent does not take approvals from sapi-carol: you are not root and not "
               "in group setui, who may approve here: ask an administrator to add you to it "
               "(it counts from your next login)")
    else:
        why = ("the agent does not take approvals from sapi-carol: you are not among the "
               f"approvers the agent's config names (approvers = {approvers}), who with root "
               "may approve here: ask an administrator to add you there")
    assert f"Approvals: You may read here, not approve: {why}" in seen["notices"]
    assert f"Not approved: {why}" in seen["notices"]
    assert posts(emulator) == []
    assert not [r for r in _audit_of(base) if r.user == "sapi-carol"]  # nothing was asked


def _audit_of(base: Path) -> list[Any]:
    with Store.open_dir(base / "data", readonly=True) as store:
        return store.audit_log.records(oldest_first=True)


# The Freeze (8 s in) lists this VM and web-1; its rule prepares, then would approve,
# but does not say other_vms = true: the agent does not approve it early.
OTHERS = f"""
name = "others"
vm_name = "{VM}"
tail = 600

[[events]]
id = "{FIRST}"
type = "Reboot"
source = "User"
at = 0
notice = "15m"

[[events]]
id = "{THIRD}"
type = "Freeze"
at = 2
notice = "15m"
resources = ["{VM}", "web-1"]
duration = 5
"""

OTHERS_POLICY = """
[[rule]]
name = "drain"
event_type = "Freeze"
prepare = "/bin/true"
approve = "after-prepare"

[[rule]]
name = "late"
event_type = "Reboot"
approve = "before-not-before"
approve_before = 880
"""


def pane(app: AttachedApp) -> str:
    from setui.ui.widgets.window import WindowPane

    return app.main_screen.query_one(WindowPane).plain()


def footer(app: AttachedApp) -> str:
    from setui.ui.widgets.keys import KeyBar

    bar = app.screen.query_one(KeyBar)
    return " ".join(f"{k.key_display or k.key} {k.description}"  # type: ignore[attr-defined]
                    for k in bar.query("FooterKey").results() if hasattr(k, "description"))


async def test_the_pane_shows_the_agents_plan_its_refusal_as_meant_and_what_happened(
        tmp_path: Path) -> None:
    """Below the timeline: the agent's plan for this VM's events, each step with its
    state; the Freeze that also lists web-1 is "not approved early", not "approve
    failed", here and in the agent's own line; the change log, newest first, says what
    appeared, the prepare hook's end and who held the Reboot. Held past its approve
    time, the Reboot's plan says the approval is due and who holds it."""
    policy = tmp_path / "policy.toml"
    policy.write_text(OTHERS_POLICY)
    with Emulator(parse_scenario(OTHERS), speed=1.0) as emulator:
        proc, lines = start_agent(emulator.url, tmp_path, "--policy", str(policy),
                                  env=plain_env(tmp_path, sock="api.sock"))
        try:
            app = dashboard(tmp_path / "api.sock")
            async with app.run_test(size=(120, 36)) as pilot:
                await shown(app, pilot, FIRST)
                await pick(app, pilot, FIRST)
                # Before its moment, 20 s after it appeared: a dashboard that starts
                # slowly (a loaded machine) still holds it before the agent approves it.
                await pilot.press("H")
                await wait_for(pilot, lambda: "HELD by " in pane(app), PATIENCE)
                await wait_for(pilot, lambda: "not approved early" in pane(app), PATIENCE)
                text = pane(app)
                assert "The agent's plan" in text
                assert "Freeze" in text and "rule drain" in text
                assert "prepare 'true' exited 0" in text
                assert ("not approved early: it also starts for web-1 (other_vms is not "
                        "set)") in text
                assert "approve failed" not in text and "approval failed" not in text
                user = account_name(os.getuid())
                await wait_for(pilot, lambda: f"approve due, held by {user} since"
                               in pane(app), PATIENCE)
                summary = app.main_screen.query_one(EventSummary).plain()
                assert f"HELD by {user}; rule late: approve due" in summary, summary
                text = pane(app)
                log = text[text.index("What just happened"):]
                assert "appeared" in log and "Freeze" in log
                assert "held" in log and f"by {user}" in log
                # Newest first: the refusal came after the prepare's end.
                assert log.index("not approved early") < log.index("exited 0")
                # `w`: both whole, on a screen of their own; Escape is back.
                await pilot.press("w")
                from setui.ui.screens.window import WindowScreen

                await wait_for(pilot, lambda: isinstance(app.screen, WindowScreen))
                assert "not approved early" in app.screen.plain()  # type: ignore[attr-defined]
                await pilot.press("escape")
                await wait_for(pilot, lambda: app.screen is app.main_screen)
        finally:
            assert stop(proc) == 0
    said = [json.loads(line) for line in lines.rest() if line.startswith("{")]
    refusal = next(r for r in said if r.get("step") == "approve"
                   and r.get("event_id") == THIRD and r.get("agent") != "running")
    assert refusal["agent"] == "skipped", refusal
    assert str(refusal["detail"]).startswith(
        "not approved early: it also starts for web-1 (other_vms is not set)"), refusal


@pytest.mark.parametrize("size", [(120, 36), (60, 20)])
async def test_attached_the_footer_shows_the_hold_key(tmp_path: Path, emulator: Emulator,
                                                      size: tuple[int, int]) -> None:
    """Holding the agent is what only the attached dashboard does: H is on the bar, at
    60x20 too, with w (the plan and the log whole), help and quit."""
    proc, _ = start_agent(emulator.url, tmp_path, env=plain_env(tmp_path, sock="api.sock"))
    try:
        app = dashboard(tmp_path / "api.sock")
        async with app.run_test(size=size) as pilot:
            await shown(app, pilot, FIRST)
            await pilot.pause()
            keys = footer(app)
            for key in ("a Approve", "H Hold agent", "w Plan+log", "? Help", "q Quit"):
                assert key in keys, keys
    finally:
        assert stop(proc) == 0
