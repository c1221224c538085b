"""`setui watch` end to end: real processes, real loopback HTTP, the real emulator."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from setui.commands.watch import RECORD_KEYS
from setui.emulator.scenario import parse_scenario
from setui.emulator.server import Emulator, ManualClock
from tests.support.children import SETUI, Lines
from tests.support.waiting import PATIENCE

POSIX = os.name == "posix"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["SETUI_DATA_DIR"] = str(tmp_path / "data")
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONIOENCODING"] = "utf-8"  # the same bytes whatever the test machine's locale
    env.update(extra)
    return env


def _watch(url: str, tmp_path: Path, *extra: str, encoding: str = "utf-8",
           env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*SETUI, "watch", "--endpoint", url, "--interval", "0.2", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, encoding=encoding,
        env=env or _env(tmp_path),
    )


def _read_until(proc: subprocess.Popen[str], done: Callable[[list[str]], bool],
                timeout: float) -> list[str]:
    """Lines of ``proc``'s stdout up to the first for which ``done(lines)`` holds.

    A thread does the blocking reads, so a process that prints nothing (or stops short)
    fails the test after ``timeout`` seconds, with what it did print, instead of hanging.
    """
    assert proc.stdout is not None
    stdout = proc.stdout
    arrived: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in stdout:
            arrived.put(line)
        arrived.put(None)

    threading.Thread(target=pump, daemon=True).start()
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    ended = False
    while not ended and (remaining := deadline - time.monotonic()) > 0:
        try:
            line = arrived.get(timeout=remaining)
        except queue.Empty:
            break
        if line is None:
            ended = True
        else:
            lines.append(line)
            if done(lines):
                return lines
    proc.kill()
    errors = proc.stderr.read() if proc.stderr else ""
    why = "the process ended" if ended else f"nothing more within {timeout} s"
    pytest.fail(f"{why}; stdout so far: {lines!r}; stderr: {errors[-2000:]!r}")


@pytest.mark.slow
def test_a_silent_process_fails_the_read_instead_of_hanging_it() -> None:
    silent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # the words say it gave up at its own timeout, not when the process ended
    with pytest.raises(pytest.fail.Exception, match=r"nothing more within 0\.5 s"):
        _read_until(silent, lambda lines: True, timeout=0.5)
    assert silent.wait(timeout=5) != 0  # and it was killed, not left behind


@pytest.mark.slow
@pytest.mark.skipif(not POSIX, reason="SIGINT delivery to a child is POSIX-only here")
def test_watch_json_tells_the_documented_story(make_emulator: Callable[..., Emulator],
                                               clock: ManualClock, tmp_path: Path) -> None:
    """The emulator in this process on the manual clock, moved once each step is seen:
    the documented Freeze appears at second 60, starts at its NotBefore 15 minutes later
    and is gone 5 s + its 120 s tail after that."""
    emulator = make_emulator("live-migration")
    proc = _watch(emulator.url, tmp_path, "--json", "--vm-name", "WestNO_0")
    lines = Lines(proc)

    def said(change: str, **fields: object) -> Callable[[str], bool]:
        def check(line: str) -> bool:
            record = json.loads(line)
            return record["change"] == change and all(record[k] == v
                                                      for k, v in fields.items())
        return check

    lines.until(said("connection", state="live"), PATIENCE, "the first answer")
    for seconds, change in ((61, "appeared"), (900, "started"), (130, "completed")):
        clock.advance(seconds)
        lines.until(said(change), PATIENCE, f"the event {change}")
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=PATIENCE) == 0, proc.stderr.read() if proc.stderr else ""
    records = [json.loads(line) for line in lines.seen]
    # Stable keys: every record, connection or change, has the same keys in the same order.
    assert [list(r) for r in records] == [list(RECORD_KEYS)] * len(records)
    changes = [r for r in records if r["change"] != "connection"]
    assert [r["change"] for r in changes] == ["appeared", "started", "completed"]
    appeared = changes[0]
    assert set(appeared) >= {"time", "incarnation", "change", "event_id", "event_type", "status",
                             "not_before", "resources", "this_vm"}
    assert appeared["event_id"] == "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
    assert appeared["event_type"] == "Freeze" and appeared["status"] == "Scheduled"
    assert appeared["resources"] == ["WestNO_0", "WestNO_1"] and appeared["this_vm"] is True
    assert appeared["not_before"].endswith("Z")
    assert changes[1]["status"] == "Started" and changes[1]["not_before"] is None
    incarnations = [r["incarnation"] for r in changes]
    assert incarnations == sorted(incarnations) and len(set(incarnations)) == 3
    connections = [r for r in records if r["change"] == "connection"]
    states = [r["state"] for r in connections]
    assert states[0] == "enabling" and "live" in states
    for record in connections:  # what does not apply to a connection is null, [] or false
        assert (record["incarnation"], record["event_id"], record["event_type"],
                record["status"], record["not_before"], record["resources"],
                record["this_vm"]) == (None, None, None, None, None, [], False)
    assert all(r["state"] is None and r["failures"] is None for r in changes)
    # watch also records the history
    history = subprocess.run([*SETUI, "history", "--json"], capture_output=True, text=True,
                             env=_env(tmp_path), timeout=30)
    assert history.returncode == 0, history.stderr
    assert "C7061BAC" in history.stdout


def _free_port() -> int:
    """A loopback port nothing listens on: connections to it are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
@pytest.mark.skipif(not POSIX, reason="SIGINT delivery to a child is POSIX-only here")
def test_watch_human_lines_and_unreachable_endpoint(tmp_path: Path) -> None:
    # Nothing listens on this port: the state line says so in words, and Ctrl-C exits 0.
    url = f"http://127.0.0.1:{_free_port()}"
    proc = _watch(url, tmp_path, "--vm-name", "x")
    lines = _read_until(proc, lambda ls: len(ls) >= 2, timeout=20)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=10) == 0
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"  # setui.core.timefmt
    assert re.fullmatch(rf"{stamp}  connection         enabling scheduled events \(the "
                        rf"first answer can take up to 2 minutes\)\n", lines[0]), lines
    assert re.fullmatch(rf"{stamp}  connection         unreachable: nothing answers at "
                        rf"{re.escape(url)} — is this an Azure VM\? \(connection refused\)\n",
                        lines[1]), lines


TWO_EVENTS = """
vm_name = "vm-0"
tail = 5
[[events]]
id = "11111111-1111-1111-1111-111111111111"
type = "Reboot"
notice = "15m"
[[events]]
id = "22222222-2222-2222-2222-222222222222"
type = "Freeze"
at = 30
notice = "10m"
resources = ["vm-1"]
"""


@pytest.mark.slow
@pytest.mark.skipif(not POSIX, reason="SIGINT delivery to a child is POSIX-only here")
def test_watch_text_lines_align_count_down_and_mark_what_was_there(tmp_path: Path) -> None:
    # The service's clock stands still until watch has printed what was there at its
    # start, then moves 30 s on and the Freeze appears: however late watch starts (a
    # loaded machine), one event was there before it and one appeared while it watched.
    # An hour ahead of this machine's, a whole second (the scenario's epoch): watch
    # writes its times, and counts down, in the service's clock.
    clock = ManualClock(float(int(time.time()) + 3600))
    moved: list[float] = []

    def appeared(lines: list[str]) -> bool:
        if not moved and any(" appeared at start " in line for line in lines):
            moved.append(clock.advance(30))
        return any(" appeared  " in line for line in lines)

    with Emulator(parse_scenario(TWO_EVENTS), clock=clock) as emulator:
        proc = _watch(emulator.url, tmp_path, "--no-record", "--vm-name", "vm-0")
        lines = _read_until(proc, appeared, timeout=60)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0, proc.stderr.read() if proc.stderr else ""
    lines = [line.rstrip("\n") for line in lines]
    [there] = [line for line in lines if " appeared at start " in line]
    [later] = [line for line in lines if " appeared  " in line]
    # The columns start at the same place on every line, connection lines included.
    for column in ("connection", "appeared at start", "appeared "):
        assert any(line.find(column) == 25 for line in lines), (column, lines)
    assert there.find("Reboot") == later.find("Freeze")
    assert there.find("111111") == later.find("222222")
    # A countdown to NotBefore as seen at the line's time, the service's: 15 minutes of
    # notice on the event present at start, 10 on the one that appeared 30 s later.
    assert re.match(r"\S+ \S+ UTC  appeared at start     T-15:00  #1 ", there), there
    assert re.match(r"\S+ \S+ UTC  appeared              T-10:00  #2 ", later), later
    assert "(this VM)" in there and "(this VM)" not in later
    # Times never go backwards, line after line.
    times = [line[:23] for line in lines]
    assert times == sorted(times), lines


@pytest.mark.slow
@pytest.mark.skipif(not POSIX, reason="SIGINT delivery to a child is POSIX-only here")
def test_watch_json_unreachable_state_and_error(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    proc = _watch(url, tmp_path, "--vm-name", "x", "--json")
    lines = _read_until(proc, lambda ls: len(ls) >= 2, timeout=20)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=10) == 0
    first, second = (json.loads(line) for line in lines[:2])
    assert (first["state"], first["error"], first["failures"]) == ("enabling", None, 0)
    assert second["state"] == "unreachable" and second["failures"] == 1
    assert second["error"] == (f"nothing answers at {url} — is this an Azure VM? "
                               "(connection refused)")


# An EventId and a Description as hostile as the network can make them: a C1 CSI (U+009B,
# which some terminals obey like ESC [), a bidi override, a BEL, and text no legacy code
# page has.
NASTY_ID = "evt-\u009b2J-\u202egnp.exe-\u0007-\u4e2d\u6587"
NASTY_DESCRIPTION = "Restart \u009b31m \u2066now\u2069 \u00e9t\u00e9"
NASTY_SCENARIO = f"""
vm_name = "vm-0"
[[events]]
id = {json.dumps(NASTY_ID)}
type = "Reboot"
description = {json.dumps(NASTY_DESCRIPTION)}
"""


@pytest.mark.slow
@pytest.mark.skipif(not POSIX, reason="SIGINT delivery to a child is POSIX-only here")
def test_watch_json_is_ascii_even_for_hostile_text_and_a_cp1252_stdout(
        tmp_path: Path) -> None:
    with Emulator(parse_scenario(NASTY_SCENARIO)) as emulator:
        # latin-1 decodes any byte, so a stray non-ASCII byte shows up instead of crashing.
        proc = _watch(emulator.url, tmp_path, "--json", "--no-record", encoding="latin-1",
                      env=_env(tmp_path, PYTHONIOENCODING="cp1252"))
        lines = _read_until(proc, lambda ls: any('"appeared"' in line for line in ls),
                            timeout=20)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0, proc.stderr.read() if proc.stderr else ""
    text = "".join(lines)
    assert text.isascii(), text
    assert "\\u009b" in text and "\\u202e" in text and "\\u4e2d" in text
    [appeared] = [json.loads(line) for line in lines if '"appeared"' in line]
    assert appeared["event_id"] == NASTY_ID
    assert appeared["description"] == NASTY_DESCRIPTION


@pytest.mark.slow
@pytest.mark.skipif(not POSIX, reason="SIGINT delivery to a child is POSIX-only here")
def test_watch_human_lines_escape_controls_and_survive_a_cp1252_stdout(
        tmp_path: Path) -> None:
    with Emulator(parse_scenario(NASTY_SCENARIO)) as emulator:
        proc = _watch(emulator.url, tmp_path, "--no-record", encoding="latin-1",
                      env=_env(tmp_path, PYTHONIOENCODING="cp1252"))
        lines = _read_until(proc, lambda ls: any(" appeared " in line for line in ls),
                            timeout=20)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0, proc.stderr.read() if proc.stderr else ""
    [line] = [line for line in lines if " appeared " in line]
    # printable() made the controls visible escapes; what cp1252 lacks is escaped too.
    assert "evt-\\x9b2J-\\u202egnp.exe-\\x07-\\u4e2d\\u6587" in line
    assert all(" " <= ch <= "~" for ch in line.rstrip("\n")), line


@pytest.mark.slow
@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["watch", "--interval", "0.1"], "must be 0.2 to 300 seconds"),
        (["watch", "--interval", "1e9"], "must be 0.2 to 300 seconds"),
        (["watch", "--interval", "soon"], "not a number"),
        (["watch", "--bogus"], "unrecognized arguments"),
        (["watch", "--endpoint", "ftp://x"], "must start with http://"),
        (["watch", "--endpoint", "http://"], "has no host"),
        (["watch", "--endpoint", "http://x/?a=1"], "has a query or fragment"),
        (["watch", "--endpoint", "http://x?"], "has a query or fragment"),
        (["watch", "--endpoint", "http://[::1"], "is not a valid URL"),
        (["watch", "--endpoint", "http://x:99999"], "outside 1-65535"),
        (["watch", "--endpoint", "http://ex ample"], "spaces or control characters"),
        (["watch", "--endpoint", "http://u:p@x"], "user name or password"),
        (["watch", "--api-version", "{latest}"], "must look like 2020-07-01"),
        (["watch", "--api-version", "2020-07-01\n"], "must look like 2020-07-01"),
        (["watch", "--interval", "nan"], "must be 0.2 to 300 seconds"),
        (["watch", "--interval", "inf"], "must be 0.2 to 300 seconds"),
        (["watch", "--interval=-inf"], "must be 0.2 to 300 seconds"),
        (["--endpoint", "http://", "watch"], "has no host"),
        (["history", "--endpoint", "http://"], "has no host"),
        (["demo", "--speed", "nan"], "positive finite number"),
        (["demo", "--speed", "inf"], "positive finite number"),
        (["demo", "--speed", "0"], "positive finite number"),
        (["demo", "--interval", "nan"], "must be 0.2 to 300 seconds"),
        (["demo", "--json"], "--json needs --headless"),
    ],
)
def test_bad_arguments_exit_2_with_a_message(argv: list[str], words: str,
                                             tmp_path: Path) -> None:
    done = subprocess.run([*SETUI, *argv], capture_output=True, text=True, env=_env(tmp_path),
                          timeout=30)
    assert done.returncode == 2, done.stderr
    assert words in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def _demo(tmp_path: Path, *extra: str, **env: str) -> list[str]:
    """``setui demo --headless`` until the first event appears, then Ctrl-C."""
    proc = subprocess.Popen(
        [*SETUI, "demo", "--headless", "--scenario", "live-migration", "--speed", "600",
         "--interval", "0.2", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, encoding="utf-8",
        env=_env(tmp_path, **env))
    lines = _read_until(proc, lambda ls: any(" appeared " in line for line in ls), timeout=30)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=10) == 0, proc.stderr.read() if proc.stderr else ""
    return lines


@pytest.mark.slow
@pytest.mark.skipif(not POSIX, reason="SIGINT delivery to a child is POSIX-only here")
def test_demo_never_records_into_the_real_data_dir(tmp_path: Path) -> None:
    from_env = tmp_path / "data"  # SETUI_DATA_DIR, set by _env
    from_file = tmp_path / "configured"
    config = tmp_path / "config.toml"
    config.write_text(f"data-dir = {json.dumps(str(from_file))}\n", encoding="utf-8")
    _demo(tmp_path)
    _demo(tmp_path, SETUI_CONFIG=str(config), SETUI_DATA_DIR="")
    assert not (from_env / "setui.db").exists()
    assert not (from_file / "setui.db").exists()


@pytest.mark.slow
@pytest.mark.skipif(not POSIX, reason="SIGINT delivery to a child is POSIX-only here")
def test_demo_records_where_its_own_data_dir_option_says(tmp_path: Path) -> None:
    chosen = tmp_path / "demo-data"
    _demo(tmp_path, "--data-dir", str(chosen))
    assert (chosen / "setui.db").exists()
    assert not (tmp_path / "data" / "setui.db").exists()


@pytest.mark.slow
@pytest.mark.skipif(not POSIX, reason="SIGINT delivery to a child is POSIX-only here")
def test_demo_headless_json_prints_watch_records(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [*SETUI, "demo", "--headless", "--json", "--scenario", "live-migration", "--speed",
         "600", "--interval", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, encoding="utf-8", env=_env(tmp_path))
    lines = _read_until(proc, lambda ls: any('"appeared"' in line for line in ls), timeout=30)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=10) == 0, proc.stderr.read() if proc.stderr else ""
    records = [json.loads(line) for line in lines]
    assert all(tuple(r) == RECORD_KEYS for r in records)
    assert records[0]["change"] == "connection"
    assert records[-1]["event_type"] == "Freeze" and records[-1]["this_vm"] is True
