"""Cold start: `setui --version`, and the dashboard's first frame.

Reference: a bare `python -c pass` with the same interpreter, in the same run.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import SETUI, Row, env_for


def _best_wall(argv: list[str], env: dict[str, str], runs: int = 7) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=True)
        best = min(best, time.perf_counter() - start)
    return best


FIRST_FRAME = """
import asyncio, sys, time
t0 = float(sys.argv[1])
from setui.settings.config import Config
from setui.core.client import ImdsClient
from setui.ui.app import SetuiApp

async def main():
    app = SetuiApp(client=ImdsClient(sys.argv[2]), config=Config(endpoint=sys.argv[2]),
                   store=None, poll=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        print(time.time() - t0)

asyncio.run(main())
"""


def run() -> list[Row]:
    with tempfile.TemporaryDirectory() as scratch:
        env = env_for(Path(scratch))
        ref = _best_wall([sys.executable, "-c", "pass"], env)
        version = _best_wall([*SETUI, "--version"], env)
        rows = [Row("cold start: `setui --version`", f"{version:.3f} s",
                    f"python -c pass {ref:.3f} s", f"{version / ref:.1f}x", "<= 0.3 s",
                    version <= 0.3)]
        from setui.emulator.scenario import load_scenario
        from setui.emulator.server import Emulator

        with Emulator(load_scenario("busy"), speed=10) as emu:
            frames = []
            for _ in range(3):
                out = subprocess.run([sys.executable, "-c", FIRST_FRAME, repr(time.time()),
                                      emu.url], env=env, capture_output=True, text=True,
                                     check=True)
                frames.append(float(out.stdout.strip().splitlines()[-1]))
        first = min(frames)
        rows.append(Row("cold start: dashboard first frame (80x24)", f"{first:.3f} s",
                        f"python -c pass {ref:.3f} s", f"{first / ref:.1f}x", "<= 1.5 s",
                        first <= 1.5))
    return rows
