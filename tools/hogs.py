"""``make test-hogs``: the whole suite, several times in a row, with every core kept busy.

Run as ``python tools/hogs.py [--runs N] [--hogs K] -- COMMAND...`` (``make test-hogs``
runs ``make test`` three times). It starts K busy loops (default: one per core), each a
Python process spinning at normal priority, then runs COMMAND N times, printing each run's
result and wall time, and stops at the first failure. The hogs are its own children and
are ended, by their process ids, however it exits. A suite that passes here does not
depend on having the machine to itself: its waits are on conditions with generous
deadlines, not on a quiet scheduler. Exits with the first failing run's status, else 0.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

SPIN = "while True: pass"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="times to run COMMAND (3)")
    parser.add_argument("--hogs", type=int, default=os.cpu_count() or 1,
                        help="busy loops to start (default: one per core)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="after --: what to run")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or args.runs < 1 or args.hogs < 0:
        parser.error("give --runs of at least 1 and a command after --")
    hogs = [subprocess.Popen([sys.executable, "-c", SPIN], stdin=subprocess.DEVNULL)
            for _ in range(args.hogs)]
    print(f"hogs.py: {len(hogs)} busy loop(s) running: pids "
          f"{' '.join(str(h.pid) for h in hogs)}", flush=True)
    try:
        for run in range(1, args.runs + 1):
            began = time.monotonic()
            code = subprocess.call(command)
            took = time.monotonic() - began
            print(f"hogs.py: run {run} of {args.runs}: "
                  f"{'passed' if code == 0 else f'FAILED (exit {code})'} in {took:.0f} s",
                  flush=True)
            if code != 0:
                return code
        return 0
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


if __name__ == "__main__":
    sys.exit(main())
