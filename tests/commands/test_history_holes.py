"""The history's holes end to end: a store written by real `setui watch`, `setui events`
and `setui approve` processes against the real emulator, then read by `history`,
`report` and the replay's recording.

A hole is a property of the record: the same whatever `--limit` lists, never over a
stored incarnation (somebody saw the document then), never under a second.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from setui.core.model import parse_iso
from setui.emulator.clock import ManualClock
from setui.emulator.scenario import load_scenario
from setui.emulator.server import Emulator
from tests.support.children import SETUI, Lines, wait_until

pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGINT to a child is POSIX-only")


def _env(data_dir: Path) -> dict[str, str]:
    return dict(os.environ, SETUI_DATA_DIR=str(data_dir), PYTHONUNBUFFERED="1",
                PYTHONIOENCODING="utf-8")


def _run(data_dir: Path, *args: str, stdin: str | None = None
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SETUI, *args], capture_output=True, text=True, timeout=90,
                          env=_env(data_dir), input=stdin,
                          stdin=subprocess.DEVNULL if stdin is None else None)


def _watch(emulator: Emulator, clock: ManualClock, data_dir: Path, steps: int) -> None:
    """`setui watch` for ``steps`` moves of the clock, each seen by a poll; then Ctrl-C."""
    proc = subprocess.Popen([*SETUI, "watch", "--json", "--endpoint", emulator.url,
                             "--interval", "0.2"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(data_dir))
    lines = Lines(proc)
    lines.until(lambda line: '"state": "live"' in line, 60, "watch's first answer")
    for _ in range(steps):
        clock.advance(10)
        asked = len(emulator.requests)
        wait_until(lambda asked=asked: len(emulator.requests) >= asked + 2, 30,
                   "two polls after a move")
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 0, proc.stderr.read() if proc.stderr else ""


@dataclass(frozen=True)
class Written:
    data_dir: Path
    one_shots: list[int]  # the incarnations events and approve read


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Written]:
    data_dir = tmp_path_factory.mktemp("holes") / "data"
    clock = ManualClock()
    one_shots: list[int] = []
    with Emulator(load_scenario("busy"), clock=clock) as emulator:
        _watch(emulator, clock, data_dir, steps=5)
        clock.advance(90)  # nothing records: a hole
        for wait in (0, 13):
            clock.advance(wait)
            done = _run(data_dir, "events", "--json", "--endpoint", emulator.url)
            assert done.returncode == 0, done.stderr
            listed = json.loads(done.stdout)
            one_shots.append(listed["incarnation"])
        scheduled = [e["event_id"] for e in listed["events"]  # type: ignore[possibly-undefined]
                     if e["status"] == "Scheduled"]  # listed: the loop above runs twice
        clock.advance(20)
        done = _run(data_dir, "approve", "--endpoint", emulator.url, scheduled[0], "--yes",
                    "--allow-other-vms")
        assert done.returncode == 0, done.stderr
        clock.advance(60)
        done = _run(data_dir, "approve", "--endpoint", emulator.url, scheduled[-1],
                    stdin="n\n")
        assert done.returncode == 3, done.stderr
        clock.advance(100)
        _watch(emulator, clock, data_dir, steps=3)
    yield Written(data_dir, one_shots)


def _lines(written: Written, *args: str) -> list[dict[str, Any]]:
    done = _run(written.data_dir, *args)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def _time(text: str) -> datetime:
    moment = parse_iso(text)
    assert moment is not None, text
    return moment


def _holes(items: list[dict[str, Any]], *, open_ones: bool = False
           ) -> list[tuple[datetime, datetime]]:
    """The closed holes listed (or the open one: nothing records now), in list order."""
    return [(_time(i["not_recording_from"]), _time(i["not_recording_until"]))
            for i in items if "not_recording_from" in i and bool(i.get("open")) is open_ones]


def _records(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [i for i in items if "incarnation" in i]


@pytest.mark.slow
def test_the_record_was_written_by_every_kind_of_reader(written: Written) -> None:
    numbers = {r["incarnation"] for r in _records(_lines(written, "history", "--json",
                                                         "--limit", "100"))}
    assert set(written.one_shots) <= numbers, "events did not record what it read"


@pytest.mark.slow
def test_a_hole_is_the_same_whatever_limit_lists_it(written: Written) -> None:
    everything = _lines(written, "history", "--json", "--limit", "100")
    whole = _holes(everything)
    assert len(whole) >= 3, "too few holes between the runs: the test proves nothing"
    for limit in ("2", "3", "8"):
        items = _lines(written, "history", "--json", "--limit", limit)
        oldest = _time(_records(items)[-1]["first_seen"])
        # Every hole among the listed incarnations, as the whole record has it.
        assert _holes(items) == [h for h in whole if h[0] >= oldest], limit
        # The open one (nothing records now) runs to when each command ran: only its
        # start is the record's.
        assert [a for a, _ in _holes(items, open_ones=True)] == [
            a for a, _ in _holes(everything, open_ones=True)], limit


@pytest.mark.slow
def test_no_hole_covers_a_stored_incarnation_or_lasts_under_a_second(
        written: Written) -> None:
    items = _lines(written, "history", "--json", "--limit", "100")
    records = _records(items)
    closed, opened = _holes(items), _holes(items, open_ones=True)
    # In the record's own clock (the service's): between its first and last sighting,
    # but for an open hole, which runs on to now.
    first = min(_time(r["first_seen"]) for r in records)
    last = max(_time(r["last_seen"]) for r in records)
    for start, end in closed:
        assert first <= start < end <= last, (start, end)
    for start, _ in opened:
        assert start >= last
    for start, end in closed + opened:
        assert (end - start).total_seconds() >= 1, (start, end)
        for record in records:
            seen = _time(record["first_seen"]), _time(record["last_seen"])
            assert not (start < seen[1] and seen[0] < end), (
                f"incarnation {record['incarnation']} seen {seen} lies in the hole "
                f"{start}..{end}")


@pytest.mark.slow
def test_report_and_replay_tell_the_same_holes(written: Written) -> None:
    from setui.monitor.replay import load_recording
    from setui.store import Store

    closed = sorted(_holes(_lines(written, "history", "--json", "--limit", "100")))
    done = _run(written.data_dir, "report", "--format", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)["holes"]
    assert [(_time(h["from"]), _time(h["to"])) for h in report if not h.get("open")] == closed
    with Store.open_dir(written.data_dir, readonly=True) as store:
        recording = load_recording(store.record)
    assert recording is not None
    assert [(h.start, h.end) for h in recording.holes if not h.open] == closed


@pytest.mark.slow
def test_events_lists_even_where_its_reading_cannot_be_kept(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the data directory should be")
    with Emulator(load_scenario("live-migration"), clock=ManualClock()) as emulator:
        done = _run(blocker / "data", "events", "--endpoint", emulator.url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Incarnation ")
    assert "setui events: not recorded in the history: cannot create" in done.stderr
    assert "Traceback" not in done.stderr
