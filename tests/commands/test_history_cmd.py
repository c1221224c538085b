"""`setui history` in real processes, over a history recorded from the real emulator."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest

from setui.core.model import parse_document
from setui.core.tracker import Tracker
from setui.emulator.scenario import EventSpec, load_scenario
from setui.emulator.server import Emulator, ManualClock
from setui.emulator.timeline import Instance
from setui.store import AuditEntry, Store
from setui.store.history import content_hash

pytestmark = pytest.mark.slow  # starts processes: the slow tier (docs/testing.md)

STEP = 5.0  # seconds between polls, on the emulator's manual clock
LOOP = 1200.0  # the busy scenario's loop: every event of loop 0 is gone by then


def setui(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SETUI_DATA_DIR=str(data_dir))
    return subprocess.run([sys.executable, "-m", "setui.cli", *args], capture_output=True,
                          text=True, env=env, timeout=60, stdin=subprocess.DEVNULL)


@dataclass(frozen=True)
class Expected:
    """The story the emulator played for one event: kinds and their scenario times."""

    event_id: str
    kinds: list[str]
    times: list[float]


def expected_story(emulator: Emulator, index: int, spec: EventSpec) -> Expected:
    life = emulator.timeline.lifecycle(Instance(spec.id, spec, index, 0, 0.0))
    kinds, times = ["appeared"], [life.appear]
    end_of_schedule = life.start if life.start is not None else life.end
    for moved_at, _ in life.not_befores[1:]:
        if moved_at < end_of_schedule:
            kinds.append("rescheduled")
            times.append(moved_at)
    if life.start is not None and spec.status != "Started":
        kinds.append("started")
        times.append(life.start)
    kinds.append("completed" if life.start is not None else "cancelled")
    times.append(life.end)
    return Expected(spec.id, kinds, times)


@dataclass(frozen=True)
class Recorded:
    data_dir: Path
    epoch: float
    expected: list[Expected]
    polls: int
    operator_cancel: Expected  # the event an operator also said no to, in the dialog


@pytest.fixture(scope="module")
def busy(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """Poll the busy scenario every 5 s for a whole loop and record it, as watch does."""
    data_dir = tmp_path_factory.mktemp("busy") / "data"
    clock = ManualClock()
    scenario = load_scenario("busy")
    with Emulator(scenario, clock=clock) as emulator, Store.open_dir(data_dir) as store, \
            httpx.Client(trust_env=False, timeout=5.0) as http:
        tracker = Tracker()
        polls = 0
        after: tuple[int, str] | None = None  # the document before, as a poller says it
        while clock() - emulator.epoch <= LOOP:
            answer = http.get(f"{emulator.url}/metadata/scheduledevents",
                              params={"api-version": "2020-07-01"},
                              headers={"Metadata": "true"})
            assert answer.status_code == 200
            document = parse_document(answer.content)
            seen = datetime.fromtimestamp(clock(), timezone.utc)
            store.history.record(document, seen_at=seen, endpoint=emulator.url,
                                 changes=tracker.update(document, seen), after=after)
            after = (document.incarnation, content_hash(document))
            polls += 1
            clock.advance(STEP)
        expected = [expected_story(emulator, i, spec) for i, spec in enumerate(scenario.events)]
        # An operator opened the approval dialog for the event Azure later cancelled, and
        # said no: the same word, "cancelled", for two different things.
        cancelled = next(e for e in expected if e.kinds[-1] == "cancelled")
        store.audit_log.append(AuditEntry(
            action="cancelled", user="oncall", host="vm-web-0", endpoint=emulator.url,
            time=datetime.fromtimestamp(emulator.epoch + cancelled.times[0] + 2.5,
                                        timezone.utc),
            event_id=cancelled.event_id, incarnation=1))
        return Recorded(data_dir, emulator.epoch, expected, polls, cancelled)


def story_of(event_id: str, data_dir: Path, subprocess_run: bool) -> list[dict[str, Any]]:
    """`setui history --event ID --json`: in a real process, or in this one (same code,
    same parser) to keep ten stories fast."""
    if subprocess_run:
        done = setui("history", "--event", event_id, "--json", data_dir=data_dir)
        assert done.returncode == 0, done.stderr
        text = done.stdout
    else:
        from setui.cli import build_parser
        from setui.commands.history import history_command

        args = build_parser().parse_args(["history", "--event", event_id, "--json",
                                          "--data-dir", str(data_dir)])
        out, err = io.StringIO(), io.StringIO()
        assert history_command(args, out=out, err=err) == 0, err.getvalue()
        text = out.getvalue()
    return [json.loads(line) for line in text.splitlines()]


def test_history_event_tells_the_story_the_emulator_played(busy: Recorded) -> None:
    kinds_seen = set()
    for number, expected in enumerate(busy.expected):
        story = story_of(expected.event_id, busy.data_dir, subprocess_run=number < 2)
        operator = [s for s in story if s["source"] == "audit"]
        assert len(operator) == (expected == busy.operator_cancel)  # tested below
        story = [s for s in story if s["source"] != "audit"]
        assert [s["kind"] for s in story] == expected.kinds, expected.event_id
        for entry, scenario_time in zip(story, expected.times, strict=True):
            seen = datetime.fromisoformat(entry["time"].replace("Z", "+00:00")).timestamp()
            # First seen at the first poll at or after the moment it happened.
            assert 0 <= seen - (busy.epoch + scenario_time) < STEP, (expected.event_id, entry)
            assert entry["event_id"] == expected.event_id and entry["source"] == "history"
        kinds_seen.update(expected.kinds)
    # The scenario covers every way an event lives and ends; so must this test.
    assert kinds_seen == {"appeared", "rescheduled", "started", "completed", "cancelled"}


def test_history_event_in_words(busy: Recorded) -> None:
    redeploy = next(e for e in busy.expected if "rescheduled" in e.kinds)
    done = setui("history", "--event", redeploy.event_id.lower(), data_dir=busy.data_dir)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"Event {redeploy.event_id} (Redeploy)"
    assert "first seen: Scheduled, NotBefore" in lines[1]
    assert "rescheduled: NotBefore" in lines[2] and " -> " in lines[2]
    assert lines[3].endswith("started")
    assert lines[4].endswith("gone: completed (removed after it started)")
    cancelled = next(e for e in busy.expected if e.kinds[-1] == "cancelled")
    done = setui("history", "--event", cancelled.event_id, data_dir=busy.data_dir)
    assert done.stdout.splitlines()[-1].endswith(
        "gone: cancelled by Azure (removed while still Scheduled)")
    failure = next(e for e in busy.expected if "started" not in e.kinds
                   and e.kinds[-1] == "completed")
    done = setui("history", "--event", failure.event_id, data_dir=busy.data_dir)
    assert "first seen, already Started (no notice)" in done.stdout


def test_history_lists_newest_first(busy: Recorded) -> None:
    done = setui("history", "--json", "--limit", "1000", data_dir=busy.data_dir)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert set(records[0]) == {"incarnation", "first_seen", "last_seen", "endpoint",
                               "summary", "changes"}
    numbers = [r["incarnation"] for r in records]
    assert numbers == sorted(numbers, reverse=True) and numbers[-1] == 1
    assert len(numbers) == len(set(numbers))  # polled 241 times, each document once
    assert len(records) < busy.polls / 3
    assert records[-1]["summary"] == "recording began: no events"
    human = setui("history", "--limit", "3", data_dir=busy.data_dir)
    lines = human.stdout.splitlines()
    assert lines[0].startswith("first seen ")
    assert [int(line.split()[3]) for line in lines[1:4]] == numbers[:3]
    assert lines[1].split()[4:] == records[0]["summary"].split()
    assert lines[-1] == "(the 3 newest; --limit N for more)"


def test_history_since(busy: Recorded) -> None:
    cut = datetime.fromtimestamp(busy.epoch + 600, timezone.utc)
    done = setui("history", "--json", "--limit", "1000", "--since",
                 cut.strftime("%Y-%m-%dT%H:%M:%S"), data_dir=busy.data_dir)
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert records
    assert all(r["first_seen"] >= cut.strftime("%Y-%m-%dT%H:%M:%S") for r in records)
    everything = setui("history", "--json", "--limit", "1000", data_dir=busy.data_dir)
    assert len(records) < len(everything.stdout.splitlines())


def test_history_show_and_diff(busy: Recorded) -> None:
    listed = [json.loads(line) for line in setui(
        "history", "--json", "--limit", "1000", data_dir=busy.data_dir).stdout.splitlines()]
    started = next(r for r in reversed(listed)
                   if any(c["kind"] == "started" for c in r["changes"]))
    number = started["incarnation"]
    done = setui("history", "show", str(number), "--diff", data_dir=busy.data_dir)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"Incarnation {number}\n")
    assert f'"DocumentIncarnation": {number}' in done.stdout
    assert f"Changes since incarnation {number - 1}" in done.stdout
    assert '~ started' in done.stdout  # what the history told of it, then its fields
    assert 'EventStatus: "Scheduled" -> "Started"' in done.stdout
    # Options may follow the sub-command too.
    as_json = setui("history", "show", str(number), "--diff", "--json", "--data-dir",
                    str(busy.data_dir), data_dir=busy.data_dir.parent / "elsewhere")
    data = json.loads(as_json.stdout)
    assert data["document"]["DocumentIncarnation"] == number
    assert data["previous"]["incarnation"] == number - 1
    changed = [d for d in data["diff"] if d["change"] == "changed"]
    assert any(d["fields"].get("EventStatus") == ["Scheduled", "Started"] for d in changed)
    plain = setui("history", "show", str(number), data_dir=busy.data_dir)
    assert "Changes since" not in plain.stdout


def test_nothing_recorded_yet(tmp_path: Path) -> None:
    done = setui("history", data_dir=tmp_path / "empty")
    assert done.returncode == 0
    assert "No history recorded yet" in done.stdout
    assert setui("history", "--json", data_dir=tmp_path / "empty").stdout == ""
    assert not (tmp_path / "empty").exists()  # reading never creates anything
    missing = setui("history", "show", "3", data_dir=tmp_path / "empty")
    assert missing.returncode == 1 and "nothing has been recorded" in missing.stderr


def test_unknown_incarnation_and_event(busy: Recorded) -> None:
    done = setui("history", "show", "999999", data_dir=busy.data_dir)
    assert done.returncode == 1 and "incarnation 999999 is not in the history" in done.stderr
    done = setui("history", "--event", "NOPE", data_dir=busy.data_dir)
    assert done.returncode == 1 and "'NOPE' is too short to name an event" in done.stderr
    done = setui("history", "--event", "NOPE-NOT-AN-EVENT", data_dir=busy.data_dir)
    assert done.returncode == 1 and "no event with an EventId starting 'NOPE-NOT-AN-EVENT'" \
        in done.stderr


def test_event_by_unique_prefix(busy: Recorded) -> None:
    """The eight characters the history and the audit log show are enough to ask."""
    event = busy.expected[0]
    full = setui("history", "--event", event.event_id, "--json", data_dir=busy.data_dir)
    short = setui("history", "--event", event.event_id[:8].lower(), "--json",
                  data_dir=busy.data_dir)
    assert full.returncode == 0 and short.returncode == 0, short.stderr
    assert short.stdout == full.stdout


def test_an_operator_cancel_is_not_azure_cancelling(busy: Recorded) -> None:
    """The audit's "cancelled" (an operator said no) and the history's (Azure removed the
    event while still Scheduled) are told apart, in words and in --json."""
    event = busy.operator_cancel
    done = setui("history", "--event", event.event_id, data_dir=busy.data_dir)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    [operator] = [line for line in lines if " audit  " in line]
    assert operator.endswith("operator oncall on vm-web-0 dismissed the approval dialog, "
                             "nothing sent")
    assert "by Azure" not in operator
    assert lines[-1].endswith("gone: cancelled by Azure (removed while still Scheduled)")
    story = story_of(event.event_id, busy.data_dir, subprocess_run=True)
    by_source = {(s["source"], s["kind"]): s for s in story}
    assert by_source["audit", "cancelled"]["words"] == (  # an older record's word, kept
        "operator oncall on vm-web-0 dismissed the approval dialog, nothing sent")
    assert by_source["audit", "cancelled"]["audit_seq"] == 1
    assert by_source["history", "cancelled"]["words"] == (
        "gone: cancelled by Azure (removed while still Scheduled)")


@pytest.mark.parametrize("args", [["history", "--limit", "0"], ["history", "--since", "soon"],
                                  ["history", "show", "x"]])
def test_usage_errors(args: list[str], tmp_path: Path) -> None:
    assert setui(*args, data_dir=tmp_path).returncode == 2


@pytest.mark.parametrize("args, words", [
    (["history", "--since", "999999d"], "reaches back before the year 1"),
    (["history", "--since", "9" * 40 + "w"], "reaches back before the year 1"),
    (["history", "--since", "0001-01-01T00:00+05:00"], "before the year 1 in UTC"),
    (["history", "--limit", "9999999999999999999999"], "at most 9223372036854775807"),
    (["history", "--limit", "9223372036854775808"], "at most 9223372036854775807"),
    (["history", "show", "99999999999999999999999"], "at most 9223372036854775807"),
    (["history", "show", "-1"], "from 0 to 9223372036854775807"),
])
def test_numbers_and_times_out_of_range_are_usage_errors(busy: Recorded, args: list[str],
                                                         words: str) -> None:
    """On a real store: before, these reached SQLite or datetime and crashed."""
    done = setui(*args, data_dir=busy.data_dir)
    assert done.returncode == 2, done.stderr
    assert words in done.stderr and "Traceback" not in done.stderr


def test_the_largest_numbers_and_earliest_times_still_work(busy: Recorded) -> None:
    done = setui("history", "--json", "--limit", "9223372036854775807", "--since",
                 "0999-01-01", data_dir=busy.data_dir)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == len(setui(
        "history", "--json", "--limit", "1000", data_dir=busy.data_dir).stdout.splitlines())
    done = setui("history", "show", "9223372036854775807", data_dir=busy.data_dir)
    assert done.returncode == 1 and "is not in the history" in done.stderr


def test_an_empty_database_file_is_nothing_recorded(tmp_path: Path) -> None:
    """A setui killed between creating the file and writing the schema leaves 0 bytes."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "setui.db").write_bytes(b"")
    done = setui("history", data_dir=data)
    assert done.returncode == 0, done.stderr
    assert "No history recorded yet" in done.stdout
    assert (data / "setui.db").read_bytes() == b""  # reading changed nothing


def test_a_directory_named_like_the_database(tmp_path: Path) -> None:
    (tmp_path / "data" / "setui.db").mkdir(parents=True)
    done = setui("history", data_dir=tmp_path / "data")
    assert done.returncode == 1
    assert "it is a directory, not a setui database" in done.stderr
    assert "disk" not in done.stderr and "Traceback" not in done.stderr


def test_hostile_history_is_printed_safely(tmp_path: Path) -> None:
    hostile = "\x1b]0;owned\x07\u202e\x1b[2J"
    body = {"DocumentIncarnation": 7, "Events": [{
        "EventId": f"E{hostile}", "EventType": f"Reboot{hostile}", "EventStatus": "Scheduled",
        "Resources": [hostile], "NotBefore": "", "Description": hostile}]}
    t0 = datetime(2024, 5, 14, 9, 30, tzinfo=timezone.utc)
    with Store.open_dir(tmp_path / "data") as store:
        store.history.record(parse_document(json.dumps(body)), seen_at=t0,
                             endpoint="http://e", changes=())
        store.audit_log.append(AuditEntry(action="refused", time=t0 + timedelta(seconds=1),
                                          user=hostile, host="h", endpoint="http://e",
                                          event_id=f"E{hostile}", error=hostile))
    outputs = [setui(*args, data_dir=tmp_path / "data") for args in (
        ["history"], ["history", "show", "7", "--diff"], ["history", "--event", f"E{hostile}"])]
    for done in outputs:
        assert done.returncode == 0, done.stderr
        assert not any(c in done.stdout + done.stderr for c in "\x1b\x07\u202e"), done.stdout
    assert "\\x1b]0;owned\\x07\\u202e" in outputs[1].stdout
    assert "refused by setui" in outputs[2].stdout
