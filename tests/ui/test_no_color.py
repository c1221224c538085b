"""NO_COLOR, read from the bytes a real `setui demo` writes to a real terminal (a pty)."""

from __future__ import annotations

import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest

from children import SETUI

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.name != "posix", reason="a pty is POSIX-only")]

PATIENCE = 60.0
SGR = re.compile(rb"\x1b\[([0-9;:]*)m")


def _colour_parameters(parameters: bytes) -> list[str]:
    """The colour parts of one SGR sequence: 30-39, 40-49, 90-97, 100-107, and the
    38/48/58 extended forms."""
    found = []
    for part in re.split(rb"[;:]", parameters) if parameters else []:
        if not part:
            continue
        number = int(part)
        if 30 <= number <= 49 or 90 <= number <= 107 or number in (58, 59):
            found.append(part.decode())
    return found


def _run_in_a_pty(tmp_path: Path, **env: str) -> bytes:
    """`setui demo` at 80x24 in a pty until it has drawn an event, then q; its output."""
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    environment = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor",
                   "XDG_CONFIG_HOME": str(tmp_path / "config"), "SETUI_CONFIG": "",
                   **env}
    if "NO_COLOR" not in env:
        environment.pop("NO_COLOR", None)
    proc = subprocess.Popen([*SETUI, "demo", "--speed", "60", "--interval", "0.2"],
                            stdin=follower, stdout=follower, stderr=follower,
                            env=environment, start_new_session=True)
    os.close(follower)
    out = bytearray()
    deadline = time.monotonic() + PATIENCE
    asked_to_quit = False
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # the other side closed: the app has ended
                    break
                if not chunk:
                    break
                out += chunk
            if not asked_to_quit and b"Freeze" in out and b"Approve" in out:
                os.write(leader, b"q")
                asked_to_quit = True
            if proc.poll() is not None and not ready:
                break
        assert asked_to_quit, out[-2000:]
        assert proc.wait(timeout=PATIENCE) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.close(leader)
    return bytes(out)


def test_no_color_sends_attributes_and_no_colour_at_all(tmp_path: Path) -> None:
    out = _run_in_a_pty(tmp_path, NO_COLOR="1")
    sequences = SGR.findall(out)
    colours = sorted({c for s in sequences for c in _colour_parameters(s)})
    assert colours == [], f"colour SGR parameters under NO_COLOR: {colours}"
    attributes = {p for s in sequences for p in re.split(rb"[;:]", s) if p}
    assert b"1" in attributes and b"7" in attributes  # bold, reverse: they carry the meaning


def test_without_no_color_the_same_run_has_colour(tmp_path: Path) -> None:
    # The check above can fail: the same reading finds the colours of a normal run.
    out = _run_in_a_pty(tmp_path)
    assert any(_colour_parameters(s) for s in SGR.findall(out))
