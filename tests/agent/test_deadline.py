"""Hooks that know their deadline: SETUI_DEADLINE and SETUI_SECONDS_LEFT in the
environment, a prepare's timeout clamped to the time left less the rule's
deadline_margin, and a real agent saying (and telling) when it cut a drain short or had
no time to start one. The documents are pinned once the agent is polling, so the time
left is what the test says, however slow the machine is to start the agent."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone
from email.utils import formatdate
from pathlib import Path
from typing import Any

import httpx
import pytest

from setui.agent.deadline import Deadline, deadline_of, limit_of
from setui.core.model import Event, EventStatus, EventType
from setui.emulator.scenario import load_scenario
from setui.emulator.server import Emulator
from tests.support.agent_helpers import Sink, agent_env, agent_said, metrics_url, start_agent, stop
from tests.support.children import wait_until

VM = "app-vm-1"
EVENT = "5F3A3E2C-0C8B-4C0E-9A55-2C1D6D6F0A01"
NOW = datetime(2026, 5, 14, 9, 0, 0, tzinfo=timezone.utc)

# A hook that notes its environment, then sleeps far past any deadline.
SLEEPER = """#!/bin/sh
env | grep '^SETUI_' | sort > "$HOOK_DIR/env-$SETUI_HOOK"
echo ran >> "$HOOK_DIR/runs"
exec sleep 300
"""
POLICY = """
[notify]
urls = ["{url}"]
short_notice = false  # these events give little notice: told apart from the hook's message

[[rule]]
name = "drain"
event_type = ["Preempt", "Terminate"]
this_vm = true
prepare = "{hook}"
approve = "after-prepare"
timeout = 600
deadline_margin = {margin}
"""


def test_the_deadline_and_the_limit_it_sets() -> None:
    soon = Event("E", EventType.PREEMPT, EventStatus.SCHEDULED, (VM,),
                 NOW + timedelta(seconds=31))
    deadline = deadline_of(soon, "prepare", NOW + timedelta(seconds=0.3))
    assert deadline.environment() == {"SETUI_DEADLINE": "2026-05-14T09:00:31Z",
                                      "SETUI_SECONDS_LEFT": "30"}
    assert limit_of(600, deadline, 10).seconds == pytest.approx(20.7)
    assert limit_of(600, deadline, 10).by_deadline
    assert limit_of(5, deadline, 10).seconds == 5 and not limit_of(5, deadline, 10).by_deadline
    # 5 s left less a 10 s margin: no time to start it.
    five = deadline_of(soon, "prepare", NOW + timedelta(seconds=25.3))
    assert five.environment()["SETUI_SECONDS_LEFT"] == "5"
    assert limit_of(600, five, 10).seconds is None
    # Past NotBefore while still Scheduled: never negative.
    late = deadline_of(soon, "prepare", NOW + timedelta(minutes=5))
    assert late.environment()["SETUI_SECONDS_LEFT"] == "0"
    # A started event has no NotBefore, a recover runs after the event: no deadline.
    started = Event("E", EventType.REBOOT, EventStatus.STARTED, (VM,), None)
    for event, step in ((started, "prepare"), (soon, "recover")):
        none = deadline_of(event, step, NOW)
        assert none == Deadline(None, None)
        assert none.environment() == {"SETUI_DEADLINE": "", "SETUI_SECONDS_LEFT": ""}
        assert limit_of(600, none, 10).seconds == 600


def _document(kind: str, not_before: float) -> dict[str, Any]:
    return {"DocumentIncarnation": 2, "Events": [{
        "EventId": EVENT, "EventStatus": "Scheduled", "EventType": kind,
        "ResourceType": "VirtualMachine", "Resources": [VM],
        "NotBefore": formatdate(not_before, usegmt=True), "Description": "test",
        "EventSource": "Platform", "DurationInSeconds": -1}]}


def _run(tmp_path: Path, sink: Sink, kind: str, notice: float, margin: float,
         until: Any, what: str) -> tuple[list[dict[str, Any]], float, str]:
    """The agent against an emulator that lists one ``kind`` event ``notice`` seconds
    away once the agent polls; its records until ``until``, NotBefore, metrics text."""
    hook = tmp_path / "sleeper.sh"
    hook.write_text(SLEEPER)
    hook.chmod(0o755)
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY.format(url=sink.url, hook=hook, margin=margin))
    with Emulator(load_scenario("quiet"), vm_name=VM) as emulator:
        proc, lines = start_agent(emulator.url, tmp_path, "--policy", str(policy),
                                  "--metrics", "127.0.0.1:0", env=agent_env(tmp_path))
        try:
            url = metrics_url(proc)
            lines.until(lambda line: '"state": "live"' in line, 60, "the agent polling")
            not_before = float(int(time.time() + notice))
            emulator.pin_document(_document(kind, not_before))
            lines.until(until, 60, what)
            wait_until(lambda: len(sink.bodies) >= 1, 30, "the message")
            text = httpx.get(url, timeout=10).text
            posted = [r for r in emulator.requests if r.method == "POST"]
        finally:
            assert stop(proc) == 0
    assert not posted  # a prepare that did not finish means no approval
    found = [json.loads(line) for line in lines.seen if line.startswith("{")]
    return [r for r in found if "agent" in r], not_before, text


@pytest.mark.slow
def test_a_preempt_drain_is_cut_short_by_the_deadline_and_told(tmp_path: Path,
                                                               sink: Sink) -> None:
    """A Preempt's 30 s notice, a margin of 20: the hook that would sleep for minutes is
    stopped about 10 s in, before NotBefore, and the message says the deadline cut it."""
    said, not_before, metrics = _run(tmp_path, sink, "Preempt", 30, 20,
                                     agent_said("failed", "prepare"), "prepare to be cut")
    failed = next(r for r in said if r["agent"] == "failed")
    assert "cut short by the deadline" in failed["detail"], failed
    assert "deadline_margin 20 s" in failed["detail"], failed
    # Stopped before NotBefore, where the agent can still say so (not by the platform).
    stopped = datetime.fromisoformat(failed["time"].replace("Z", "+00:00"))
    assert stopped.timestamp() < not_before
    env = dict(line.split("=", 1) for line in
               (tmp_path / "env-prepare").read_text().splitlines())
    deadline = datetime.fromtimestamp(not_before, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert env["SETUI_DEADLINE"] == deadline
    assert 0 < int(env["SETUI_SECONDS_LEFT"]) <= 30
    message = sink.bodies[0]
    assert message["title"] == "setui: Preempt hook failed on app-vm-1", message
    assert "cut short by the deadline" in str(message["message"])
    assert "the event is not approved" in str(message["message"])
    assert 'setui_hook_runs_total{hook="prepare",outcome="deadline"} 1.0' in metrics


@pytest.mark.slow
def test_a_hook_with_no_time_left_is_not_run_and_that_is_told(tmp_path: Path,
                                                              sink: Sink) -> None:
    """A Terminate 5 s away and a margin of 10: nothing is left for the hook. It is not
    started (a hook killed at once would look like its own failure), the approval is
    skipped (the platform starts the event at NotBefore anyway), and people are told."""
    said, _, metrics = _run(tmp_path, sink, "Terminate", 5, 10,
                            agent_said("skipped", "approve"), "the approval to be skipped")
    skipped = [r for r in said if r["agent"] == "skipped"]
    assert [r["step"] for r in skipped] == ["prepare", "approve"], skipped
    assert "not run" in skipped[0]["detail"] and "deadline_margin 10 s" in skipped[0]["detail"]
    assert "prepare skipped: no approval" in skipped[1]["detail"]
    assert not (tmp_path / "runs").exists()
    message = sink.bodies[0]
    assert message["title"] == "setui: Terminate hook not run on app-vm-1", message
    assert "it starts at NotBefore" in str(message["message"])
    assert 'setui_hook_runs_total{hook="prepare",outcome="deadline"} 1.0' in metrics
