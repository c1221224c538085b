"""The agent matches the event against its rule again before every step: an event that
changed under its rule (a 5 s Freeze that became a 900 s Reboot while its prepare hook
ran) gets no further step, not under another rule either, and a person is told, with an
audit record. A real agent, the emulator serving the documents the test pins."""

from __future__ import annotations

import json
import subprocess
import time
from email.utils import formatdate
from pathlib import Path
from typing import Any

import pytest

from setui.emulator.scenario import parse_scenario
from setui.emulator.server import Emulator
from setui.store import Store
from setui.store.agent import UNMATCHED
from tests.support.agent_helpers import (
    EVENT_ID,
    Sink,
    agent_env,
    agent_said,
    more_polls,
    posts,
    records,
    start_agent,
    stop,
    write_policy,
)
from tests.support.children import SETUI, wait_until

POLICY = """
[notify]
urls = ["{url}"]

[[rule]]
name = "short-freeze"
event_type = "Freeze"
max_duration = 8
this_vm = true
prepare = "{hook}"
approve = "after-prepare"

[[rule]]
name = "reboots"
event_type = "Reboot"
approve = "now"
"""


def _document(incarnation: int, kind: str, duration: int,
              not_before_in: float = 900) -> dict[str, Any]:
    return {"DocumentIncarnation": incarnation, "Events": [{
        "EventId": EVENT_ID, "EventStatus": "Scheduled", "EventType": kind,
        "ResourceType": "VirtualMachine", "Resources": ["app-vm-1"],
        "NotBefore": formatdate(time.time() + not_before_in, usegmt=True),
        "Description": "maintenance", "EventSource": "Platform",
        "DurationInSeconds": duration}]}


@pytest.mark.slow
def test_an_event_that_changed_under_its_rule_gets_no_further_step(
        tmp_path: Path, hook: Path, sink: Sink) -> None:
    emulator = Emulator(parse_scenario('name = "pinned"\nvm_name = "app-vm-1"\n'))
    emulator.start()
    try:
        emulator.pin_document(_document(1, "Freeze", 5))
        policy = write_policy(tmp_path, POLICY.format(url=sink.url, hook=hook))
        env = agent_env(tmp_path, HOOK_WAIT="1")
        proc, lines = start_agent(emulator.url, tmp_path, "--policy", str(policy), env=env)
        try:
            lines.until(agent_said("running", "prepare"), 30, "the prepare hook")
            emulator.pin_document(_document(2, "Reboot", 900))
            lines.until(lambda line: '"incarnation": 2' in line, 30, "the changed event")
            (tmp_path / "go").touch()
            unmatched = json.loads(lines.until(agent_said("unmatched"), 30, "the stop"))
            wait_until(lambda: any("event changed" in str(b.get("title"))
                                   for b in sink.bodies), 30, "the notification")
            more_polls(emulator)
        finally:
            assert stop(proc) == 0
        assert unmatched["step"] == "approve" and unmatched["rule"] == "short-freeze"
        detail = str(unmatched["detail"])
        assert "rule short-freeze no longer matches: EventType Reboot is not Freeze" in detail
        assert "type: Freeze -> Reboot" in detail and "duration: 5 -> 900" in detail
        assert posts(emulator) == []  # neither under its rule nor under "reboots"
        said = next(b for b in sink.bodies if "event changed" in str(b.get("title")))
        assert "no longer matches: EventType Reboot is not Freeze" in str(said["message"])
        with Store.open_dir(tmp_path / "data", readonly=True) as store:
            audit = [r for r in store.audit_log.records(oldest_first=True) if r.action == UNMATCHED]
        assert len(audit) == 1 and audit[0].user.startswith("policy:short-freeze (setui agent")
        assert audit[0].event is not None and audit[0].event["EventType"] == "Reboot"
        assert audit[0].details["agent"]["matched"]["EventType"] == "Freeze"
        listed = subprocess.run([*SETUI, "audit", "--data-dir", str(tmp_path / "data")],
                                capture_output=True, text=True, timeout=60, env=env)
        line = next(x for x in listed.stdout.splitlines() if "agent-unmatched" in x)
        assert "rule short-freeze no longer matches: EventType Reboot is not Freeze" in line
        # A restart does not take it up again, under either rule.
        again, lines = start_agent(emulator.url, tmp_path, "--policy", str(policy), env=env)
        try:
            lines.until(lambda line: '"state": "live"' in line, 30, "a live connection")
            more_polls(emulator, 10)
        finally:
            assert stop(again) == 0
        assert posts(emulator) == []
        assert not [r for r in records(lines) if r.get("agent") in ("matched", "approved")]
    finally:
        emulator.stop()


@pytest.mark.slow
def test_a_change_its_rule_still_matches_goes_on_and_binds_the_approval_to_it(
        tmp_path: Path) -> None:
    emulator = Emulator(parse_scenario('name = "pinned"\nvm_name = "app-vm-1"\n'))
    emulator.start()
    try:
        emulator.pin_document(_document(1, "Freeze", 5))
        policy = write_policy(tmp_path, """
[[rule]]
name = "freezes"
event_type = "Freeze"
approve = "before-not-before"
approve_before = 895
""")
        proc, lines = start_agent(emulator.url, tmp_path, "--policy", str(policy))
        try:
            lines.until(agent_said("matched"), 30, "the rule to match")
            emulator.pin_document(_document(2, "Freeze", 7))  # still a Freeze
            lines.until(lambda line: '"incarnation": 2' in line, 30, "the change")
            lines.until(agent_said("approved", "approve"), 60, "the approval 5 s in")
        finally:
            assert stop(proc) == 0
        assert len(posts(emulator)) == 1
        with Store.open_dir(tmp_path / "data", readonly=True) as store:
            attempt = next(r for r in store.audit_log.records() if r.action == "approve-attempt")
        assert attempt.event is not None and attempt.event["DurationInSeconds"] == 7
        assert attempt.incarnation == 2
    finally:
        emulator.stop()


WINDOW = """
[[rule]]
name = "close-freeze"
event_type = "Freeze"
not_before_within = 600
prepare = "{hook}"
approve = "after-prepare"
"""


@pytest.mark.slow
def test_an_event_whose_not_before_moved_out_of_the_window_gets_no_further_step(
        tmp_path: Path, hook: Path) -> None:
    """The rule took the Freeze 300 s before its NotBefore (within its 600 s); while the
    prepare hook ran, the service moved NotBefore an hour out. The check before the
    approval is the rule's whole check, not_before_within included: no approval."""
    emulator = Emulator(parse_scenario('name = "pinned"\nvm_name = "app-vm-1"\n'))
    emulator.start()
    try:
        emulator.pin_document(_document(1, "Freeze", 5, not_before_in=300))
        policy = write_policy(tmp_path, WINDOW.format(hook=hook))
        env = agent_env(tmp_path, HOOK_WAIT="1")
        proc, lines = start_agent(emulator.url, tmp_path, "--policy", str(policy), env=env)
        try:
            lines.until(agent_said("running", "prepare"), 30, "the prepare hook")
            emulator.pin_document(_document(2, "Freeze", 5, not_before_in=3600))
            lines.until(lambda line: '"incarnation": 2' in line, 30, "the moved NotBefore")
            (tmp_path / "go").touch()
            lines.until(lambda line: agent_said("unmatched")(line)
                        or agent_said("approved", "approve")(line), 30,
                        "the step after the prepare hook")
            more_polls(emulator, 10)
        finally:
            assert stop(proc) == 0
        assert posts(emulator) == [], "approved though NotBefore left the rule's window"
        [unmatched] = [r for r in records(lines) if r.get("agent") == "unmatched"]
        assert unmatched["step"] == "approve" and unmatched["rule"] == "close-freeze"
        assert "NotBefore is more than not_before_within 600 s away" in str(unmatched["detail"])
    finally:
        emulator.stop()
