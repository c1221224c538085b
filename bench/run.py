"""`make bench`: every figure beside a reference measured in the same run.

Usage: python bench/run.py [--quick] [--only NAME ...] [--write bench/RESULTS.md]
(`--only approval`: just the `y` -> POST figure, five consecutive runs of 30 tries.)
Timings on shared machines are noisy: the ratios are the figures to compare across runs.
"""

from __future__ import annotations

import argparse
import compileall
import importlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, Row, machine

SUITES = ["parse_track", "store", "cold_start", "login_line", "watch_cost", "agent_cost",
          "heartbeat", "latency", "approval", "dashboard", "attached", "attached_pane",
          "fleet", "probe_slowloris", "wire_codec"]


def table(rows: list[Row]) -> str:
    lines = ["| figure | measured | reference (same run) | ratio | target | met |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        met = "-" if row.ok is None else ("yes" if row.ok else "**no**")
        lines.append(f"| {row.figure} | {row.measured} | {row.reference} | {row.ratio} | "
                     f"{row.target} | {met} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", nargs="*", choices=SUITES, default=SUITES)
    parser.add_argument("--quick", action="store_true",
                        help="shorter runs (10 s instead of 60 s) for a smoke test")
    parser.add_argument("--write", type=Path, help="also write the table to this file")
    args = parser.parse_args()
    rows: list[Row] = []
    started = time.monotonic()
    # An installed wheel has its bytecode compiled by pip; an editable checkout run with
    # PYTHONDONTWRITEBYTECODE would compile every setui module at every start, a cost no
    # installed setui pays (the references' packages are compiled). Same footing for both.
    compileall.compile_dir(str(ROOT / "src" / "setui"), quiet=1)
    for name in args.only:
        print(f"running {name} ...", file=sys.stderr, flush=True)
        try:
            # Imported here: a suite that no longer imports (src changed under it) is a
            # failed row like any other, not the end of the run.
            module = importlib.import_module(name)
            rows.extend(module.run(quick=args.quick) if "quick" in module.run.__code__.co_varnames
                        else module.run())
        except Exception as exc:  # a broken benchmark is reported, the others still run
            rows.append(Row(f"{name}: FAILED", repr(exc)[:80], "-", "-", "-", False))
    text = table(rows)
    took = f"took {time.monotonic() - started:.0f} s ({'--quick' if args.quick else 'full run'})"
    print(text)
    print(f"\nmachine: {machine()}; {took}")
    if args.write:
        # The table is the run's; the notes after it (from the first "## " heading) are
        # written by people and kept.
        notes = ""
        if args.write.exists():
            old = args.write.read_text(encoding="utf-8")
            at = old.find("\n## ")
            notes = old[at:] if at >= 0 else ""
        args.write.write_text(
            f"# Benchmark results\n\nMachine: {machine()}; {took}\n\n{text}\n{notes}",
            encoding="utf-8")
    return 0 if all(r.ok is not False for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
