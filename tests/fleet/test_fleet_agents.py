"""The whole road: three emulated VMs (names and sets of their own), three `setui agent`
processes exporting their events, a real Prometheus scraping them every second, and
`setui fleet` under Pilot. Every event appears with its VM and group; stopping one agent
marks its VM as not reported; stopping Prometheus shows the state, and the view recovers.

Needs `setui agent` (issue 13) and the emulator's identity options; where they are not in
this build the test is skipped with that reason (the stand-in exporters of
test_fleet_prometheus.py prove the fleet side meanwhile)."""

from __future__ import annotations

import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from setui.fleet import FleetWatcher, LinkState, PrometheusClient, VmState
from setui.ui.fleet.app import FleetApp
from setui.ui.fleet.view import VmLine, line_text
from setui.ui.format import Palette
from tests.support.children import SETUI, Lines, wait_until
from tests.support.promtest import SHIPPED_RULES, Prometheus

pytestmark = pytest.mark.slow  # starts processes: the slow tier (docs/testing.md)

PATIENCE = 90.0

VMS = [  # (vm name, scenario, identity options)
    ("web-0", "predicted-failure", ["--scale-set", "web-vmss", "--resource-group", "rg-web"]),
    ("web-1", "redeploy", ["--scale-set", "web-vmss", "--resource-group", "rg-web"]),
    ("db-0", "live-migration", ["--placement-group", "pg-db", "--resource-group", "rg-db"]),
]
GROUPS = {"web-0": "scale set web-vmss", "web-1": "scale set web-vmss",
          "db-0": "placement group pg-db"}


def _missing() -> str | None:
    agent = subprocess.run([*SETUI, "agent", "--help"], capture_output=True, text=True,
                           timeout=60, stdin=subprocess.DEVNULL)
    if agent.returncode != 0:
        return "`setui agent` is not in this build (issue 13): " + \
            (agent.stderr.strip().splitlines() or ["no output"])[-1]
    emulator = subprocess.run([*SETUI, "emulator", "--help"], capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)
    if "--scale-set" not in emulator.stdout:
        return "the emulator has no --scale-set (the agent contract's identity options)"
    return None


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def start(children: list[subprocess.Popen[str]], *args: str,
          stderr: int = subprocess.DEVNULL) -> subprocess.Popen[str]:
    proc = subprocess.Popen([*SETUI, *args], stdout=subprocess.PIPE, stderr=stderr,
                            stdin=subprocess.DEVNULL, text=True)
    children.append(proc)
    return proc


def agent_port(proc: subprocess.Popen[str]) -> int:
    """The contract: once listening, one stderr line `setui agent: metrics at URL`."""
    assert proc.stderr is not None
    deadline = time.monotonic() + PATIENCE
    pattern = re.compile(r"setui agent: metrics at http://[^:/]+:(\d+)/metrics")
    seen = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        if found := pattern.search(line):
            # Keep reading what follows, so a chatty agent never blocks on a full pipe.
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return int(found.group(1))
    pytest.fail(f"the agent never said where its metrics are: {seen[-10:]!r}")


async def wait_for(pilot: Any, predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


async def test_three_agents_through_a_real_prometheus(
        prometheus: Callable[..., Prometheus], children: list[subprocess.Popen[str]],
        tmp_path: Path) -> None:
    missing = _missing()
    if missing:
        pytest.skip(missing)
    agents: dict[str, subprocess.Popen[str]] = {}
    targets = []
    for name, scenario, options in VMS:
        emulator = start(children, "emulator", "--port", "0", "--scenario", scenario,
                         "--speed", "10", "--vm-name", name, *options)
        url = Lines(emulator).until(lambda line: line.startswith("http"), PATIENCE,
                                    f"{name}'s emulator URL").strip()
        agent = start(children, "agent", "--endpoint", url, "--metrics", "127.0.0.1:0",
                      "--data-dir", str(tmp_path / name), "--interval", "1",
                      stderr=subprocess.PIPE)
        agents[name] = agent
        targets.append(f"127.0.0.1:{agent_port(agent)}")
    server = prometheus(targets)
    app = FleetApp(FleetWatcher(PrometheusClient(server.url), stale_after=30), refresh=0.5)
    async with app.run_test(size=(140, 40)) as pilot:
        def every_vm_with_its_events() -> bool:
            fleet = app.update.fleet
            if fleet is None:
                return False
            reporters = {key.vm_name: event.group.label for event in fleet.events
                         for key in event.reporters}
            return all(reporters.get(name) == GROUPS[name] for name in GROUPS)
        await wait_for(pilot, every_vm_with_its_events, "every VM's events in its group")
        assert all(vm.state is VmState.LIVE for vm in app.update.fleet.vms.values())

        agents["db-0"].send_signal(signal.SIGTERM)
        assert agents["db-0"].wait(timeout=PATIENCE) == 0
        await wait_for(pilot, lambda: any(
            isinstance(line, VmLine) and line.vm.name == "db-0"
            and line.vm.state is VmState.GONE for line in app.lines), "db-0 not reported")

        server.stop()
        await wait_for(pilot, lambda: app.update.state is LinkState.UNREACHABLE,
                       "Prometheus unreachable")
        server.start()
        await wait_for(pilot, lambda: app.update.state is LinkState.LIVE, "Prometheus back")


async def test_a_vm_whose_agent_stopped_before_the_view_opened_is_not_reported(
        prometheus: Callable[..., Prometheus], children: list[subprocess.Popen[str]],
        tmp_path: Path) -> None:
    """Two agents scraped by a real Prometheus with the shipped rules; db-0's agent stops;
    then the fleet view opens: db-0 is there at once, in its group, not reported since
    its last scrape (its series are gone, but Prometheus remembers it)."""
    missing = _missing()
    if missing:
        pytest.skip(missing)
    agents: dict[str, subprocess.Popen[str]] = {}
    targets: dict[str, str] = {}
    for name, scenario, options in (VMS[0], VMS[2]):
        emulator = start(children, "emulator", "--port", "0", "--scenario", scenario,
                         "--speed", "10", "--vm-name", name, *options)
        url = Lines(emulator).until(lambda line: line.startswith("http"), PATIENCE,
                                    f"{name}'s emulator URL").strip()
        agents[name] = start(children, "agent", "--endpoint", url, "--metrics",
                             "127.0.0.1:0", "--data-dir", str(tmp_path / name),
                             "--interval", "1", stderr=subprocess.PIPE)
        targets[name] = f"127.0.0.1:{agent_port(agents[name])}"
    server = prometheus(list(targets.values()), rules=[SHIPPED_RULES])
    remembered = 'setui:vm_last_seen_timestamp_seconds{vm_name="db-0"}'
    wait_until(lambda: bool(server.query(remembered)), PATIENCE, "db-0 recorded as seen")
    agents["db-0"].send_signal(signal.SIGTERM)
    assert agents["db-0"].wait(timeout=PATIENCE) == 0
    stopped_at = time.time()
    wait_until(lambda: bool(server.query(f'up{{instance="{targets["db-0"]}"}} == 0')),
               PATIENCE, "Prometheus to see db-0's target down")
    wait_until(lambda: bool(server.query(
        'setui:vm_not_reported_since_timestamp_seconds{vm_name="db-0"}')), PATIENCE,
        "the rule to record db-0 as not reported")
    app = FleetApp(FleetWatcher(PrometheusClient(server.url), stale_after=30), refresh=0.5)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: app.update.fleet is not None, "the first answer")
        first = app.update.fleet
        assert first is not None
        db = next((vm for vm in first.vms.values() if vm.name == "db-0"), None)
        assert db is not None, f"db-0 is not in the view: {sorted(first.vms)}"
        assert db.state is VmState.GONE and db.group.label == GROUPS["db-0"]
        assert first.remembers
        assert stopped_at - PATIENCE < db.reported_at <= stopped_at + 1
        web = next(vm for vm in first.vms.values() if vm.name == "web-0")
        assert web.state is VmState.LIVE
        line = next(line for line in app.lines
                    if isinstance(line, VmLine) and line.vm.name == "db-0")
        text = line_text(line, app.now(), 140, Palette()).plain
        assert "not reported since" in text and "UTC" in text, text
