"""The disruption budget end to end: three emulated VMs, three `setui agent` processes
exporting their metrics, a real Prometheus with setui's rules scraping them. web-0 and
web-1 (scale set ss-web) get overlapping Reboots and a rule that approves at once within
max_unavailable = 1: one starts, and the other only once the first is over (the two
agents look at the same moment, so their claims may meet: either way, one at a time).
db-0 (in another group) is not held back by them. And an agent whose Prometheus does not
answer approves nothing early, says why, and lets the platform start the event at
NotBefore."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from setui.emulator.scenario import parse_scenario
from setui.emulator.server import Emulator
from setui.fleet import FleetWatcher, PrometheusClient
from setui.ui.fleet.details import details_text
from setui.ui.fleet.view import VmLine
from tests.support.children import SETUI, wait_until
from tests.support.promtest import (
    SHIPPED_RULES,
    Prometheus,
    StandIn,
    VmSeries,
    exposition,
    free_port,
)

pytestmark = pytest.mark.slow  # starts processes: the slow tier (docs/testing.md)

PATIENCE = 120.0
VMS = {  # name: compute metadata besides the name
    "web-0": {"vmScaleSetName": "ss-web", "resourceGroupName": "rg-web",
              "subscriptionId": "sub-1"},
    "web-1": {"vmScaleSetName": "ss-web", "resourceGroupName": "rg-web",
              "subscriptionId": "sub-1"},
    "db-0": {"placementGroupId": "pg-db", "resourceGroupName": "rg-db",
             "subscriptionId": "sub-1"},
}
SCENARIO = """
name = "rolling-{vm}"
vm_name = "{vm}"
tail = 2
default_duration = 3
approval_delay = 0.5

[[events]]
type = "Reboot"
notice = "15m"
"""
POLICY = """
[[rule]]
name = "rolling"
event_type = "Reboot"
this_vm = true
approve = "now"
max_unavailable = 1
group = "{group}"
"""


class Agent:
    """One `setui agent` child with its metrics on a free port; every line it prints kept
    (by a thread of its own, so a full pipe never holds it up)."""

    def __init__(self, vm: str, url: str, tmp_path: Path, prometheus: str, port: int) -> None:
        group = "scale-set" if "vmScaleSetName" in VMS[vm] else "placement-group"
        policy = tmp_path / f"policy-{vm}.toml"
        policy.write_text(POLICY.format(group=group))
        env = {**os.environ, "SETUI_DATA_DIR": str(tmp_path / vm), "PYTHONUNBUFFERED": "1",
               "SETUI_PROMETHEUS_URL": prometheus}
        self.port = port
        self.proc = subprocess.Popen(
            [*SETUI, "agent", "--endpoint", url, "--interval", "0.5", "--json", "--policy",
             str(policy), "--metrics", f"127.0.0.1:{self.port}"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
            text=True, env=env)
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.seen.append(line)

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in list(self.seen) if line.startswith("{")]

    def until(self, done: Callable[[dict[str, Any]], bool], what: str) -> None:
        wait_until(lambda: any(done(r) for r in self.records()), PATIENCE, what)

    def said(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records() if r.get("agent") == kind]

    def change(self, kind: str) -> dict[str, Any] | None:
        return next((r for r in self.records() if r.get("change") == kind), None)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)


@pytest.fixture
def emulators() -> Iterator[dict[str, Emulator]]:
    made = {vm: Emulator(parse_scenario(SCENARIO.format(vm=vm)), identity=identity)
            for vm, identity in VMS.items()}
    for emulator in made.values():
        emulator.start()
    yield made
    for emulator in made.values():
        emulator.stop()


def test_two_vms_of_one_scale_set_reboot_one_after_the_other(
        emulators: dict[str, Emulator], tmp_path: Path, prometheus: Any) -> None:
    ports = {vm: free_port() for vm in emulators}
    server: Prometheus = prometheus([f"127.0.0.1:{port}" for port in ports.values()],
                                    rules=[SHIPPED_RULES])
    agents = {vm: Agent(vm, emulator.url, tmp_path, server.url, ports[vm])
              for vm, emulator in emulators.items()}
    try:
        # One of the scale set is approved; the other waits for it, and says so.
        wait_until(lambda: sum(bool(agents[vm].said("approved")) for vm in ("web-0", "web-1"))
                   == 1 and any("1 of 1 in ss-web busy" in r["detail"]
                                for vm in ("web-0", "web-1") for r in agents[vm].said("waiting")),
                   PATIENCE, "one web VM approved and the other waiting for it")
        first = next(vm for vm in ("web-0", "web-1") if agents[vm].said("approved"))
        second = "web-1" if first == "web-0" else "web-0"
        # The fleet view sees the wait (setui_agent_waiting), and its details say it.
        watcher = FleetWatcher(PrometheusClient(server.url))
        try:
            def waiting_vm() -> Any:
                fleet = watcher.refresh().fleet
                return next((vm for vm in (fleet.vms.values() if fleet else ())
                             if vm.name == second and vm.waiting == ("budget",)), None)
            wait_until(lambda: waiting_vm() is not None, PATIENCE, "the fleet to see it")
            fleet = watcher.last.fleet
            vm = waiting_vm()
            text = details_text(VmLine(vm.group, vm), fleet, _now()).plain
            assert "waits for its group's disruption budget" in text, text
        finally:
            watcher.close()
        for vm, agent in agents.items():
            agent.until(lambda r: r.get("change") == "completed", f"{vm}'s Reboot to be over")
    finally:
        codes = {vm: agent.stop() for vm, agent in agents.items()}
    assert codes == dict.fromkeys(agents, 0)
    # One after the other: the second started only after the first was over, and was
    # approved only then.
    over = agents[first].change("completed")
    started = agents[second].change("started")
    approved = agents[second].said("approved")
    assert over is not None and started is not None and approved
    assert over["time"] < approved[0]["time"] < started["time"], (over, approved, started)
    waits = [r["detail"] for r in agents[second].said("waiting")]
    assert any(f"1 of 1 in ss-web busy ({first}: " in w for w in waits), waits
    # db-0's group is its own: the scale set never held it back.
    assert agents["db-0"].said("approved")
    assert not any("busy" in r["detail"] for r in agents["db-0"].said("waiting"))
    for emulator in emulators.values():
        assert sum(r.method == "POST" for r in emulator.requests) == 1


def test_without_prometheus_nothing_is_approved_early_and_notbefore_is_not_passed(
        tmp_path: Path) -> None:
    """Prometheus does not answer: the agent says why it does not approve, and at
    NotBefore says that the platform starts the event whatever the budget."""
    # The Reboot lasts minutes: the agent's wait ends at NotBefore, and a loaded machine
    # may wake it seconds late; an event already over by then is "the event is over".
    scenario = SCENARIO.format(vm="web-0").replace('notice = "15m"', 'notice = "10s"') \
        .replace("default_duration = 3", "default_duration = 300")
    with Emulator(parse_scenario(scenario), identity=VMS["web-0"]) as emulator:
        agent = Agent("web-0", emulator.url, tmp_path, f"http://127.0.0.1:{free_port()}",
                      free_port())
        try:
            agent.until(lambda r: r.get("agent") == "waiting"
                        and "cannot ask Prometheus" in r["detail"], "the wait, said")
            agent.until(lambda r: r.get("agent") == "skipped" and r["step"] == "approve",
                        "the approval skipped at NotBefore")
            agent.until(lambda r: r.get("change") == "started", "the platform to start it")
        finally:
            assert agent.stop() == 0
        assert not any(r.method == "POST" for r in emulator.requests)
    [skipped] = [r for r in agent.said("skipped")]
    assert "the platform starts the event at NotBefore whatever the budget" \
        in skipped["detail"], skipped


CLAIM = 'setui_agent_busy{placement_group="",reason="approving",'


def test_claims_that_meet_step_back_and_neither_approves(
        tmp_path: Path, prometheus: Any) -> None:
    """Two agents that claim at once: web-1 (a stand-in exporter) claims in the very
    scrape that follows web-0's claim, so web-0 can only see it after claiming. web-0
    steps back (its claim withdrawn), approves nothing while web-1 claims, and approves
    once web-1 no longer does."""
    agent_port = free_port()
    claiming = {"on": True, "seen": 0}

    def render() -> str:
        text = exposition([VmSeries("web-1", vm_scale_set="ss-web", resource_group="rg-web",
                                    subscription_id="sub-1")])
        try:
            theirs = httpx.get(f"http://127.0.0.1:{agent_port}/metrics", timeout=5).text
        except httpx.HTTPError:
            theirs = ""
        if claiming["on"] and CLAIM in theirs:  # web-0 claims: so does web-1, at once
            claiming["seen"] += 1
            text += ('setui_agent_busy{vm_name="web-1",vm_scale_set="ss-web",placement_group="",'
                     'resource_group="rg-web",subscription_id="sub-1",zone="",'
                     'reason="approving"} 1\n')
        return text

    stand_in = StandIn(render)
    server: Prometheus = prometheus([f"127.0.0.1:{agent_port}", stand_in.target],
                                    rules=[SHIPPED_RULES])
    with Emulator(parse_scenario(SCENARIO.format(vm="web-0")), identity=VMS["web-0"]) \
            as emulator:
        agent = Agent("web-0", emulator.url, tmp_path, server.url, agent_port)
        try:
            agent.until(lambda r: r.get("agent") == "waiting"
                        and "1 of 1 in ss-web busy (web-1: approving)" in r["detail"],
                        "web-0 to step back for web-1's claim")
            assert claiming["seen"] and not agent.said("approved")
            # Its claim is withdrawn: it is not busy while it waits.
            wait_until(lambda: CLAIM not in httpx.get(f"http://127.0.0.1:{agent_port}/metrics",
                                                     timeout=5).text,
                       PATIENCE, "web-0's claim withdrawn")
            assert not any(r.method == "POST" for r in emulator.requests)
            claiming["on"] = False
            agent.until(lambda r: r.get("agent") == "approved", "web-0 to approve at last")
        finally:
            assert agent.stop() == 0
            stand_in.stop()
        assert sum(r.method == "POST" for r in emulator.requests) == 1


def _now() -> Any:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc)
