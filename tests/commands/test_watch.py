"""`setui watch` end to end: real processes, real loopback HTTP, the real emulator."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

SETUI = [sys.executable, "-m", "setui.cli"]
POSIX = os.name == "posix"


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["SETUI_DATA_DIR"] = str(tmp_path / "data")
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[str]:
    """`setui emulator` as its own process; yields its URL (the first line it prints)."""
    proc = subprocess.Popen(
        [*SETUI, "emulator", "--port", "0", "--scenario", "live-migration", "--speed", "120"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=_env(tmp_path),
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    assert url.startswith("http://127.0.0.1:"), url
    yield url
    proc.send_signal(signal.SIGINT if POSIX else signal.CTRL_C_EVENT)  # type: ignore[attr-defined]
    assert proc.wait(timeout=10) == 0


def _watch(url: str, tmp_path: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*SETUI, "watch", "--endpoint", url, "--interval", "0.2", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(tmp_path),
    )


def _read_until(proc: subprocess.Popen[str], done, timeout: float) -> list[str]:
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    os.set_blocking(proc.stdout.fileno(), True)
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if done(lines):
            break
    return lines


@pytest.mark.skipif(not POSIX, reason="SIGINT delivery to a child is POSIX-only here")
def test_watch_json_tells_the_documented_story(emulator: str, tmp_path: Path) -> None:
    proc = _watch(emulator, tmp_path, "--json", "--vm-name", "WestNO_0")

    def finished(lines: list[str]) -> bool:
        return any(json.loads(line).get("change") == "completed" for line in lines)

    lines = _read_until(proc, finished, timeout=40)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=10) == 0, proc.stderr.read() if proc.stderr else ""
    records = [json.loads(line) for line in lines]
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
    states = [r["state"] for r in records if r["change"] == "connection"]
    assert states[0] == "enabling" and "live" in states
    # watch also records the history
    history = subprocess.run([*SETUI, "history", "--json"], capture_output=True, text=True,
                             env=_env(tmp_path), timeout=30)
    assert history.returncode == 0, history.stderr
    assert "C7061BAC" in history.stdout


@pytest.mark.skipif(not POSIX, reason="SIGINT delivery to a child is POSIX-only here")
def test_watch_human_lines_and_unreachable_endpoint(tmp_path: Path) -> None:
    # Nothing listens on this port: the state line says so in words, and Ctrl-C exits 0.
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = _watch(f"http://127.0.0.1:{port}", tmp_path, "--vm-name", "x")
    lines = _read_until(proc, lambda ls: any("unreachable" in line or "retrying" in line
                                             for line in ls), timeout=20)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=10) == 0
    text = "".join(lines)
    assert "enabling scheduled events" in text
    assert "nothing answers" in text or "unreachable" in text


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["watch", "--interval", "0.1"], "at least 0.2"),
        (["watch", "--interval", "soon"], "not a number"),
        (["watch", "--bogus"], "unrecognized arguments"),
        (["watch", "--endpoint", "ftp://x"], "must start with http://"),
    ],
)
def test_bad_arguments_exit_2_with_a_message(argv: list[str], words: str,
                                             tmp_path: Path) -> None:
    done = subprocess.run([*SETUI, *argv], capture_output=True, text=True, env=_env(tmp_path),
                          timeout=30)
    assert done.returncode == 2
    assert words in done.stderr
