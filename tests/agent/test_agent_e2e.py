"""`setui agent` end to end: a real child process, the real emulator over loopback, real
hooks, the real audit log; the issue's "how it is checked" cases."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from setui.emulator.server import Emulator
from setui.store import APPROVE_ATTEMPT, APPROVE_OUTCOME, Store
from setui.store.agent import AgentLog
from tests.support.agent_helpers import (
    EVENT_ID,
    Sink,
    agent_env,
    agent_said,
    drain_policy,
    more_polls,
    posts,
    records,
    sent,
    start_agent,
    stop,
    write_policy,
)
from tests.support.children import wait_until

pytestmark = pytest.mark.slow  # starts processes: the slow tier (docs/testing.md)

def _audit(tmp_path: Path) -> list[Any]:
    with Store.open_dir(tmp_path / "data", readonly=True) as store:
        return store.audit_log.records(oldest_first=True)


def test_user_reboot_is_approved_only_after_its_prepare_hook_exits_0(
        tmp_path: Path, emulator: Emulator, hook: Path) -> None:
    policy = drain_policy(tmp_path, hook)
    proc, lines = start_agent(emulator.url, tmp_path, "--policy", str(policy),
                              env=agent_env(tmp_path, HOOK_WAIT="1"))
    try:
        lines.until(agent_said("running", "prepare"), 30, "the prepare hook to start")
        wait_until(lambda: (tmp_path / "runs").exists(), 10, "the hook to note its run")
        # The hook is waiting: a few more polls go by, and nothing is posted meanwhile.
        more_polls(emulator)
        assert posts(emulator) == []
        (tmp_path / "go").touch()
        lines.until(agent_said("approved", "approve"), 30, "the approval")
        lines.until(lambda line: '"change": "started"' in line, 30, "the event to start")
    finally:
        assert stop(proc) == 0
    assert len(posts(emulator)) == 1
    body = json.loads(posts(emulator)[0].body)
    assert body["StartRequests"] == [{"EventId": EVENT_ID}]
    # The hook got the event in its environment and as JSON on stdin.
    env = (tmp_path / "env-prepare").read_text()
    assert f"SETUI_EVENT_ID={EVENT_ID}" in env and "SETUI_THIS_VM=true" in env
    assert "SETUI_EVENT_TYPE=Reboot" in env and "SETUI_INCARNATION=" in env
    stdin = json.loads((tmp_path / "stdin-prepare.json").read_text())
    assert stdin["event"]["EventId"] == EVENT_ID and stdin["this_vm"] is True
    # One path to an approval: the audit log, with the policy as the actor and the hook.
    audit = _audit(tmp_path)
    attempt = next(r for r in audit if r.action == APPROVE_ATTEMPT)
    outcome = next(r for r in audit if r.action == APPROVE_OUTCOME)
    assert attempt.user.startswith("policy:drain (setui agent, uid ")
    assert attempt.details["agent"]["rule"] == "drain"
    assert attempt.details["agent"]["hooks"][0]["exit_status"] == 0
    assert outcome.status == 200 and outcome.error is None


def test_a_failing_hook_means_no_post_and_one_notification(
        tmp_path: Path, emulator: Emulator, hook: Path, sink: Sink) -> None:
    policy = drain_policy(tmp_path, hook, url=sink.url)
    proc, lines = start_agent(emulator.url, tmp_path, "--policy", str(policy),
                              env=agent_env(tmp_path, HOOK_EXIT="3"))
    try:
        lines.until(agent_said("failed", "prepare"), 30, "the hook to fail")
        lines.until(agent_said("skipped", "approve"), 30, "the approval to be skipped")
        wait_until(lambda: len(sink.bodies) >= 1, 30, "the notification")
        more_polls(emulator)
    finally:
        assert stop(proc) == 0
    assert posts(emulator) == []
    assert len(sink.bodies) == 1  # rule.notify is off: only the failure is told
    message = sink.bodies[0]
    assert "hook failed" in str(message["title"]) and "exited 3" in str(message["message"])
    assert not any(r.action == APPROVE_ATTEMPT for r in _audit(tmp_path))


def test_dry_run_posts_nothing_and_runs_nothing(
        tmp_path: Path, emulator: Emulator, hook: Path, sink: Sink) -> None:
    policy = drain_policy(tmp_path, hook, url=sink.url, notify=True)
    proc, lines = start_agent(emulator.url, tmp_path, "--policy", str(policy), "--dry-run")
    try:
        lines.until(agent_said("would", "prepare"), 30, "what it would prepare")
        lines.until(agent_said("would", "approve"), 30, "what it would approve")
        more_polls(emulator)
    finally:
        assert stop(proc) == 0
    assert posts(emulator) == []
    assert not (tmp_path / "runs").exists()
    assert sink.bodies == []
    said = [r for r in records(lines) if r.get("agent") == "would"]
    assert any("would run prepare" in str(r["detail"]) for r in said)
    assert any("would notify" in str(r["detail"]) for r in said)


def test_killed_during_a_hook_and_restarted_neither_reruns_nor_approves(
        tmp_path: Path, emulator: Emulator, hook: Path, sink: Sink) -> None:
    policy = drain_policy(tmp_path, hook, url=sink.url, notify=True)
    env = agent_env(tmp_path, HOOK_WAIT="1")
    proc, lines = start_agent(emulator.url, tmp_path, "--policy", str(policy), env=env)
    try:
        lines.until(agent_said("running", "prepare"), 30, "the prepare hook to start")
        wait_until(lambda: len(sink.bodies) >= 1, 30, "the 'appeared' notification")
        # Delivery is at least once: killed between the sink's answer and the store's
        # note of it, the next agent sends it again. What is asserted below is that a
        # message the store knows was sent is not sent twice.
        wait_until(lambda: sent(tmp_path, emulator.url) >= 1, 30, "the store to say sent")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    (tmp_path / "go").touch()  # the orphaned hook may finish now; it was not the agent's
    again, lines = start_agent(emulator.url, tmp_path, "--policy", str(policy), env=env)
    try:
        lines.until(agent_said("interrupted", "prepare"), 30, "the interrupted step")
        lines.until(agent_said("skipped", "approve"), 30, "no approval")
        wait_until(lambda: any(b.get("title", "").startswith("setui: Reboot interrupted")
                               for b in sink.bodies), 30, "the notification of it")
        more_polls(emulator)
    finally:
        assert stop(again) == 0
    assert (tmp_path / "runs").read_text().count("prepare") == 1
    assert posts(emulator) == []
    titles = [str(b["title"]) for b in sink.bodies]
    assert sum("appeared" in t for t in titles) == 1, titles  # not sent again


def test_no_policy_only_observes_and_says_so_in_metrics(
        tmp_path: Path, emulator: Emulator) -> None:
    proc, lines = start_agent(emulator.url, tmp_path)
    try:
        lines.until(lambda line: '"change": "appeared"' in line, 30, "the event")
        more_polls(emulator, 3)
    finally:
        assert stop(proc) == 0
    assert posts(emulator) == []
    assert not any(r.get("agent") for r in records(lines))


def test_a_hold_stops_the_agent_until_it_is_released(
        tmp_path: Path, emulator: Emulator, hook: Path) -> None:
    from setui.store.agent import HOLD, RELEASE
    from setui.store.records import AuditEntry
    from setui.system.identity import Identity

    policy = drain_policy(tmp_path, hook)
    person = Identity(user="oncall", ssh_client=None, host="vm")

    def entry(action: str) -> AuditEntry:
        from setui.core.clock import utc_now

        return AuditEntry(action=action, time=utc_now(), user=person.user, host=person.host,
                          endpoint=emulator.url, event_id=EVENT_ID)

    with Store.open_dir(tmp_path / "data") as store:
        AgentLog(store, emulator.url).set_hold(EVENT_ID, held=True, entry=entry(HOLD))
    proc, lines = start_agent(emulator.url, tmp_path, "--policy", str(policy))
    try:
        lines.until(agent_said("matched"), 30, "the rule to match")
        more_polls(emulator, 10)
        assert not (tmp_path / "runs").exists() and posts(emulator) == []
        with Store.open_dir(tmp_path / "data") as store:
            AgentLog(store, emulator.url).set_hold(EVENT_ID, held=False,
                                                   entry=entry(RELEASE))
        lines.until(agent_said("approved", "approve"), 30, "the approval once released")
    finally:
        assert stop(proc) == 0
    assert len(posts(emulator)) == 1


def test_one_message_per_lifecycle_change(tmp_path: Path, emulator: Emulator,
                                          sink: Sink) -> None:
    policy = write_policy(tmp_path, f"""
[notify]
urls = ["{sink.url}"]
title = "$change $event_type"

[[rule]]
name = "user-initiated"
event_source = "User"
this_vm = true
approve = "now"
notify = true
""")
    proc, lines = start_agent(emulator.url, tmp_path, "--policy", str(policy))
    try:
        lines.until(lambda line: '"change": "completed"' in line, 60, "the event to end")
        wait_until(lambda: len(sink.bodies) >= 4, 30, "the messages")
        more_polls(emulator)
    finally:
        assert stop(proc) == 0
    titles = [str(b["title"]) for b in sink.bodies]
    assert titles == ["appeared Reboot", "approved Reboot", "started Reboot",
                      "completed Reboot"], titles
    # The default body, each change in words: none with an empty detail ("completed: .").
    assert all(str(b["message"]).startswith(f"Event {EVENT_ID} (Reboot, ")
               for b in sink.bodies)
    assert not any(": ." in str(b["message"]) for b in sink.bodies), sink.bodies
    # Started again: everything told before is not told twice.
    again, lines = start_agent(emulator.url, tmp_path, "--policy", str(policy))
    try:
        lines.until(lambda line: '"change": "connection"' in line and "live" in line, 30,
                    "a live connection")
        more_polls(emulator)
    finally:
        assert stop(again) == 0
    assert len(sink.bodies) == 4


def test_a_restart_with_an_edited_policy_tells_nothing_twice(
        tmp_path: Path, emulator: Emulator, sink: Sink) -> None:
    # The same change of the same event is told under one key: after a restart, here
    # with the rule renamed (so the event is decided anew), it is not sent again.
    rule = '[notify]\nurls = ["{url}"]\n\n[[rule]]\nname = "{name}"\nevent_source = ' \
        '"User"\nnotify = true\n'
    policy = write_policy(tmp_path, rule.format(url=sink.url, name="users"))
    proc, lines = start_agent(emulator.url, tmp_path, "--policy", str(policy))
    try:
        wait_until(lambda: len(sink.bodies) >= 1, 30, "the 'appeared' notification")
        wait_until(lambda: sent(tmp_path, emulator.url) >= 1, 30, "the store to say sent")
    finally:
        assert stop(proc) == 0
    policy.write_text(rule.format(url=sink.url, name="user-events"))
    again, lines = start_agent(emulator.url, tmp_path, "--policy", str(policy))
    try:
        lines.until(lambda line: '"matched"' in line and "user-events" in line, 30,
                    "the event decided anew under the renamed rule")
        more_polls(emulator, 10)
    finally:
        assert stop(again) == 0
    titles = [str(b["title"]) for b in sink.bodies]
    assert sum("appeared" in t for t in titles) == 1, titles


def test_approval_at_not_before_minus_n_comes_with_the_clock_alone(
        tmp_path: Path, emulator: Emulator) -> None:
    policy = write_policy(tmp_path, """
[[rule]]
name = "late"
event_type = "Reboot"
approve = "before-not-before"
approve_before = 895
""")
    proc, lines = start_agent(emulator.url, tmp_path, "--policy", str(policy))
    try:
        lines.until(agent_said("matched"), 30, "the rule to match")
        assert posts(emulator) == []  # 900 s of notice: not yet
        # No document changes until then: the approval comes from the clock alone.
        lines.until(agent_said("approved", "approve"), 60, "the approval 5 s in")
    finally:
        assert stop(proc) == 0
    assert len(posts(emulator)) == 1
