"""The agent's approvals go through the one Approver, so a retry is checked as the first
send was: a real `setui agent` against the scripted metadata service on loopback."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from setui.store import APPROVE_OUTCOME, Store
from tests.support.agent_helpers import (
    Sink,
    agent_said,
    metrics_url,
    start_agent,
    stop,
    write_policy,
)
from tests.support.children import wait_until
from tests.support.scripted import Answer, Drop, ScriptedImds, document, event

pytestmark = pytest.mark.slow  # starts processes: the slow tier (docs/testing.md)

MINE = "F02C2EDE-3B1C-4D5E-9F00-0123456789AB"
SHORT_FREEZE = """
[[rule]]
name = "short-freeze"
event_type = "Freeze"
this_vm = true
other_vms = false
max_duration = 8
approve = "now"
"""


def test_a_retry_after_the_event_changed_is_not_sent(scripted: ScriptedImds,
                                                     tmp_path: Path) -> None:
    """The rule approves a short Freeze of this VM alone; its first POST is answered 503
    and the event becomes a Redeploy of eleven VMs: the retry never goes out."""
    scripted.serve(document(7, event(MINE, ["web-0"])))
    eleven = ["web-0", *(f"web-{i}" for i in range(1, 11))]
    scripted.on_posts(Answer(503, then=document(8, event(MINE, eleven, kind="Redeploy"))))
    policy = write_policy(tmp_path, SHORT_FREEZE)
    proc, lines = start_agent(scripted.url, tmp_path, "--policy", str(policy),
                              "--vm-name", "web-0")
    try:
        said = lines.until(lambda line: agent_said("approved", "approve")(line)
                           or agent_said("failed", "approve")(line), 60, "the approval's end")
    finally:
        assert stop(proc) == 0
    assert '"failed"' in said and "type: Freeze -> Redeploy" in said
    assert len(scripted.posts()) == 1
    with Store.open_dir(tmp_path / "data", readonly=True) as store:
        outcome = next(r for r in store.audit_log.records() if r.action == APPROVE_OUTCOME)
    assert outcome.details["ending"] == "changed"
    assert outcome.event["EventType"] == "Freeze"


def test_a_dry_run_reads_the_document_again_as_the_real_run_would(
        scripted: ScriptedImds, tmp_path: Path) -> None:
    """The rule matches the Freeze the agent polled; when the approval is checked, the
    service says it is now a Redeploy of eleven VMs. The real run reads the document
    again before it sends and would refuse: the dry run says so, not "would approve"."""
    scripted.serve(document(7, event(MINE, ["web-0"])))
    eleven = ["web-0", *(f"web-{i}" for i in range(1, 11))]
    # The agent's first poll sees the Freeze; the next read of the events is the check's
    # (no second poll comes within the interval).
    scripted.on_gets(Answer(200), Answer(200, then=document(8, event(MINE, eleven,
                                                                     kind="Redeploy"))))
    policy = write_policy(tmp_path, SHORT_FREEZE)
    proc, lines = start_agent(scripted.url, tmp_path, "--policy", str(policy),
                              "--vm-name", "web-0", "--dry-run", "--interval", "300")
    try:
        said = json.loads(lines.until(agent_said("would", "approve"), 60, "the dry run"))
    finally:
        assert stop(proc) == 0
    assert said["detail"].startswith(f"dry run: would be refused: event {MINE} changed "
                                     "since it was shown (incarnation 7 -> 8): type: "
                                     "Freeze -> Redeploy"), said
    assert len(scripted.gets()) == 2 and scripted.posts() == []


def test_an_approval_that_may_have_arrived_is_told_and_counted_as_unknown(
        scripted: ScriptedImds, tmp_path: Path, sink: Sink) -> None:
    """The first POST is read and its connection closed unanswered; the retry is
    answered 400. Neither approved nor failed: the agent says, tells and counts it as
    unknown, and sends nothing more for it."""
    scripted.serve(document(7, event(MINE, ["web-0"])))
    scripted.on_posts(Drop(), Answer(400))
    policy = write_policy(tmp_path, f'[notify]\nurls = ["{sink.url}"]\n{SHORT_FREEZE}')
    proc, lines = start_agent(scripted.url, tmp_path, "--policy", str(policy),
                              "--vm-name", "web-0", "--metrics", "127.0.0.1:0")
    try:
        url = metrics_url(proc)
        said = json.loads(lines.until(lambda line: agent_said("approved", "approve")(line)
                                      or agent_said("failed", "approve")(line)
                                      or agent_said("unknown", "approve")(line), 60,
                                      "the approval's end"))
        wait_until(lambda: len(sink.bodies) >= 1, 30, "the notification")
        counted = httpx.get(url).text
        polled = len(scripted.gets())
        wait_until(lambda: len(scripted.gets()) >= polled + 5, 30, "more polls")
    finally:
        assert stop(proc) == 0
    assert said["agent"] == "unknown" and said["state"] == "unknown", said
    assert said["detail"].startswith("outcome unknown: try 1 of 2 may have reached the "
                                     "service"), said
    assert "approval outcome unknown" in str(sink.bodies[0]["title"]), sink.bodies
    assert 'setui_approvals_total{actor_kind="policy",outcome="unknown"} 1.0' in counted
    assert 'setui_approvals_total{actor_kind="policy",outcome="failed"} 0.0' in counted
    assert len(scripted.posts()) == 2  # and none after, poll after poll
