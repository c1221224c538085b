"""What events did to the VM, measured by a real `setui agent` process against the emulator:
stopped (SIGSTOP) while a Freeze is Started, the stall is tied to the Freeze, kept, said,
counted, reported and read by the fleet view; a restart in another boot (its boot id
given by SETUI_BOOT_ID_FILE, the test-only hook) is told once as the Reboot it was; a
stall with no event is told as such. And the Freeze's short notice is told."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from setui.core.metricnames import EVENT_METRIC, IMPACT_METRIC, SUCCESS_METRIC
from setui.emulator.scenario import parse_scenario
from setui.emulator.server import Emulator
from setui.fleet.model import Fleet, FleetBuilder
from setui.store import Store
from setui.system.boot import TEST_VARIABLE
from setui.ui.fleet.details import details_text
from setui.ui.fleet.view import EventLine, build_lines
from tests.support.agent_helpers import (
    Sink,
    agent_env,
    agent_said,
    metrics_url,
    more_polls,
    start_agent,
    stop,
)
from tests.support.agent_helpers import write_policy as policy_file
from tests.support.children import SETUI, wait_until

pytestmark = [pytest.mark.slow,  # starts processes: the slow tier (docs/testing.md)
              pytest.mark.skipif(os.name != "posix", reason="SIGSTOP is POSIX")]

FREEZE_ID = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
REBOOT_ID = "F020BA2E-3BC0-4C40-A10B-86575A9EABD5"
# Announced 3 s ahead (15 min documented), Started from second 5 for ten minutes.
FREEZE = f"""
name = "freeze-held"
vm_name = "app-vm-1"
tail = 600

[[events]]
id = "{FREEZE_ID}"
type = "Freeze"
at = 2
notice = "3s"
duration = 5
"""
REBOOT = f"""
name = "reboot-held"
vm_name = "app-vm-1"
tail = 600

[[events]]
id = "{REBOOT_ID}"
type = "Reboot"
at = 0
notice = "2s"
"""
QUIET = """
name = "nothing-announced"
vm_name = "app-vm-1"
"""
STOPPED_FOR = 3.0  # seconds the agent is stopped: the stall it must measure


def emulator_of(scenario: str) -> Emulator:
    emu = Emulator(parse_scenario(scenario), speed=1.0)
    emu.start()
    return emu


def stopped(proc: subprocess.Popen[str], seconds: float) -> None:
    """SIGSTOP the agent (every thread of it: the VM frozen, as far as it can tell), then
    SIGCONT after ``seconds``: the stall is the stimulus, not a wait for something."""
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        os.kill(proc.pid, signal.SIGCONT)


def seen_started(event_id: str):  # type: ignore[no-untyped-def]
    """The event seen Started: as it started, or, for an agent that came up late on a
    busy machine, already Started when it first appeared."""
    def done(line: str) -> bool:
        if not line.startswith("{"):
            return False
        record = json.loads(line)
        return (record.get("event_id") == event_id
                and (record.get("change") == "started"
                     or (record.get("change") == "appeared" and record.get("status") == "Started")))
    return done


def changed(kind: str, event_id: str):  # type: ignore[no-untyped-def]
    def done(line: str) -> bool:
        if not line.startswith("{"):
            return False
        record = json.loads(line)
        return record.get("change") == kind and record.get("event_id") == event_id
    return done


def said(line: str) -> dict[str, Any]:
    return json.loads(line)


def run_setui(tmp_path: Path, *args: str, env: dict[str, str] | None = None
              ) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*SETUI, *args], capture_output=True, text=True, timeout=60,
                          env=env or agent_env(tmp_path), stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    return done


def impacts(tmp_path: Path, endpoint: str) -> list[Any]:
    with Store.open_dir(tmp_path / "data", readonly=True) as store:
        return store.sessions.impacts(endpoint=endpoint)


def fleet_of(text: str) -> Fleet:
    """The agent's own exposition as Prometheus's API would answer the fleet's query."""
    now = time.time()
    result: list[dict[str, Any]] = [
        {"metric": {"__name__": s.name, **s.labels}, "value": [now, str(s.value)]}
        for family in text_string_to_metric_families(text) for s in family.samples
        if s.name in (EVENT_METRIC, SUCCESS_METRIC, IMPACT_METRIC)]
    return FleetBuilder().build(result, now)


def test_a_stopped_agent_measures_the_freeze_it_was_stopped_in(tmp_path: Path,
                                                               sink: Sink) -> None:
    emu = emulator_of(FREEZE)
    policy = policy_file(tmp_path, f'[notify]\nurls = ["{sink.url}"]\n')
    proc, lines = start_agent(emu.url, tmp_path, "--metrics", "127.0.0.1:0", "--policy",
                              str(policy))
    try:
        url = metrics_url(proc)
        short = said(lines.until(agent_said("short notice"), 60, "the short notice"))
        assert short["event_id"] == FREEZE_ID
        assert "LESS than the 15m 00s documented for a Freeze" in short["detail"]
        lines.until(changed("started", FREEZE_ID), 60, "the Freeze to start")
        more_polls(emu, 3)  # the heartbeat has ticked since the Started document came
        stopped(proc, STOPPED_FOR)
        impact = said(lines.until(agent_said("impact"), 60, "the stall"))
        assert impact["event_id"] == FREEZE_ID
        assert impact["detail"].startswith("Freeze, announced 5s: the VM was paused ")
        wait_until(lambda: any("short notice" in str(b.get("title")) for b in sink.bodies),
                   60, "the short notice to be told")
        text = httpx.get(url, timeout=10).text
        for line in ('setui_event_impact_seconds_count{eventType="Freeze"} 1.0',
                     'setui_stalls_total{announced="true"} 1.0',
                     'setui_stalls_total{announced="false"} 0.0',
                     'setui_event_notice_seconds_bucket{eventType="Freeze",le="30.0"} 1.0'):
            assert line in text, line
        fleet = fleet_of(text)
        event = next(line for line in build_lines(fleet) if isinstance(line, EventLine))
        details = details_text(event, fleet, fleet_now(fleet)).plain
        assert f"app-vm-1  paused {impact['detail'].split('paused ')[1][:4]}" in details
    finally:
        assert stop(proc) == 0
        emu.stop()
    [kept] = impacts(tmp_path, emu.url)
    # At least the time it was stopped, less one tick: never more than was measured.
    assert (kept.kind, kept.tie, kept.event_id) == ("stall", "started", FREEZE_ID)
    assert kept.seconds >= STOPPED_FOR - 0.5
    assert kept.wall_seconds is not None and kept.wall_seconds >= STOPPED_FOR - 0.5
    report = json.loads(run_setui(tmp_path, "report", "--format", "json").stdout)
    [freeze] = report["events"]
    assert freeze["notice"]["short"] is True and freeze["notice"]["seconds"] <= 3
    assert freeze["impact_measured"] is True
    assert [(i["kind"], i["tie"]) for i in freeze["impacts"]] == [("stall", "started")]
    assert report["impacts_without_event"] == []
    markdown = run_setui(tmp_path, "report").stdout
    assert "- **Impact:** Freeze, announced 5s: the VM was paused" in markdown
    assert "LESS than the 15m 00s documented for a Freeze" in markdown


def fleet_now(fleet: Any) -> Any:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(fleet.at, tz=timezone.utc)


def test_a_restart_in_another_boot_is_told_once_as_the_reboot(tmp_path: Path) -> None:
    emu = emulator_of(REBOOT)
    boot = tmp_path / "boot_id"
    boot.write_text("11111111-aaaa-4aaa-8aaa-000000000001\n")
    env = agent_env(tmp_path, **{TEST_VARIABLE: str(boot)})
    try:
        first, lines = start_agent(emu.url, tmp_path, env=env)
        try:
            lines.until(seen_started(REBOOT_ID), 60, "the Reboot seen started")
        finally:
            assert stop(first) == 0  # a clean stop, as at a shutdown: its last poll is known
        boot.write_text("22222222-bbbb-4bbb-8bbb-000000000002\n")
        second, lines = start_agent(emu.url, tmp_path, env=env)
        try:
            told = said(lines.until(agent_said("impact"), 60, "the boot"))
        finally:
            assert stop(second) == 0
        assert told["event_id"] == REBOOT_ID
        assert told["detail"].startswith("Reboot: down ") and "(last poll " in told["detail"]
        # Restarted within the same boot: nothing more to tell.
        third, lines = start_agent(emu.url, tmp_path, env=env)
        try:
            lines.until(lambda line: '"state": "live"' in line, 60, "the third agent's answer")
            more_polls(emu, 10)
        finally:
            assert stop(third) == 0
        assert not [line for line in lines.seen if '"agent": "impact"' in line]
    finally:
        emu.stop()
    [kept] = impacts(tmp_path, emu.url)
    assert (kept.kind, kept.tie, kept.event_id, kept.exact) == ("boot", "started", REBOOT_ID,
                                                                True)
    assert kept.boot_id == "22222222-bbbb-4bbb-8bbb-000000000002"
    assert kept.first_poll is not None and kept.first_poll >= kept.at
    markdown = run_setui(tmp_path, "report").stdout
    assert "- **Impact:** Reboot: down " in markdown


def test_a_stall_no_event_was_announced_for_is_told_too(tmp_path: Path) -> None:
    emu = emulator_of(QUIET)
    proc, lines = start_agent(emu.url, tmp_path, "--metrics", "127.0.0.1:0")
    try:
        url = metrics_url(proc)
        lines.until(lambda line: '"state": "live"' in line, 60, "the first answer")
        stopped(proc, 1.5)
        impact = said(lines.until(agent_said("impact"), 60, "the stall"))
        assert impact["event_id"] is None
        assert impact["detail"].startswith("paused ")
        assert impact["detail"].endswith(", no event announced")
        text = httpx.get(url, timeout=10).text
        assert 'setui_stalls_total{announced="false"} 1.0' in text
        assert 'setui_event_impact_seconds_count{eventType="none"} 1.0' in text
    finally:
        assert stop(proc) == 0
        emu.stop()
    history = run_setui(tmp_path, "history").stdout
    assert "** measured: paused " in history and ", no event announced **" in history


def test_short_notice_is_not_told_when_the_policy_says_so(tmp_path: Path, sink: Sink) -> None:
    emu = emulator_of(FREEZE)
    policy = policy_file(tmp_path, f'[notify]\nurls = ["{sink.url}"]\nshort_notice = false\n\n'
                                   '[[rule]]\nname = "tell"\nnotify = true\n')
    proc, lines = start_agent(emu.url, tmp_path, "--policy", str(policy))
    try:
        said(lines.until(agent_said("short notice"), 60, "the short notice"))
        wait_until(lambda: any("appeared" in str(b.get("title")) for b in sink.bodies), 60,
                   "the rule's message")
    finally:
        assert stop(proc) == 0  # a stop sends what is due: nothing is left queued
        emu.stop()
    with Store.open_dir(tmp_path / "data", readonly=True) as store:
        from setui.store.agent import AgentLog

        changes = [n.change for n in AgentLog(store, emu.url).notifications()]
    assert "appeared" in changes and "short notice" not in changes
    assert not any("short notice" in str(b.get("title")) for b in sink.bodies)


def measuring(tmp_path: Path) -> bool:
    """Whether the store says a session keeps the agent's heartbeat (set at its first
    answer): from then on a report has something measured to speak of."""
    with Store.open_dir(tmp_path / "data", readonly=True) as store:
        return any(s.measures for s in store.sessions.spans())


def test_a_report_right_after_the_agent_starts_says_it_is_measuring(tmp_path: Path) -> None:
    """The session's span is a moment long until its first beat (a minute later): the
    report must still say the heartbeat runs, since when, and that nothing was seen."""
    emu = emulator_of(FREEZE)
    proc, lines = start_agent(emu.url, tmp_path)
    try:
        lines.until(lambda line: '"state": "live"' in line, 60, "the first answer")
        wait_until(lambda: measuring(tmp_path), 60, "the session marked as measuring")
        text = run_setui(tmp_path, "report").stdout
        data = json.loads(run_setui(tmp_path, "report", "--format", "json").stdout)
    finally:
        assert stop(proc) == 0
        emu.stop()
    assert "not measured" not in text, text
    assert "- **Stalls and boots with no event announced:** none measured so far; the " \
           "agent's heartbeat has run since " in text, text
    assert data["impacts_measured"] is True
    assert data["impacts_measured_since"] is not None
