"""``make screenshots``: SVG screenshots of the dashboard for the README and reviews.

Run as ``python tools/screenshots.py [DIR]`` (default ``screenshots``) with setui
installed (``make screenshots`` does both). A developer's tool: it lives outside the
package, so it is never installed on a VM. Like harlequin's
``scripts/export_screenshots.py`` it drives the app headless with ``run_test``; the
emulator plays the ``busy`` scenario on a manual clock and the app reads the same clock,
the store lives in a temporary directory, and the identity, the time zone and the
endpoint shown are fixed. So the same code makes byte-identical files: run it twice and
``cmp`` them.

What makes that work:

* The app polls only when told to (the slowest poll interval, 300 s, and ``poll_now`` after
  each move of the clock), so no answer can arrive stamped with a time other than the
  one the script set; and the script waits for the answer at that time (the app's
  ``session.last_seen``) instead of for the workers, which never finish.
* The status line shows a fixed endpoint while the client talks to the emulator's
  random port.
* Notices are cleared before each picture: which are still up depends on timing.
* The app's monotonic clock is the manual clock, and the client's is :class:`Ticks` on
  top of it: an approval's latency in the audit log is the same on every run, and the
  service clock, which compares the two, sees no skew and shows the manual clock's time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from setui.core.model import Event
    from setui.emulator.server import Emulator, ManualClock
    from setui.ui.app import SetuiApp

__all__ = ["SHOWN_ENDPOINT", "T0", "main", "take_screenshots"]

T0 = datetime(2024, 5, 14, 9, 30, tzinfo=timezone.utc)
TIME_ZONE = "Europe/Amsterdam"  # local time differs from UTC, as on most people's VMs
SHOWN_ENDPOINT = "http://169.254.169.254"  # what the status line says on a real VM
WIDE = (120, 36)
NARROW = (80, 24)
START = 200  # scenario second the dashboard starts at
MAIN_AT = 440  # current, started, completed and cancelled events, as in the snapshot tests
APPROVE_AT = 720  # a Freeze of this VM and web-2 is up for approval
TIMEOUT = 10.0  # seconds for anything to happen; a hang becomes an error, not a wait


def _fixed_time_zone() -> None:
    os.environ["TZ"] = TIME_ZONE
    if hasattr(time, "tzset"):
        time.tzset()


class Ticks:
    """A monotonic clock for the client: ``base()`` plus ``step`` seconds per reading.

    The client times a request with three readings (sent, head, done), so every latency
    it reports is ``2 * step``; its rate limiter and deadlines only ever see time pass.
    Built on the app's monotonic clock, so the moment an answer arrived is comparable
    with the app's own readings; the steps start again each time that clock moves, so
    they never add up to what the service clock would take for skew.
    """

    def __init__(self, base: Callable[[], float], step: float = 0.021) -> None:
        self._base = base
        self._since: float | None = None
        self._ticks = 0.0
        self._step = step

    def __call__(self) -> float:
        base = self._base()
        if base != self._since:
            self._since, self._ticks = base, 0.0
        self._ticks += self._step
        return base + self._ticks


@dataclass
class Shooter:
    """One running app, its emulator and clock, and where the pictures go."""

    app: SetuiApp
    pilot: Any
    emulator: Emulator
    clock: ManualClock
    out: Path
    written: list[Path] = field(default_factory=list)

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), timezone.utc)

    async def wait_for(self, predicate: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + TIMEOUT
        while not predicate():
            if time.monotonic() > deadline:
                raise RuntimeError(f"screenshots: timed out waiting for {what}")
            await self.pilot.pause(0.01)

    async def settle(self) -> None:
        """Poll now and wait until the app has the answer for the clock's current time."""
        wanted = self.now()
        if self.app.poller is not None:
            self.app.poller.poll_now()
        await self.wait_for(lambda: self.app.session.last_seen == wanted,
                            f"the answer at {wanted:%H:%M:%S}")
        await self.pilot.pause()

    async def advance_to(self, second: float, step: float = 20.0) -> None:
        """Move the clock to a scenario second in steps, the app seeing each step (so
        starts and disappearances are seen as they happen, as on a real VM)."""
        target = self.emulator.epoch + second
        while self.clock() < target:
            self.clock.set(min(self.clock() + step, target))
            await self.settle()

    async def press(self, *keys: str) -> None:
        await self.pilot.press(*keys)
        await self.pilot.pause()

    async def select(self, event: Event) -> None:
        from setui.ui.widgets.events import EventsTable

        table = self.app.main_screen.query_one(EventsTable)
        if not table.select_key(event.event_id):
            raise RuntimeError(f"screenshots: no row for {event.event_type} {event.event_id}")
        await self.pilot.pause()

    def event(self, kind: str, *resources: str) -> Event:
        document = self.app.session.document
        found = next((e for e in (document.events if document else ())
                      if e.event_type == kind and e.resources == resources), None)
        if found is None:
            raise RuntimeError(f"screenshots: the scenario has no {kind} of {resources}")
        return found

    async def shoot(self, name: str) -> None:
        self.app.clear_notifications()
        await self.pilot.pause()
        path = self.out / f"{name}.svg"
        path.write_text(self.app.export_screenshot(), encoding="utf-8")
        self.written.append(path)
        print(f"wrote {path}")


Script = Callable[[Shooter], Awaitable[None]]


async def _session(out: Path, size: tuple[int, int], script: Script, *,
                   theme: str | None = None, scenario: str = "busy") -> list[Path]:
    from setui.config import Config
    from setui.core.client import ImdsClient
    from setui.emulator.scenario import load_scenario
    from setui.emulator.server import Emulator, ManualClock
    from setui.identity import Identity
    from setui.store import Store
    from setui.ui.app import SetuiApp

    clock = ManualClock(T0.timestamp())
    emulator = Emulator(load_scenario(scenario), clock=clock, speed=1.0)
    url = emulator.start()
    clock.set(emulator.epoch + START)
    try:
        with tempfile.TemporaryDirectory(prefix="setui-shots-") as scratch:
            settings: dict[str, Any] = {"theme": theme} if theme else {}
            config = Config(endpoint=SHOWN_ENDPOINT, data_dir=Path(scratch),
                            vm_name=emulator.vm_name, bell=False, interval=300.0,
                            **settings)
            store = Store.open_dir(Path(scratch))
            try:
                app = SetuiApp(
                    client=ImdsClient(url, rate=50.0, burst=20, mono=Ticks(clock)),
                    config=config, store=store,
                    clock=lambda: datetime.fromtimestamp(clock(), timezone.utc), mono=clock,
                    identity=Identity(user="oncall", ssh_client="10.0.0.5", host="vm-web-0"),
                    poll=True)
                app.confirm_guard = 0.0  # the guard is real time; the pictures need none
                async with app.run_test(size=size) as pilot:
                    shooter = Shooter(app, pilot, emulator, clock, out)
                    await shooter.settle()
                    await script(shooter)
                    return shooter.written
            finally:
                store.close()
    finally:
        emulator.stop()


async def _tour(s: Shooter) -> None:
    """The main screen, the approval dialog, then history and audit with records in."""
    from setui.ui.screens.audit import AuditScreen
    from setui.ui.screens.confirm import ConfirmationModal
    from setui.ui.screens.history import HistoryScreen, IncarnationScreen
    from setui.ui.screens.main import MainScreen

    await s.advance_to(MAIN_AT)
    await s.shoot("main")

    await s.advance_to(APPROVE_AT)
    await s.select(s.event("Freeze", "web-0", "web-2"))
    await s.press("a")
    await s.wait_for(lambda: isinstance(s.app.screen, ConfirmationModal), "the dialog")
    await s.shoot("approve")  # the loud warning: it starts for web-2 too
    await s.press("n")  # a "cancelled" record
    await s.wait_for(lambda: isinstance(s.app.screen, MainScreen), "the dashboard")

    terminate = s.event("Terminate", "web-3")  # a neighbour's: approved on its behalf
    await s.select(terminate)
    await s.press("a")
    await s.wait_for(lambda: isinstance(s.app.screen, ConfirmationModal), "the dialog")
    await s.press("y", "e", "s", "enter")  # not this VM's: the word "yes", typed

    def approved() -> bool:
        note = s.app.session.approvals.get(terminate.event_id)
        return note is not None and note.approved and not note.pending

    await s.wait_for(approved, "the approval's outcome")
    await s.advance_to(APPROVE_AT + 5, step=5)  # the service starts it
    await s.select(s.event("Terminate", "web-3"))
    await s.press("a")  # started: refused, with the reason, and recorded

    await s.press("h")
    await s.wait_for(lambda: isinstance(s.app.screen, HistoryScreen), "the history")
    await s.shoot("history-list")
    await s.press("enter")  # the newest incarnation: the Terminate started
    await s.wait_for(lambda: isinstance(s.app.screen, IncarnationScreen), "an incarnation")
    await s.shoot("history")
    await s.press("escape", "escape")
    await s.wait_for(lambda: isinstance(s.app.screen, MainScreen), "the dashboard")

    await s.press("l")
    await s.wait_for(lambda: isinstance(s.app.screen, AuditScreen), "the audit log")
    await s.shoot("audit")


async def _main_only(s: Shooter, name: str) -> None:
    await s.advance_to(MAIN_AT)
    await s.shoot(name)


async def take_screenshots(out: Path, scenario: str = "busy") -> list[Path]:
    """Write every screenshot into ``out``; return the files written. The tour picks
    events of the ``busy`` scenario by type and VM; another scenario needs its own."""
    out.mkdir(parents=True, exist_ok=True)
    written = await _session(out, WIDE, _tour, scenario=scenario)
    written += await _session(out, NARROW, lambda s: _main_only(s, "main-80x24"),
                              scenario=scenario)
    written += await _session(out, WIDE, lambda s: _main_only(s, "main-mono"),
                              theme="setui-mono", scenario=scenario)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/screenshots.py",
                                     description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("out", nargs="?", default="screenshots", type=Path,
                        help="folder for the SVG files (default: screenshots)")
    args = parser.parse_args(argv)
    _fixed_time_zone()
    os.environ.pop("NO_COLOR", None)  # the mono picture is asked for by name
    started = time.monotonic()
    written = asyncio.run(take_screenshots(args.out))
    print(f"{len(written)} screenshots in {args.out}/ in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
