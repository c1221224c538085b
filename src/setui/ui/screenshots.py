"""``make screenshots``: SVG screenshots of the dashboard for the README and reviews.

Run as ``python -m setui.ui.screenshots [DIR]`` (default ``screenshots``). Like
harlequin's ``scripts/export_screenshots.py`` it drives the app headless with
``run_test`` and ``save_screenshot``; the emulator plays the ``busy`` scenario on a
manual clock at a fixed time and the app reads the same clock, the store lives in a
temporary directory and the identity and time zone are fixed, so the same code makes the
same pictures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

__all__ = ["T0", "main", "take_screenshots"]

T0 = datetime(2024, 5, 14, 9, 30, tzinfo=timezone.utc)
TIME_ZONE = "Europe/Amsterdam"  # local time differs from UTC, as on most people's VMs
WIDE = (120, 36)
NARROW = (80, 24)


def _fixed_time_zone() -> None:
    os.environ["TZ"] = TIME_ZONE
    if hasattr(time, "tzset"):
        time.tzset()


async def _settle(pilot: Any, app: Any, rounds: int = 3) -> None:
    for _ in range(rounds):
        await app.workers.wait_for_complete()
        await pilot.pause()


async def _advance(pilot: Any, app: Any, clock: Any, seconds: float, step: float = 1.0) -> None:
    """Move the shared clock forward in steps, letting the app poll after each."""
    done = 0.0
    while done < seconds:
        clock.advance(step)
        done += step
        await pilot.pause(0.05)
        await _settle(pilot, app, 1)


Shot = Callable[[Any, Any, Any], Awaitable[None]]


async def take_screenshots(out: Path, scenario: str = "busy") -> list[Path]:
    """Write every screenshot into ``out``; return the files written."""
    from setui.config import Config
    from setui.core.client import ImdsClient
    from setui.emulator.scenario import load_scenario
    from setui.emulator.server import Emulator, ManualClock
    from setui.identity import Identity
    from setui.store import Store
    from setui.ui.app import SetuiApp

    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    identity = Identity(user="oncall", ssh_client="10.0.0.5", host="vm-web-0")

    async def session(name: str, size: tuple[int, int], theme: str | None,
                      script: Callable[[Any, Any, Any, Callable[[str], None]], Awaitable[None]],
                      ) -> None:
        clock = ManualClock(T0.timestamp())
        emulator = Emulator(load_scenario(scenario), clock=clock, speed=1.0)
        url = emulator.start()
        try:
            with tempfile.TemporaryDirectory(prefix="setui-shots-") as scratch:
                config = Config(endpoint=url, data_dir=Path(scratch), vm_name=emulator.vm_name,
                                bell=False, interval=0.2)
                if theme:
                    config = replace(config, theme=theme)
                store = Store.open_dir(Path(scratch))
                client = ImdsClient(url)
                try:
                    app = SetuiApp(client=client, config=config, store=store,
                                   clock=_datetime_clock(clock), identity=identity,
                                   poll=True)
                    async with app.run_test(size=size) as pilot:
                        await _settle(pilot, app)

                        def shoot(filename: str) -> None:
                            path = app.save_screenshot(f"{filename}.svg", str(out))
                            written.append(Path(path))
                            print(f"wrote {path}")

                        await script(pilot, app, clock, shoot)
                finally:
                    await _close(client)
                    store.close()
        finally:
            emulator.stop()

    async def main_screen(pilot: Any, app: Any, clock: Any, shoot: Callable[[str], None]) -> None:
        await _advance(pilot, app, clock, 90)
        shoot("main")
        await pilot.press("a")
        await _settle(pilot, app)
        shoot("approve-dialog")
        await pilot.press("y")  # approve: an attempt and its outcome in the audit log
        await _settle(pilot, app)
        await _advance(pilot, app, clock, 5)
        await pilot.press("down", "a")
        await _settle(pilot, app)
        await pilot.press("n")  # cancel: a "cancelled" record
        await _settle(pilot, app)
        await _advance(pilot, app, clock, 60)
        await pilot.press("h")
        await _settle(pilot, app)
        shoot("history")
        await pilot.press("enter")
        await _settle(pilot, app)
        shoot("history-diff")
        await pilot.press("escape", "escape")
        await pilot.press("l")
        await _settle(pilot, app)
        shoot("audit")

    async def narrow(pilot: Any, app: Any, clock: Any, shoot: Callable[[str], None]) -> None:
        await _advance(pilot, app, clock, 90)
        shoot("main-80x24")

    async def mono(pilot: Any, app: Any, clock: Any, shoot: Callable[[str], None]) -> None:
        await _advance(pilot, app, clock, 90)
        shoot("main-mono")

    await session("main", WIDE, None, main_screen)
    await session("narrow", NARROW, None, narrow)
    await session("mono", WIDE, "setui-mono", mono)
    return written


def _datetime_clock(clock: Callable[[], float]) -> Callable[[], datetime]:
    """The emulator's manual clock (POSIX seconds) as the app's aware-UTC ``now()``."""
    return lambda: datetime.fromtimestamp(clock(), timezone.utc)


async def _close(client: Any) -> None:
    closer = getattr(client, "aclose", None) or getattr(client, "close", None)
    if closer is None:
        return
    result = closer()
    if asyncio.iscoroutine(result):
        await result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m setui.ui.screenshots",
                                     description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("out", nargs="?", default="screenshots", type=Path,
                        help="folder for the SVG files (default: screenshots)")
    parser.add_argument("--scenario", default="busy", help="emulator scenario (default busy)")
    args = parser.parse_args(argv)
    _fixed_time_zone()
    written = asyncio.run(take_screenshots(args.out, args.scenario))
    print(f"{len(written)} screenshots in {args.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
