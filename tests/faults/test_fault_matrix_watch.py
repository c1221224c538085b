"""The fault matrix for `setui watch --json`: a real process polling an in-process
emulator over loopback HTTP, whose faults are injected and then healed mid-run."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from setui.core.client import REQUEST_TIMEOUT
from setui.emulator.clock import ManualClock
from setui.emulator.faults import parse_faults
from setui.emulator.server import Emulator
from setui.store import Store
from tests.support.children import SETUI, Lines, wait_until
from tests.support.faultmatrix import (
    AFTER_AT,
    AFTER_ID,
    BEFORE_AT,
    BEFORE_ID,
    CASE_IDS,
    CASES,
    POSIX,
    Case,
    scenario,
    stored,
    watch_env,
)

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not POSIX, reason="SIGINT delivery to a child is POSIX-only")]


def _record(line: str) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except ValueError:
        pytest.fail(f"not a JSON record: {line!r}")
    assert isinstance(record, dict)
    return record


def _is(change: str, **fields: object) -> Any:
    def check(line: str) -> bool:
        record = _record(line)
        return record["change"] == change and all(record[k] == v for k, v in fields.items())
    return check


def _watch(url: str, data: Path, tmp_path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*SETUI, "watch", "--json", "--endpoint", url, "--interval", "0.2", "--vm-name", "web-0",
         "--data-dir", str(data)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, encoding="utf-8",
        env=watch_env(tmp_path))


def _stop(proc: subprocess.Popen[str]) -> str:
    """Ctrl-C; the exit status and stderr, which must hold no traceback."""
    proc.send_signal(signal.SIGINT)
    code = proc.wait(timeout=15)
    errors = proc.stderr.read() if proc.stderr else ""
    assert code == 0, errors
    assert "Traceback" not in errors, errors
    return errors


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_watch_rides_out_the_fault_and_recovers_by_itself(case: Case, tmp_path: Path) -> None:
    clock = ManualClock(1_800_000_000.0)
    emulator = Emulator(scenario(), clock=clock)
    clock.set(emulator.epoch + BEFORE_AT)
    data = tmp_path / "data"
    with emulator:
        proc = _watch(emulator.url, data, tmp_path)
        try:
            lines = Lines(proc)
            lines.until(_is("connection", state="live"), 20, "the first live line")
            lines.until(_is("appeared", event_id=BEFORE_ID), 10, "the first event")
            with Store.open_dir(data) as store:
                wait_until(lambda: bool(stored(store)), 10, "the first document in the store")
                before = stored(store)

            case.inject(emulator)
            failing = _record(lines.until(
                lambda line: _record(line)["change"] == "connection"
                and _record(line)["state"] != "live", 20, f"a failing state line ({case.name})"))
            assert failing["state"] == ("unreachable" if case.faults is None else "retrying")
            for words in case.said(REQUEST_TIMEOUT):
                assert words in failing["error"], failing
            assert failing["failures"] >= 1

            # The document moves on while the endpoint is broken; after healing, watch
            # must find that by itself (no one presses anything).
            clock.set(emulator.epoch + AFTER_AT)
            case.heal(emulator)
            recovery = 30 if case.slow else 20
            lines.until(_is("connection", state="live"), recovery, "live again after healing")
            lines.until(_is("appeared", event_id=AFTER_ID), 10, "the event of the new document")
        finally:
            if proc.poll() is None:
                _stop(proc)
    with Store.open_dir(data) as store:
        after = stored(store)
    for incarnation, record in before.items():  # nothing known before the fault was lost
        assert after.get(incarnation) == record
    assert len(after) > len(before)  # and the new document was recorded


def test_watch_refused_from_the_start_then_the_service_appears(tmp_path: Path) -> None:
    emulator = Emulator(scenario())
    emulator.start()
    emulator.stop()  # keeps its port: nothing listens there until start()
    proc = _watch(emulator.url, tmp_path / "data", tmp_path)
    try:
        lines = Lines(proc)
        lines.until(_is("connection", state="enabling"), 20, "the enabling line")
        refused = _record(lines.until(_is("connection", state="unreachable"), 20,
                                      "the unreachable line"))
        assert "connection refused" in refused["error"]
        emulator.start()
        lines.until(_is("connection", state="live"), 20, "live once the service is there")
        lines.until(_is("appeared", event_id=BEFORE_ID), 10, "the event")
    finally:
        emulator.stop()
        if proc.poll() is None:
            _stop(proc)


def test_watch_waits_out_a_slow_first_call_as_enabling_not_as_a_failure(
        tmp_path: Path) -> None:
    # Longer than the 5 s of a normal request, far shorter than the 150 s allowed to the
    # first call (the 2 minutes themselves are covered on a scaled clock in
    # test_fault_first_call.py).
    with Emulator(scenario(), faults=parse_faults("first-delay=6")) as emulator:
        proc = _watch(emulator.url, tmp_path / "data", tmp_path)
        try:
            lines = Lines(proc)
            first = _record(lines.until(lambda line: True, 20, "the first line"))
            assert (first["state"], first["error"]) == ("enabling", None)
            nxt = _record(lines.until(_is("connection"), 30, "the next state line"))
            assert nxt["state"] == "live", lines.seen  # no failure in between
            lines.until(_is("appeared", event_id=BEFORE_ID), 10, "the event")
        finally:
            if proc.poll() is None:
                _stop(proc)
