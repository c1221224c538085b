"""The notice of an event a real `setui agent` first saw after failed polls: not known,
since the event may have appeared at any moment of the gap. No figure is said, counted or
told for it; an event seen to appear in an unbroken watch has one
(tests/agent/test_agent_impact.py). The emulator runs on a manual clock, so the event
appears while every poll fails, and the first answer after the failures shows it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from setui.emulator.clock import ManualClock
from setui.emulator.faults import parse_faults
from setui.emulator.scenario import parse_scenario
from setui.emulator.server import Emulator
from tests.support.agent_helpers import Sink, metrics_url, more_polls, start_agent, stop
from tests.support.agent_helpers import write_policy as policy_file

pytestmark = pytest.mark.slow  # starts processes: the slow tier (docs/testing.md)

FREEZE_ID = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
# Appears at second 5 with 3 s notice (NotBefore at second 8): far under the 15 minutes
# documented for a Freeze.
FREEZE = f"""
name = "freeze-in-a-gap"
vm_name = "app-vm-1"
tail = 600

[[events]]
id = "{FREEZE_ID}"
type = "Freeze"
at = 5
notice = "3s"
duration = 5
"""


def record(line: str) -> dict[str, Any]:
    return dict(json.loads(line)) if line.startswith("{") else {}


def test_an_event_first_seen_after_failed_polls_has_no_notice_figure(tmp_path: Path,
                                                                      sink: Sink) -> None:
    clock = ManualClock(time.time())
    emu = Emulator(parse_scenario(FREEZE), clock=clock, speed=1.0)
    emu.start()
    policy = policy_file(tmp_path, f'[notify]\nurls = ["{sink.url}"]\n')
    proc, lines = start_agent(emu.url, tmp_path, "--metrics", "127.0.0.1:0", "--policy",
                              str(policy), "--vm-name", "app-vm-1")
    try:
        url = metrics_url(proc)
        lines.until(lambda line: record(line).get("state") == "live", 60, "the first answer")
        emu.set_faults(parse_faults("500=1"))
        more_polls(emu, 2)
        clock.set(emu.epoch + 6)  # the Freeze appears while every poll fails
        more_polls(emu, 2)
        emu.set_faults(None)
        appeared = record(lines.until(
            lambda line: record(line).get("change") == "appeared", 60, "the Freeze"))
        assert appeared["event_id"] == FREEZE_ID
        assert appeared["certain"] is False  # seen across the failed polls
        more_polls(emu, 5)  # what the agent would say of it, it has said by now
        text = httpx.get(url, timeout=10).text
    finally:
        assert stop(proc) == 0  # a stop sends what is due: nothing is left queued
        emu.stop()
    said = [r for r in map(record, lines.rest()) if r.get("agent") in ("notice", "short notice")]
    assert said == [], f"a notice figure for an event first seen after failed polls: {said}"
    assert 'setui_event_notice_seconds_count{eventType="Freeze"} 0.0' in text
    assert not any("short notice" in str(b.get("title")) for b in sink.bodies), sink.bodies
