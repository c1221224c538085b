"""Rehearse: record a scenario's run, export it, play the export, record again; the same
lifecycle, change for change.

The fast test does it all in this process on a manual clock: the scenario recorded a poll
a scenario second through the real tracker and store (tests/support/recording.py), exported by
`setui history export-scenario`'s own function, the export recorded the same way. The
slow one plays that export with real processes over loopback: `setui history
export-scenario`, `setui emulator` sped up, `setui watch --json`."""

from __future__ import annotations

import argparse
import io
import json
import os
import signal
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from setui.cli import build_parser
from setui.commands.history import history_command
from setui.emulator.scenario import load_scenario, parse_scenario
from setui.store import DB_NAME, Store
from tests.support.children import SETUI, Lines
from tests.support.recording import record_scenario

POSIX = os.name == "posix"
# Every change at least 30 scenario seconds from the next (the sped-up play's polls every
# 0.5 s see every 12.5), and the first well after the recorder is up: the runs cannot see
# them merge or part differently.
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
SECONDS = 620  # the drill's last event has left by then
# The slow test's play: a scenario second is 40 ms, so polls every 0.5 s see every 12.5.
SPEED = "25"
STORY = ["appeared", "appeared", "started", "completed", "rescheduled", "cancelled",
         "appeared", "started", "completed", "appeared", "completed"]


def record(data: Path, scenario: str) -> None:
    """``scenario`` played from second 0 to SECONDS into a store in ``data``."""
    data.mkdir(parents=True)
    record_scenario(data / DB_NAME, scenario, seconds=SECONDS).close()


def changes(data: Path) -> list[tuple[Any, ...]]:
    """Each change the store holds, oldest first: what must be the same, the scenario
    second it was seen at (a manual clock makes that exact too), and its detail."""
    with Store.open_dir(data, readonly=True) as store:
        records = sorted(store.history.incarnations(limit=None), key=lambda r: r.first_seen)
    t0 = records[0].first_seen
    return [(c.kind, c.event_id, c.event_type, c.status, c.initial, c.certain,
             (r.first_seen - t0).total_seconds(), c.detail)
            for r in records for c in r.changes]


def early(story: Iterable[tuple[str, str]]) -> bool:
    """Of (change, detail): the first start was early, approved before its NotBefore."""
    return "before its NotBefore" in next(detail for kind, detail in story
                                          if kind == "started")


def export(data: Path, target: Path) -> tuple[int, str]:
    """`setui history export-scenario TARGET` on ``data``, in this process."""
    argv = ["history", "export-scenario", str(target), "--data-dir", str(data)]
    args: argparse.Namespace = build_parser(argv).parse_args(argv)
    out, err = io.StringIO(), io.StringIO()
    return history_command(args, out=out, err=err), err.getvalue()


def test_a_recorded_run_exported_and_played_again_tells_the_same_story(
        tmp_path: Path) -> None:
    record(tmp_path / "first", DRILL)
    first = changes(tmp_path / "first")
    assert [c[0] for c in first] == STORY
    exported = tmp_path / "exported.toml"
    code, said = export(tmp_path / "first", exported)
    assert code == 0, said
    assert "wrote 4 events" in said
    assert [e.id for e in load_scenario(str(exported)).events] == [
        e.id for e in parse_scenario(DRILL).events]
    record(tmp_path / "second", exported.read_text(encoding="utf-8"))
    # the same changes at the same seconds, in the same words: the reschedule moves the
    # NotBefore as far, and the early start stays early
    assert changes(tmp_path / "second") == first
    assert early((c[0], c[7]) for c in first)


def _env(data: Path) -> dict[str, str]:
    return dict(os.environ, SETUI_DATA_DIR=str(data), PYTHONUNBUFFERED="1",
                PYTHONIOENCODING="utf-8")


def watch_run(scenario: Path, data: Path) -> list[dict[str, Any]]:
    """Play ``scenario`` with `setui emulator` and record it with `setui watch --json`
    until every event has left; the watch's change records, connection lines aside."""
    events = len(load_scenario(str(scenario)).events)
    emulator = subprocess.Popen(
        [*SETUI, "emulator", "--port", "0", "--scenario", str(scenario), "--speed", SPEED],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(data))
    try:
        url = Lines(emulator).until(lambda line: line.startswith("http://"), 20,
                                    "the emulator's URL").strip()
        watch = subprocess.Popen(
            [*SETUI, "watch", "--json", "--endpoint", url, "--interval", "0.5"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, encoding="utf-8",
            env=_env(data))
        lines = Lines(watch)
        for _ in range(events):
            lines.until(lambda text: json.loads(text)["change"] in LEFT, 90,
                        "every event to leave")
        watch.send_signal(signal.SIGINT)
        assert watch.wait(timeout=15) == 0, watch.stderr.read() if watch.stderr else ""
    finally:
        emulator.send_signal(signal.SIGINT)
        emulator.wait(timeout=15)
    records = [json.loads(text) for text in lines.seen]
    return [r for r in records if r["change"] != "connection"]


def clean_watch_run(scenario: Path, data: Path) -> list[dict[str, Any]]:
    """A run in which the recorder itself missed nothing: a poll stalled for seconds on a
    busy machine makes its own gap (and an honest "not certain"), which is the recorder's
    story, not the incident's. Such a run is recorded again, afresh, up to three times."""
    for attempt in range(3):
        records = watch_run(scenario, data.with_name(f"{data.name}-{attempt}"))
        if all(r["certain"] and not r["missed"] for r in records):
            return records
    pytest.fail(f"three runs of {scenario.name} each missed polls: "
                f"{records!r}")  # type: ignore[possibly-undefined]  # three runs


@pytest.mark.slow
@pytest.mark.skipif(not POSIX, reason="SIGINT delivery to a child is POSIX-only here")
def test_the_export_played_by_real_processes_tells_the_same_story(tmp_path: Path) -> None:
    record(tmp_path / "first", DRILL)
    first = changes(tmp_path / "first")
    exported = tmp_path / "exported.toml"
    done = subprocess.run([*SETUI, "history", "export-scenario", str(exported)],
                          capture_output=True, text=True, env=_env(tmp_path / "first"),
                          timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert "wrote 4 events" in done.stderr
    played = clean_watch_run(exported, tmp_path / "played")
    assert [(r["change"], r["event_id"], r["event_type"], r["status"], r["initial"],
             r["certain"]) for r in played] == [c[:6] for c in first], (first, played)
    assert early((r["change"], r["detail"] or "") for r in played)


def test_export_of_nothing_recorded_says_so(tmp_path: Path) -> None:
    code, said = export(tmp_path / "none", tmp_path / "x.toml")
    assert code == 1
    assert "nothing has been recorded yet" in said
    assert not (tmp_path / "x.toml").exists()
