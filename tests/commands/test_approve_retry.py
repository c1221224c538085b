"""`setui approve` when a try fails: a retry is a new send, checked as the first was, and
a try that may have arrived makes the outcome unknown, never "failed". Real `setui`
processes against the scripted metadata service (tests/support/scripted.py) on loopback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from setui.store import APPROVE_OUTCOME, Store
from tests.support.children import SETUI, wait_until
from tests.support.scripted import Answer, Hang, ScriptedImds, document, event

pytestmark = pytest.mark.slow  # starts processes: the slow tier (docs/testing.md)

MINE = "F02C2EDE-3B1C-4D5E-9F00-0123456789AB"
ELEVEN = ["web-0", *(f"web-{i}" for i in range(1, 11))]


def setui(imds: ScriptedImds, *args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "setui.cli", *args, "--endpoint", imds.url,
                           "--vm-name", "web-0"], capture_output=True, text=True, timeout=90,
                          env=dict(os.environ, SETUI_DATA_DIR=str(data_dir)),
                          stdin=subprocess.DEVNULL)


def report(imds: ScriptedImds, data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "setui.cli", "report"], capture_output=True,
                          text=True, timeout=90, stdin=subprocess.DEVNULL,
                          env=dict(os.environ, SETUI_DATA_DIR=str(data_dir)))


def audit(data_dir: Path) -> list[Any]:
    with Store.open_dir(data_dir, readonly=True) as store:
        assert store.audit_log.verify().ok
        return store.audit_log.records(oldest_first=True)


def test_yes_stops_retrying_when_the_event_changed_and_names_the_change(
        scripted: ScriptedImds, tmp_path: Path) -> None:
    """The issue's case: the first POST is answered 503 and the Freeze of this VM becomes
    a Redeploy of eleven VMs; the retry must not go out (before: 200, exit 0, and the
    record showed the Freeze)."""
    data = tmp_path / "data"
    scripted.serve(document(7, event(MINE, ["web-0"])))
    scripted.on_posts(Answer(503, then=document(8, event(MINE, ELEVEN, kind="Redeploy"))))
    done = setui(scripted, "approve", MINE, "--yes", data_dir=data)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "type: Freeze -> Redeploy" in done.stdout
    assert "resources: web-0 (1 VM) -> web-0, web-1" in done.stdout
    assert len(scripted.posts()) == 1
    attempt, outcome = audit(data)
    assert attempt.event["EventType"] == "Freeze"  # what was confirmed
    assert outcome.action == APPROVE_OUTCOME and outcome.details["ending"] == "changed"
    assert outcome.details["outcome"] == "failed"  # a 503 is an answer: it did not approve
    assert "type: Freeze -> Redeploy" in (outcome.error or "")
    assert [t.get("status") for t in outcome.details["tries"]] == [503]


def test_a_timed_out_try_then_a_400_is_unknown_and_keeps_the_event_claimed(
        scripted: ScriptedImds, tmp_path: Path) -> None:
    """The first POST times out (it arrived: the service read it), the retry is answered
    400. Before: "FAILED HTTP 400", one attempt, the claim released, posted again."""
    data = tmp_path / "data"
    scripted.serve(document(7, event(MINE, ["web-0"])))
    scripted.on_posts(Hang(), Answer(400))
    done = setui(scripted, "approve", MINE, "--yes", data_dir=data)
    assert done.returncode == 1, done.stdout + done.stderr
    said = " ".join(done.stdout.split())
    assert f"{MINE}: outcome unknown: try 1 of 2 may have reached the service" in said
    assert "no answer from" in said and "HTTP 400" in said
    assert len(scripted.posts()) == 2
    _attempt, outcome = audit(data)
    assert outcome.details["outcome"] == "unknown" and outcome.details["attempts"] == 2
    assert outcome.details["ending"] == "failed"
    first, second = outcome.details["tries"]
    assert first["kind"] == "timeout" and first["may_have_arrived"] is True
    assert second["status"] == 400 and not second.get("may_have_arrived")
    assert outcome.status is None  # what the service made of it is not known

    # The claim stays: a second `--yes` sends nothing and says how to send anyway.
    again = setui(scripted, "approve", MINE, "--yes", data_dir=data)
    assert again.returncode == 1, again.stdout + again.stderr
    said = " ".join(again.stdout.split())
    assert "may already have been sent by" in said and "--again sends anyway" in said
    assert len(scripted.posts()) == 2

    listed = setui(scripted, "events", data_dir=data)
    assert listed.returncode == 0, listed.stderr
    assert "approval outcome unknown" in listed.stdout
    as_json = json.loads(setui(scripted, "events", "--json", data_dir=data).stdout)
    [shown] = as_json["events"]
    assert shown["approval_outcome"] == "unknown" and shown["approved_by"] is None
    told = report(scripted, data)
    assert told.returncode == 0, told.stderr
    assert "approval outcome unknown" in told.stdout.lower()

    forced = setui(scripted, "approve", MINE, "--yes", "--again", data_dir=data)
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert len(scripted.posts()) == 3
    as_json = json.loads(setui(scripted, "events", "--json", data_dir=data).stdout)
    assert as_json["events"][0]["approval_outcome"] == "approved"


def test_ctrl_c_mid_request_leaves_the_outcome_unknown_and_the_event_claimed(
        scripted: ScriptedImds, tmp_path: Path) -> None:
    data = tmp_path / "data"
    scripted.serve(document(7, event(MINE, ["web-0"])))
    scripted.on_posts(Hang())
    proc = subprocess.Popen([*SETUI, "approve", MINE, "--yes", "--endpoint", scripted.url,
                             "--vm-name", "web-0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                            env=dict(os.environ, SETUI_DATA_DIR=str(data)))
    wait_until(lambda: len(scripted.posts()) == 1, 60, "the POST")
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "Traceback" not in err, err
    again = setui(scripted, "approve", MINE, "--yes", data_dir=data)
    assert len(scripted.posts()) == 1  # before: the claim was released, and it posted again
    assert again.returncode == 1 and "may already have been sent by" in again.stdout
    assert "setui approve: interrupted" in err
    _attempt, outcome, _refused = audit(data)
    assert outcome.details["ending"] == "interrupted"
    assert outcome.details["outcome"] == "unknown"


def test_each_failed_try_is_said_as_it_comes(scripted: ScriptedImds, tmp_path: Path) -> None:
    """An approval may take 70 s of tries: the operator sees each one fail, and why, as
    the same command through the agent shows the agent's (tests/api)."""
    scripted.serve(document(7, event(MINE, ["web-0"])))
    scripted.on_posts(Answer(503, retry_after=1), Answer(500, retry_after=1))
    done = setui(scripted, "approve", MINE, "--yes", data_dir=tmp_path / "data")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    tries = [line for line in lines if line.startswith(f"{MINE}: try ")]
    assert [t.split(": ")[1] for t in tries] == ["try 1", "try 2"]
    assert "(503 Service Unavailable)" in tries[0] and "(500 Internal Server" in tries[1]
    assert all(t.endswith("; trying again in 1s") for t in tries)
    assert lines.index(tries[-1]) < next(i for i, line in enumerate(lines)
                                         if "approved: the service answered HTTP 200" in line)
