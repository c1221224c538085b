"""``setui watch`` as systemd runs it: readiness, status and watchdog over a real
NOTIFY_SOCKET, and journal lines with priorities and no time of their own."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from setui.emulator.scenario import load_scenario
from setui.emulator.server import Emulator
from tests.support.children import SETUI

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="needs AF_UNIX")]
PATIENCE = 30.0


def _receive_until(sock: socket.socket, wanted: str) -> list[str]:
    messages: list[str] = []
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        try:
            data = sock.recv(4096).decode()
        except TimeoutError:
            continue
        messages.append(data)
        if wanted in data:
            return messages
    pytest.fail(f"no {wanted!r} among {messages!r}")


def test_watch_tells_systemd_it_is_ready_how_it_is_and_that_it_lives(tmp_path: Path) -> None:
    path = tmp_path / "notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock, \
            Emulator(load_scenario("live-migration")) as emulator:
        sock.bind(str(path))
        sock.settimeout(0.5)
        env = {**os.environ, "NOTIFY_SOCKET": str(path), "WATCHDOG_USEC": "2000000",
               "SETUI_DATA_DIR": str(tmp_path / "data")}
        proc = subprocess.Popen([*SETUI, "watch", "--endpoint", emulator.url, "--interval",
                                 "0.2", "--vm-name", "WestNO_0"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            ready = _receive_until(sock, "READY=1")
            live = _receive_until(sock, "connection live")
            alive = _receive_until(sock, "WATCHDOG=1")
        finally:
            proc.terminate()
            _out, err = proc.communicate(timeout=PATIENCE)
        stopping = _receive_until(sock, "STOPPING=1")
    assert "STATUS=connection enabling" in ready[-1] and "recording history" in ready[-1]
    assert "STATUS=connection live; incarnation" in live[-1]
    assert alive and stopping
    assert "Traceback" not in err


def test_watch_under_the_journal_writes_priorities_and_no_time(tmp_path: Path) -> None:
    out = tmp_path / "journal.txt"
    with out.open("w") as stream, Emulator(load_scenario("live-migration")) as emulator:
        stat = os.fstat(stream.fileno())
        env = {**os.environ, "JOURNAL_STREAM": f"{stat.st_dev}:{stat.st_ino}",
               "SETUI_DATA_DIR": str(tmp_path / "data")}
        proc = subprocess.Popen([*SETUI, "watch", "--endpoint", emulator.url, "--interval",
                                 "0.2", "--vm-name", "WestNO_0"], env=env, stdout=stream,
                                stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + PATIENCE
            while "connection         live" not in out.read_text() and (
                    time.monotonic() < deadline):
                time.sleep(0.05)
        finally:
            proc.terminate()
            proc.communicate(timeout=PATIENCE)
    lines = out.read_text().splitlines()
    assert lines[0] == ("<6>connection         enabling scheduled events (the first answer "
                        "can take up to 2 minutes)")
    assert "<6>connection         live" in lines
    assert all(line[:3] in ("<4>", "<5>", "<6>") for line in lines)
    assert not any(line[3:7].isdigit() for line in lines)  # no "2026-…" of our own
