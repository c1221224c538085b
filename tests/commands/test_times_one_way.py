"""Every headless output writes time one way (tests/support/timeforms.py): watch and watch --json,
events, the approve prompt, history (list, --json, show --diff, --event), report (md and
json) and audit, from real processes against the emulator, in a zone that is not UTC."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from setui.emulator.clock import ManualClock
from setui.emulator.scenario import load_scenario
from setui.emulator.server import Emulator
from tests.support.children import SETUI, wait_until
from tests.support.timeforms import foreign_in_json, foreign_in_text

pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGINT to a child is POSIX-only")


@dataclass
class Outputs:
    texts: dict[str, str] = field(default_factory=dict)  # what people read
    jsons: dict[str, list[object]] = field(default_factory=dict)  # what machines read


def _env(data_dir: Path) -> dict[str, str]:
    return dict(os.environ, SETUI_DATA_DIR=str(data_dir), PYTHONUNBUFFERED="1",
                PYTHONIOENCODING="utf-8", TZ="Europe/Oslo")


def _watch(url: str, data_dir: Path, out: Path, *extra: str) -> subprocess.Popen[bytes]:
    with out.open("wb") as sink:
        return subprocess.Popen([*SETUI, "watch", "--endpoint", url, "--interval", "0.2",
                                 *extra], stdout=sink, stderr=subprocess.DEVNULL,
                                env=_env(data_dir))


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outputs]:
    data_dir = tmp_path_factory.mktemp("times") / "data"
    found = Outputs()

    def run(name: str, *args: str, stdin: str | None = None, code: int = 0,
            as_json: bool = False) -> str:
        done = subprocess.run([*SETUI, *args], capture_output=True, text=True, timeout=90,
                              env=_env(data_dir), input=stdin,
                              stdin=subprocess.DEVNULL if stdin is None else None)
        assert done.returncode == code, (name, done.stdout, done.stderr)
        if as_json:
            found.jsons[name] = [json.loads(line) for line in done.stdout.splitlines()
                                 if line.strip()] if not done.stdout.startswith("{\n") \
                else [json.loads(done.stdout)]
        else:
            # The stored document is the service's text, shown as it came.
            found.texts[name] = done.stdout.split("The document:")[0] + done.stderr
        return done.stdout

    clock = ManualClock()
    with Emulator(load_scenario("busy"), clock=clock) as emulator:
        text_out, json_out = data_dir.parent / "watch.txt", data_dir.parent / "watch.json"
        text = _watch(emulator.url, data_dir, text_out)
        machine = _watch(emulator.url, data_dir, json_out, "--json")
        for out in (text_out, json_out):
            wait_until(lambda out=out: "live" in out.read_text(), 60, "watch's first answer")
        # Past the busy scenario's reschedule (the Redeploy of db-0, near second 240).
        for _ in range(10):
            clock.advance(30)
            asked = len(emulator.requests)
            wait_until(lambda asked=asked: len(emulator.requests) >= asked + 4, 30,
                       "both watches polled")
        for proc in (text, machine):
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=30) == 0
        found.texts["watch"] = text_out.read_text()
        found.jsons["watch --json"] = [json.loads(line) for line in
                                       json_out.read_text().splitlines()]
        assert "rescheduled" in found.texts["watch"], found.texts["watch"]
        run("events", "events", "--endpoint", emulator.url)
        listed = json.loads(run("events --json", "events", "--endpoint", emulator.url,
                                "--json", as_json=True))
        scheduled = [e for e in listed["events"] if e["status"] == "Scheduled"]
        latest = max(scheduled, key=lambda e: e["seconds_to_not_before"])
        run("approve prompt", "approve", "--endpoint", emulator.url, latest["event_id"],
            stdin="n\n", code=3)
        run("approve --yes", "approve", "--endpoint", emulator.url,
            scheduled[0]["event_id"], "--yes", "--allow-other-vms")
    run("history", "history")
    history = run("history --json", "history", "--json", as_json=True)
    moved = next(json.loads(line) for line in history.splitlines()
                 if "rescheduled" in line and '"incarnation"' in line)
    number = str(moved["incarnation"])
    rescheduled = next(c["event_id"] for c in moved["changes"] if c["kind"] == "rescheduled")
    run("history show --diff", "history", "show", number, "--diff")
    run("history show --diff --json", "history", "show", number, "--diff", "--json",
        as_json=True)
    run("history --event", "history", "--event", rescheduled)
    run("history --event --json", "history", "--event", rescheduled, "--json", as_json=True)
    run("report", "report")
    run("report --format json", "report", "--format", "json", as_json=True)
    run("audit", "audit")
    run("audit --json", "audit", "--json", as_json=True)
    yield found


@pytest.mark.slow
def test_people_read_one_form(outputs: Outputs) -> None:
    assert set(outputs.texts) >= {"watch", "events", "approve prompt", "history",
                                  "history show --diff", "history --event", "report", "audit"}
    foreign = [f for name, text in outputs.texts.items() for f in foreign_in_text(text, name)]
    assert not foreign, "\n".join(foreign)


@pytest.mark.slow
def test_machines_read_iso_8601_utc(outputs: Outputs) -> None:
    foreign = [f for name, items in outputs.jsons.items()
               for f in foreign_in_json(items, name)]
    assert not foreign, "\n".join(foreign)


@pytest.mark.slow
def test_the_prompt_counts_down_as_everything_else(outputs: Outputs) -> None:
    prompt = outputs.texts["approve prompt"]
    not_before = next(line for line in prompt.splitlines() if "NotBefore" in line)
    assert re.search(r"NotBefore    \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC .*, T-\d+:\d\d$",
                     not_before), not_before


def test_the_docs_watch_example_is_what_watch_writes() -> None:
    from setui.commands.watch import RECORD_KEYS, format_record

    def record(**values: object) -> dict[str, object]:
        blank: dict[str, object] = {key: None for key in RECORD_KEYS}
        blank.update(resources=[], this_vm=False, initial=False, certain=True, missed=0)
        return {**blank, **values}

    docs = (Path(__file__).parents[2] / "docs" / "operating.md").read_text(encoding="utf-8")
    for line in (
        record(time="2026-11-24T10:19:52Z", change="connection", state="live"),
        record(time="2026-11-24T10:19:52Z", change="appeared", initial=True, incarnation=1,
               event_type="Reboot", status="Scheduled",
               event_id="11111111-1111-1111-1111-111111111111",
               not_before="2026-11-24T10:34:22Z", resources=["vm-0"], this_vm=True),
        record(time="2026-11-24T10:20:20Z", change="appeared", incarnation=2,
               event_type="Freeze", status="Scheduled",
               event_id="22222222-2222-2222-2222-222222222222",
               not_before="2026-11-24T10:30:19Z", resources=["vm-1"]),
    ):
        assert format_record(line) + "\n" in docs
