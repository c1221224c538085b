"""The documents' own Python sample, unmodified but for its URL, runs against the emulator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from setui.emulator.clock import ManualClock
from setui.emulator.server import Emulator
from tests.support.emulator_helpers import EVENTS, LIVE_MIGRATION_ID, MakeEmulator

pytestmark = pytest.mark.slow  # starts processes: the slow tier (docs/testing.md)

SAMPLE = Path(__file__).parent / "samples" / "azure_sample.py"
ORIGINAL_URL = '"http://169.254.169.254/metadata/scheduledevents"'


def _run_sample(emulator: Emulator, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    text = SAMPLE.read_text(encoding="utf-8")
    assert text.count(ORIGINAL_URL) == 1
    script = tmp_path / "sample.py"
    script.write_text(text.replace(ORIGINAL_URL, f'"{emulator.url}{EVENTS}"'), encoding="utf-8")
    env = {**os.environ, "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
    # Option 1 polls once (the incarnation always differs from "-1"), option 2 exits.
    return subprocess.run([sys.executable, str(script)], input="1\n2\n", capture_output=True,
                          text=True, timeout=30, env=env)


def _approvals(emulator: Emulator) -> list[bytes]:
    return [r.body for r in emulator.requests if r.method == "POST"]


def test_the_sample_approves_the_documented_freeze(make_emulator: MakeEmulator,
                                                   clock: ManualClock, tmp_path: Path) -> None:
    emulator = make_emulator("live-migration")
    clock.advance(120)  # the Freeze is Scheduled, 14 minutes to go
    assert emulator.document()["Events"][0]["EventStatus"] == "Scheduled"
    done = _run_sample(emulator, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Processed events from document: 2" in done.stdout
    [post] = [r for r in emulator.requests if r.method == "POST"]
    assert post.path == EVENTS
    assert post.query == {"api-version": "2020-07-01"}
    assert post.headers["metadata"] == "true"
    assert post.body == json.dumps({"StartRequests": [{"EventId": LIVE_MIGRATION_ID}]}).encode()
    clock.advance(1)  # the scenario's approval delay
    [event] = emulator.document()["Events"]
    assert event["EventStatus"] == "Started" and event["NotBefore"] == ""


@pytest.mark.parametrize(("scenario", "approves"), [("user-reboot", True), ("redeploy", False)])
def test_the_sample_approves_user_events_only(make_emulator: MakeEmulator, clock: ManualClock,
                                              tmp_path: Path, scenario: str,
                                              approves: bool) -> None:
    emulator = make_emulator(scenario)
    clock.advance(60)
    [event] = emulator.document()["Events"]
    done = _run_sample(emulator, tmp_path)
    assert done.returncode == 0, done.stderr
    expected = [json.dumps({"StartRequests": [{"EventId": event["EventId"]}]}).encode()]
    assert _approvals(emulator) == (expected if approves else [])
    if not approves:
        assert event["Description"] in done.stdout  # "custom handling": logged
    clock.advance(1)
    status = emulator.document()["Events"][0]["EventStatus"]
    assert status == ("Started" if approves else "Scheduled")
