"""`setui demo` keeps its history in a temporary directory: a closed terminal (SIGHUP)
must not leave it behind, in the dashboard or headless."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from tests.support.children import SETUI, wait_until

pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGHUP and ptys are POSIX")


def _env(tmp_path: Path) -> dict[str, str]:
    scratch = tmp_path / "tmp"
    scratch.mkdir(exist_ok=True)
    return dict(os.environ, TMPDIR=str(scratch), TERM="xterm-256color", PYTHONUNBUFFERED="1")


def _left(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "tmp").glob("setui-demo-*"))


def _recording(tmp_path: Path) -> bool:
    return any((d / "setui.db").exists() for d in _left(tmp_path))


def _hang_up(proc: subprocess.Popen[bytes], tmp_path: Path) -> None:
    """Once the demo records into its directory, the terminal goes: SIGHUP."""
    try:
        wait_until(lambda: _recording(tmp_path), 60, "the demo to record")
        proc.send_signal(signal.SIGHUP)
        proc.wait(timeout=30)
    finally:
        proc.kill()


@pytest.mark.slow
def test_a_hangup_of_the_headless_demo_removes_its_directory(tmp_path: Path) -> None:
    proc = subprocess.Popen([*SETUI, "demo", "--headless", "--speed", "60", "--interval",
                             "0.2"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=_env(tmp_path))
    _hang_up(proc, tmp_path)
    assert _left(tmp_path) == []


@pytest.mark.slow
def test_a_hangup_of_the_demo_dashboard_removes_its_directory(tmp_path: Path) -> None:
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    proc = subprocess.Popen([*SETUI, "demo", "--speed", "60", "--interval", "0.2"],
                            stdin=slave, stdout=slave, stderr=slave, env=_env(tmp_path),
                            start_new_session=True)
    os.close(slave)

    def drain() -> None:  # the dashboard must never block on a full terminal
        try:
            while os.read(master, 65536):
                pass
        except OSError:
            pass

    threading.Thread(target=drain, daemon=True).start()
    try:
        _hang_up(proc, tmp_path)
    finally:
        os.close(master)
    assert _left(tmp_path) == []


@pytest.mark.slow
def test_a_demo_started_to_survive_a_hangup_still_does(tmp_path: Path) -> None:
    """nohup (SIGHUP ignored) is the user's choice: the demo keeps it."""
    proc = subprocess.Popen(["nohup", *SETUI, "demo", "--headless", "--speed", "60",
                             "--interval", "0.2"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=_env(tmp_path), cwd=tmp_path)
    try:
        wait_until(lambda: _recording(tmp_path), 60, "the demo to record")
        proc.send_signal(signal.SIGHUP)
        # Still recording after the hangup: its history keeps growing.
        size = sum(f.stat().st_size for d in _left(tmp_path) for f in d.iterdir())
        wait_until(lambda: proc.poll() is None and sum(
            f.stat().st_size for d in _left(tmp_path) for f in d.iterdir()) > size, 60,
            "the demo to go on recording")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
    assert _left(tmp_path) == []
