"""Commands for child processes that a test stops with SIGINT, wherever the tests run.

A shell starts a background job (``make test &``, CI without a terminal) with SIGINT
ignored, and children inherit that. A Python started with SIGINT ignored installs no
KeyboardInterrupt handler, so ``setui watch`` would never hear the test's Ctrl-C, as it
must not: an ignored SIGINT is the parent's deliberate choice, and setui keeps it.

So the tests start their children through a shim that sets SIGINT back to the default and
execs the real interpreter, which then installs its handler as it does in a terminal.
exec keeps the process id, so ``proc.send_signal`` reaches the child. (Not preexec_fn:
Python code between fork and exec can deadlock with the reader threads these tests run.)
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import pytest

from tests.support.waiting import wait_until  # here too, for the tests of processes

__all__ = ["PYTHON", "SETUI", "Lines", "python_command", "wait_until"]

_DEFAULT_SIGINT = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                   "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])")



def python_command(executable: str) -> list[str]:
    """``executable`` (a Python) started with SIGINT at its default, through the shim."""
    # Windows has no inherited SIG_IGN to undo, and its execv would not keep the process.
    return [executable, "-c", _DEFAULT_SIGINT] if os.name == "posix" else [executable]


PYTHON = python_command(sys.executable)
SETUI = [*PYTHON, "-m", "setui.cli"]


class Lines:
    """A process's stdout, read by one thread, consumed in steps with deadlines.

    Unlike tests/commands' ``_read_until`` (one wait per process), a case can wait
    several times on the same process: before a fault, during it, after healing.
    """

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        self.proc = proc
        self.seen: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._ended = False
        stdout = proc.stdout

        def pump() -> None:
            for line in stdout:
                self._queue.put(line)
            self._queue.put(None)

        threading.Thread(target=pump, daemon=True).start()

    def _next(self, deadline: float) -> str | None:
        """The next line (kept in ``seen``), or None once the output has ended or
        ``deadline`` has passed."""
        if self._ended or (remaining := deadline - time.monotonic()) <= 0:
            return None
        try:
            line = self._queue.get(timeout=remaining)
        except queue.Empty:
            return None
        if line is None:
            self._ended = True
            return None
        self.seen.append(line)
        return line

    def rest(self, timeout: float = 60.0) -> list[str]:
        """Every line seen, the ones not consumed yet included, once the process's stdout
        has ended (call it after the process was stopped); fails after ``timeout``."""
        deadline = time.monotonic() + timeout
        while self._next(deadline) is not None:
            pass
        if not self._ended:
            pytest.fail(f"the process's output did not end within {timeout} s")
        return self.seen

    def until(self, done: Callable[[str], bool], timeout: float, what: str) -> str:
        """The first line from now on for which ``done`` holds; fails after ``timeout``."""
        deadline = time.monotonic() + timeout
        while (line := self._next(deadline)) is not None:
            if done(line):
                return line
        self.proc.kill()
        errors = self.proc.stderr.read() if self.proc.stderr else ""
        why = "the process ended" if self._ended else f"nothing more within {timeout} s"
        pytest.fail(f"waiting for {what}: {why}; stdout: {self.seen[-30:]!r}; "
                    f"stderr: {errors[-2000:]!r}")
