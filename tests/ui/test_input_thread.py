"""Textual's input thread as setui runs it (setui.ui.compat.quiet_input): a real `setui
demo` in a pty, its input thread asleep with no timeout while idle, and every key still
seen: one after the idle, a lone ESC (the parser's timeout), q to quit, and the app
suspended (SIGTSTP) and resumed (SIGCONT) with keys working after it."""

from __future__ import annotations

import fcntl
import os
import platform
import signal
import struct
import subprocess
import termios
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.children import SETUI
from tests.support.waiting import PATIENCE, wait_until

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(platform.system() != "Linux"
                                 or platform.machine() not in ("x86_64", "aarch64"),
                                 reason="reads /proc/<tid>/syscall (Linux x86_64, aarch64)")]

# select and pselect6; the timeout is the fifth argument of both (NULL: no timeout).
SELECTS = {"x86_64": {"23", "270"}, "aarch64": {"72"}}.get(platform.machine(), set())
HELP = b"Escape closes"  # the help screen's title
MAIN = b"NotBefore UTC"  # the events table's header: written when the main screen is drawn


class Terminal:
    """`setui demo` at 80x24 on a pty, its output gathered on a thread."""

    def __init__(self, tmp_path: Path) -> None:
        self.fd, follower = os.openpty()
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color", "XDG_CONFIG_HOME": str(tmp_path),
               "SETUI_CONFIG": ""}
        for name in ("COLUMNS", "LINES", "NO_COLOR", "TEXTUAL_DRIVER"):
            env.pop(name, None)
        self.proc = subprocess.Popen([*SETUI, "demo"], stdin=follower, stdout=follower,
                                     stderr=follower, env=env, start_new_session=True)
        os.close(follower)
        self.out = bytearray()
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # every other end is closed: the app has ended
                return
            if not chunk:
                return
            with self._lock:
                self.out += chunk

    def mark(self) -> int:
        with self._lock:
            return len(self.out)

    def shows(self, text: bytes, since: int = 0) -> bool:
        with self._lock:
            return text in self.out[since:]

    def press(self, keys: bytes, then: bytes, what: str) -> None:
        """Send ``keys`` and wait until the app writes ``then`` after them."""
        since = self.mark()
        os.write(self.fd, keys)
        wait_until(lambda: self.shows(then, since), what=what)

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self._reader.join(PATIENCE)
        os.close(self.fd)


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    term = Terminal(tmp_path)
    try:
        wait_until(lambda: term.shows(MAIN) and term.shows(b"Approve"),
                   what="the dashboard drawn")
        yield term
    finally:
        term.close()


def _asleep_without_timeout(pid: int) -> bool:
    """Whether a thread of ``pid`` is blocked in select with no timeout: the input thread
    waiting for a key (Textual's own waits 0.1 s at a time, and its other threads and
    the event loop wait elsewhere)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "syscall").read_text().split()
        except OSError:  # the thread ended meanwhile
            continue
        if len(fields) > 5 and fields[0] in SELECTS and int(fields[5], 16) == 0:
            return True
    return False


def _state(pid: int) -> str:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2]


def test_idle_input_thread_sleeps_and_a_key_after_it_is_seen(terminal: Terminal) -> None:
    wait_until(lambda: _asleep_without_timeout(terminal.proc.pid),
               what="the input thread asleep in select with no timeout")
    terminal.press(b"?", HELP, "the help after ?")


def test_a_lone_escape_closes_the_help(terminal: Terminal) -> None:
    terminal.press(b"?", HELP, "the help after ?")
    wait_until(lambda: _asleep_without_timeout(terminal.proc.pid),
               what="the input thread asleep again after ?")
    # ESC alone is told from the start of a sequence only by the parser's timeout: the
    # thread must wake for it although no other byte comes.
    terminal.press(b"\x1b", MAIN, "the main screen drawn again after ESC")
    wait_until(lambda: _asleep_without_timeout(terminal.proc.pid),
               what="the input thread asleep again after the ESC")


def test_q_quits_at_once_from_idle(terminal: Terminal) -> None:
    wait_until(lambda: _asleep_without_timeout(terminal.proc.pid),
               what="the input thread asleep")
    os.write(terminal.fd, b"q")
    assert terminal.proc.wait(timeout=PATIENCE) == 0


def test_suspended_and_resumed_keys_still_work(terminal: Terminal) -> None:
    """SIGTSTP stops the input thread (it must wake to see that it is told to) before
    the process stops itself; SIGCONT starts another."""
    pid = terminal.proc.pid
    wait_until(lambda: _asleep_without_timeout(pid), what="the input thread asleep")
    os.kill(pid, signal.SIGTSTP)
    wait_until(lambda: _state(pid) == "T", what="the app stopped after SIGTSTP")
    since = terminal.mark()
    os.kill(pid, signal.SIGCONT)
    wait_until(lambda: terminal.shows(MAIN, since), what="the dashboard drawn on resume")
    wait_until(lambda: _asleep_without_timeout(pid), what="the new input thread asleep")
    terminal.press(b"?", HELP, "the help after ? on resume")
    terminal.press(b"\x1b", MAIN, "the main screen after ESC on resume")
    os.write(terminal.fd, b"q")
    assert terminal.proc.wait(timeout=PATIENCE) == 0
