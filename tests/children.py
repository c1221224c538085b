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
import sys

__all__ = ["PYTHON", "SETUI"]

_DEFAULT_SIGINT = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                   "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])")

# Windows has no inherited SIG_IGN to undo, and its execv would not keep the process.
PYTHON = [sys.executable, "-c", _DEFAULT_SIGINT] if os.name == "posix" else [sys.executable]
SETUI = [*PYTHON, "-m", "setui.cli"]
