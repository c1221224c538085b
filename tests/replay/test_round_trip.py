"""Rehearse: record a scenario's run, export it, play the export, record again; the same
lifecycle, change for change. Real processes: `setui emulator`, `setui watch --json`,
`setui history export-scenario`, over loopback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from children import SETUI, Lines
from setui.emulator.scenario import load_scenario

pytestmark = pytest.mark.slow  # starts processes: the slow tier (docs/testing.md)

POSIX = os.name == "posix"
# The first run is sped up (a scenario second is 40 ms; polls every 0.2 s see every 5
# scenario seconds); the export's times are real seconds, so it plays at 1x.
SPEED = "25"
# Every change at least 30 scenario seconds from the next (polls every 0.5 s see every
# 12.5), and the first well after the recorder is up: the runs cannot see them merge or
# part differently.
DRILL = """
name = "drill"
vm_name = "web-0"
tail = 30

[[events]]  # this VM's reboot, approved early by another VM
id = "0D1E2F30-0000-4000-8000-00000000000A"
type = "Reboot"
at = 150
notice = "10m"
resources = ["web-0"]
approve_at = 240

[[events]]  # a neighbour's freeze, moved later, then cancelled by Azure
id = "0D1E2F30-0000-4000-8000-00000000000B"
type = "Freeze"
at = 180
notice = "5m"
resources = ["web-1"]
duration = 5
reschedule = [{ at = 320, notice = "4m" }]
cancel_at = 380

[[events]]  # a spot eviction with the minimum notice
id = "0D1E2F30-0000-4000-8000-00000000000C"
type = "Preempt"
at = 420
resources = ["spot-2"]

[[events]]  # a host failure: no notice at all
id = "0D1E2F30-0000-4000-8000-00000000000D"
type = "Reboot"
status = "Started"
at = 520
resources = ["web-0"]
"""
LEFT = ("completed", "cancelled", "gone")


def _env(data: Path) -> dict[str, str]:
    return dict(os.environ, SETUI_DATA_DIR=str(data), PYTHONUNBUFFERED="1",
                PYTHONIOENCODING="utf-8")


def record_run(scenario: Path, data: Path, speed: str) -> list[dict[str, Any]]:
    """Play ``scenario`` with `setui emulator` and record it with `setui watch --json`
    until every event has left; the watch's change records, connection lines aside."""
    events = len(load_scenario(str(scenario)).events)
    emulator = subprocess.Popen(
        [*SETUI, "emulator", "--port", "0", "--scenario", str(scenario), "--speed", speed],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(data))
    try:
        url = Lines(emulator).until(lambda line: line.startswith("http://"), 20,
                                    "the emulator's URL").strip()
        watch = subprocess.Popen(
            [*SETUI, "watch", "--json", "--endpoint", url, "--interval", "0.5"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, encoding="utf-8",
            env=_env(data))
        lines = Lines(watch)
        left = 0
        while left < events:
            line = lines.until(lambda text: json.loads(text)["change"] in LEFT, 90,
                               "every event to leave")
            left += 1
            del line
        watch.send_signal(signal.SIGINT)
        assert watch.wait(timeout=15) == 0, watch.stderr.read() if watch.stderr else ""
    finally:
        emulator.send_signal(signal.SIGINT)
        emulator.wait(timeout=15)
    records = [json.loads(text) for text in lines.seen]
    return [r for r in records if r["change"] != "connection"]


def clean_run(scenario: Path, data: Path, speed: str,
              ) -> tuple[list[dict[str, Any]], Path]:
    """A run in which the recorder itself missed nothing: a poll stalled for seconds on a
    busy machine makes its own gap (and an honest "not certain"), which is the recorder's
    story, not the incident's. Such a run is recorded again, afresh, up to three times."""
    for attempt in range(3):
        where = data.with_name(f"{data.name}-{attempt}")
        records = record_run(scenario, where, speed)
        if all(r["certain"] and not r["missed"] for r in records):
            return records, where
    pytest.fail(f"three runs of {scenario.name} each missed polls: {records!r}")


def lifecycle(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What must be the same, change for change; absolute times and incarnation numbers
    are the run's own."""
    return [(r["change"], r["event_id"], r["event_type"], r["status"], tuple(r["resources"]),
             r["initial"], r["certain"]) for r in records]


@pytest.mark.skipif(not POSIX, reason="SIGINT delivery to a child is POSIX-only here")
def test_a_recorded_run_exported_and_played_again_tells_the_same_story(
        tmp_path: Path) -> None:
    original = tmp_path / "drill.toml"
    original.write_text(DRILL, encoding="utf-8")
    first, recorded = clean_run(original, tmp_path / "first", SPEED)
    assert [r["change"] for r in first] == [
        "appeared", "appeared", "started", "completed", "rescheduled", "cancelled",
        "appeared", "started", "completed", "appeared", "completed"]

    exported = tmp_path / "exported.toml"
    done = subprocess.run([*SETUI, "history", "export-scenario", str(exported)],
                          capture_output=True, text=True, env=_env(recorded),
                          timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert "wrote 4 events" in done.stderr
    assert [e.id for e in load_scenario(str(exported)).events] == [
        e.id for e in load_scenario(str(original)).events]

    second, _ = clean_run(exported, tmp_path / "second", "1")
    assert lifecycle(second) == lifecycle(first), (first, second)
    # The early start stays early, and the reschedule moves the NotBefore as far.
    def early(records: list[dict[str, Any]]) -> bool:
        started = next(r for r in records if r["change"] == "started")
        return "before its NotBefore" in (started["detail"] or "")
    assert early(first) and early(second)


def test_export_of_nothing_recorded_says_so(tmp_path: Path) -> None:
    done = subprocess.run([*SETUI, "history", "export-scenario", str(tmp_path / "x.toml")],
                          capture_output=True, text=True, env=_env(tmp_path / "none"),
                          timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    assert "nothing has been recorded yet" in done.stderr
    assert not (tmp_path / "x.toml").exists()
