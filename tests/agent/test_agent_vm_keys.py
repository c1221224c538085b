"""The agent's steps, holds and claims are its VM's, told by the vmId and not by the URL:
a real agent process on the emulator. A hold set from a standalone dashboard (Pilot) on the
agent's store, through a loopback forwarder to the same VM, holds the agent; on a store
that came from another VM behind the same endpoint, the agent approves its own event."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from setui.core.client import ImdsClient
from setui.emulator.scenario import parse_scenario
from setui.emulator.server import Emulator
from setui.settings.config import Config
from setui.store import Store
from setui.store.agent import HOLD, RELEASE
from setui.system.identity import Identity
from setui.ui.app import SetuiApp
from setui.ui.widgets.summary import EventSummary
from tests.support.agent_helpers import (
    EVENT_ID,
    USER_REBOOT,
    Sink,
    agent_env,
    agent_said,
    drain_policy,
    more_polls,
    posts,
    start_agent,
    stop,
    write_policy,
)
from tests.support.agent_helpers import sent as sent_at
from tests.support.children import SETUI, wait_until
from tests.support.dashboard import WIDE, wait_for
from tests.support.forwarder import Forwarder, forwarder

__all__ = ["forwarder"]  # the fixture, used by name

pytestmark = pytest.mark.slow  # starts the agent

VM_ID = "3f0c8a51-6b2e-4d7a-9c14-8e5b2a7d6f03"
OTHER_VM = "b7e2d4c9-1a3f-4e8b-a6d5-c0f9e8d7b604"
APPROVE_NOW = """
[[rule]]
name = "at-once"
event_type = "Reboot"
this_vm = true
approve = "now"
"""
TELL = """
[notify]
urls = ["{url}"]

[[rule]]
name = "tell"
event_type = "Reboot"
notify = true
"""


def vm_of(vm_id: str, port: int = 0) -> Emulator:
    """A VM serving the user reboot, told apart by its ``vm_id``: started by ``with``."""
    return Emulator(parse_scenario(USER_REBOOT), speed=1.0, port=port,
                    identity={"vmId": vm_id})


@pytest.fixture
def vm() -> Iterator[Emulator]:
    with vm_of(VM_ID) as emulator:
        yield emulator


async def press_hold(data: Path, endpoint: str, *, shown: str) -> None:
    """A standalone dashboard on the agent's store at ``endpoint``: once it shows the
    agent's plan with ``shown`` in it, H on the (only) event, and wait for it to be kept."""
    store = Store.open_dir(data)
    app = SetuiApp(client=ImdsClient(endpoint), store=store,
                   config=Config(endpoint=endpoint, data_dir=data, interval=0.5),
                   identity=Identity(user="oncall", ssh_client=None, host="vm"),
                   clock=lambda: datetime.now(timezone.utc))
    try:
        async with app.run_test(size=WIDE) as pilot:
            summary = app.main_screen.query_one(EventSummary)
            # The agent's plan is found through this other endpoint: the VM is the key.
            await wait_for(pilot, lambda: shown in summary.plain(), 60)
            held = "HELD" in summary.plain()
            await pilot.press("H")
            await wait_for(pilot, lambda: ("HELD" in summary.plain()) != held, 60)
    finally:
        store.close()


async def test_a_hold_from_a_dashboard_at_another_endpoint_holds_the_agent(
        tmp_path: Path, vm: Emulator, forwarder: type[Forwarder], hook: Path) -> None:
    proxy = forwarder(vm.url)
    policy = drain_policy(tmp_path, hook)
    proc, lines = start_agent(vm.url, tmp_path, "--policy", str(policy),
                              env=agent_env(tmp_path, HOOK_WAIT="1"))
    try:
        lines.until(agent_said("running", "prepare"), 60, "the prepare hook to start")
        await press_hold(tmp_path / "data", proxy.url, shown="agent: rule drain")
        (tmp_path / "go").touch()
        lines.until(agent_said("finished", "prepare"), 60, "the prepare hook to end")
        more_polls(vm, 20)
        assert posts(vm) == []  # held: the approval that was due is not made
        await press_hold(tmp_path / "data", proxy.url, shown="HELD")  # now: release
        wait_until(lambda: len(posts(vm)) == 1, 60, "the agent's approval once released")
    finally:
        (tmp_path / "go").touch()  # a hook still waiting ends, so the agent stops cleanly
        assert stop(proc) == 0
    with Store.open_dir(tmp_path / "data", readonly=True) as store:
        actions = [(r.action, r.user, r.details.get("vm_id"))
                   for r in store.audit_log.records(oldest_first=True)]
    assert actions[:2] == [(HOLD, "oncall", VM_ID), (RELEASE, "oncall", VM_ID)]


def test_the_agent_on_a_store_from_another_vm_approves_its_own_event(
        tmp_path: Path) -> None:
    with vm_of(OTHER_VM) as other:  # its event approved into the store this VM will have
        done = subprocess.run([*SETUI, "approve", "--endpoint", other.url, EVENT_ID, "--yes"],
                              capture_output=True, text=True, timeout=60,
                              env=agent_env(tmp_path), stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stdout + done.stderr
    with vm_of(VM_ID, other.port) as mine:  # this VM, behind the same endpoint
        proc, lines = start_agent(mine.url, tmp_path, "--policy",
                                  str(write_policy(tmp_path, APPROVE_NOW)))
        try:
            line = lines.until(lambda text: agent_said("approved", "approve")(text)
                               or agent_said("skipped", "approve")(text)
                               or agent_said("failed", "approve")(text), 60,
                               "the approve step")
            assert json.loads(line)["agent"] == "approved", line
        finally:
            assert stop(proc) == 0
    assert len(posts(mine)) == 1
    with Store.open_dir(tmp_path / "data", readonly=True) as store:
        attempts = [r.details.get("vm_id") for r in store.audit_log.records(oldest_first=True)
                    if r.action == "approve-attempt"]
    assert attempts == [OTHER_VM, VM_ID]


def test_a_message_left_pending_is_sent_by_the_next_agent_at_another_endpoint(
        tmp_path: Path, vm: Emulator, forwarder: type[Forwarder], sink: Sink) -> None:
    """The agent's messages are its VM's, like its steps: one left unsent (the webhook
    down) when the agent stopped is sent by the next, which polls the same VM through
    another endpoint; and once, not told again."""
    policy = write_policy(tmp_path, TELL.format(url=sink.url))
    sink.fail = 10_000  # the webhook is down for the first agent
    proc, lines = start_agent(vm.url, tmp_path, "--policy", str(policy))
    try:
        lines.until(agent_said("matched"), 60, "the rule to match")
        wait_until(lambda: sink.fail < 10_000, 60, "a first try at the message")
    finally:
        assert stop(proc) == 0
    assert sink.bodies == []
    sink.fail = 0
    proxy = forwarder(vm.url)
    proc, lines = start_agent(proxy.url, tmp_path, "--policy", str(policy))
    try:
        wait_until(lambda: len(sink.bodies) >= 1, 60, "the message left pending")
        more_polls(vm, 10)
    finally:
        assert stop(proc) == 0
    assert [b["title"] for b in sink.bodies if "appeared" in str(b["title"])] == \
        [sink.bodies[0]["title"]]
    assert len(sink.bodies) == 1, sink.bodies
    assert sent_at(tmp_path, vm.url) == 1
