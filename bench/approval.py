"""`y` -> POST p95 in consecutive runs: the approval figure is stable only if every run of
30 tries is within the target, not their best one. `bench/run.py --only approval` runs
just this (5 runs of 30; `--quick`: 2 runs of 8). Each run is bench/latency.py's approval
part: a new app, store and emulator, beside its own bare-httpx reference.
"""

from __future__ import annotations

from common import Row
from latency import APPROVAL_TARGET, approval

RUNS = 5


def run(quick: bool = False) -> list[Row]:
    runs = 2 if quick else RUNS
    rows: list[Row] = []
    met = 0
    for k in range(1, runs + 1):
        try:
            part = approval(quick)
        except Exception as exc:  # one broken run is a failed row, the others still run
            part = [Row("approval: FAILED", repr(exc)[:80], "-", "-", "-", False)]
        for row in part:
            row.figure = f"run {k}/{runs}: {row.figure}"
        met += bool(part[0].ok)
        rows.extend(part)
    rows.append(Row(f"approval: runs with `y` -> POST p95 <= {APPROVAL_TARGET * 1000:.0f} ms",
                    f"{met} of {runs}", "-", "-", f"{runs} of {runs}", met == runs))
    return rows
