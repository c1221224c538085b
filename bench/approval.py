"""`y` -> POST p95 in consecutive runs: the approval figure is stable only if every run of
30 tries is within the target, not their best one. `bench/run.py --only approval` runs
just this (5 runs of 30; `--quick`: 2 runs of 8). Each run is bench/latency.py's approval
parts in a process of its own (a new app, store and emulator): the standalone dashboard
(it reads again, records and posts itself) beside a bare httpx POST, then a dashboard
attached to a real agent (the agent does it for the dashboard) beside a standalone one
in the same process. What a dashboard's heap costs its garbage collections is the
dashboard's, not whatever the benchmarks before it left in the bench's process.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

from common import Row

RUNS = 5
TARGET_MS = 50


def _one(quick: bool) -> list[Row]:
    done = subprocess.run([sys.executable, __file__, "--one", "quick" if quick else "full"],
                          capture_output=True, text=True, timeout=600,
                          cwd=Path(__file__).resolve().parent)
    if done.returncode != 0:
        raise RuntimeError((done.stderr.strip().splitlines() or ["no output"])[-1][:80])
    return [Row(**row) for row in json.loads(done.stdout.strip().splitlines()[-1])]


def run(quick: bool = False) -> list[Row]:
    runs = 2 if quick else RUNS
    rows: list[Row] = []
    met = through = 0
    for k in range(1, runs + 1):
        try:
            part = _one(quick)
        except Exception as exc:  # one broken run is a failed row, the others still run
            part = [Row("approval: FAILED", repr(exc)[:80], "-", "-", "-", False)]
        for row in part:
            row.figure = f"run {k}/{runs}: {row.figure}"
        met += bool(part[0].ok)
        through += bool(part[-1].ok) if len(part) > 2 else 0
        rows.extend(part)
    rows.append(Row(f"approval: runs with `y` -> POST p95 <= {TARGET_MS} ms",
                    f"{met} of {runs}", "-", "-", f"{runs} of {runs}", met == runs))
    rows.append(Row(f"approval through the agent: runs with `y` -> POST p95 <= {TARGET_MS} "
                    "ms", f"{through} of {runs}", "-", "-", f"{runs} of {runs}",
                    through == runs))
    return rows


if __name__ == "__main__" and sys.argv[1:2] == ["--one"]:
    from latency import approval, approval_attached

    quick_run = sys.argv[2] == "quick"
    print(json.dumps([dataclasses.asdict(row) for row in approval(quick_run)
                      + approval_attached(quick_run)]))
