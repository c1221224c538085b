"""The dashboard against the built-in emulator, on a manual clock shared by both: the
fixtures of tests/ui, also used by tests/faults, tests/hostile and tests/stress, whose
conftest.py files bring them in by name.

``make_dashboard`` starts an emulator playing a scenario at a chosen scenario second,
a client for it, a store in tmp_path and a ``SetuiApp`` whose clock is the emulator's,
so every countdown, age and snapshot is the same on every run. The local time zone is
fixed (Europe/Amsterdam: local time differs from UTC, as on most VMs).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from setui.core.client import ImdsClient
from setui.core.model import Event
from setui.emulator.scenario import Scenario, load_scenario
from setui.emulator.server import Emulator, ManualClock
from setui.settings.config import Config
from setui.store import Store
from setui.system.identity import Identity
from setui.ui.app import SetuiApp
from setui.ui.screens.confirm import ConfirmationModal
from setui.ui.widgets.events import EventsTable
from setui.ui.widgets.status import StatusBar
from tests.support.waiting import PATIENCE

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=timezone.utc)
IDENTITY = Identity(user="oncall", ssh_client="10.0.0.5", host="vm-web-0")
# What the status line shows as the endpoint in snapshots: the emulator's port changes
# from run to run, so the app is told a fixed address (the client uses the real one).
SHOWN_ENDPOINT = "http://127.0.0.1:8099"


@pytest.fixture(autouse=True)
def _fixed_time_zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "Europe/Amsterdam")
    monkeypatch.delenv("NO_COLOR", raising=False)
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@dataclass
class Dashboard:
    """One app under test and what it talks to."""

    app: SetuiApp
    emulator: Emulator
    clock: ManualClock
    store: Store | None
    scenario_start: float
    extra: dict[str, Any] = field(default_factory=dict)

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), timezone.utc)

    def posts(self) -> list[Any]:
        return [r for r in self.emulator.requests if r.method == "POST"]

    def gets(self) -> list[Any]:
        return [r for r in self.emulator.requests
                if r.method == "GET" and r.path == "/metadata/scheduledevents"]

    def audit_actions(self) -> list[str]:
        assert self.store is not None
        return [r.action for r in self.store.audit_log.records(oldest_first=True)]

    def notices(self) -> list[str]:
        return list(self.app.notices)

    async def wait_for(self, pilot: Any, predicate: Callable[[], bool],
                       timeout: float = PATIENCE) -> None:
        await wait_for(pilot, predicate, timeout)

    async def settle(self, pilot: Any, timeout: float = PATIENCE) -> None:
        """Wait until the app has seen an answer at the clock's current time."""
        wanted = self.now()
        await wait_for(pilot, lambda: self.app.session.last_seen == wanted, timeout)
        await pilot.pause()

    async def advance(self, pilot: Any, seconds: float, step: float = 10.0) -> None:
        """Move the shared clock in steps, letting the app see each step."""
        done = 0.0
        while done < seconds:
            move = min(step, seconds - done)
            self.clock.advance(move)
            done += move
            if self.app.poller is not None:
                self.app.poller.poll_now()
            await self.settle(pilot)


async def wait_for(pilot: Any, predicate: Callable[[], bool],
                   timeout: float = PATIENCE) -> None:
    """Until ``predicate()`` holds; the timeout only turns a hang into a failure."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the dashboard")
        await pilot.pause(0.02)


MakeDashboard = Callable[..., Dashboard]
# What a member of group setui is told of the agent's store (setui.store.place).
READ_ONLY_STORE = ("this is the agent's store (/var/lib/setui): read-only; approve through "
                   "the agent")


@pytest.fixture
def make_dashboard(tmp_path: Path) -> Iterator[MakeDashboard]:
    """``make_dashboard(scenario="busy", at=300, **config)``; ``store=False`` runs without a
    store, ``store="read-only"`` with one it may only read (the agent's, as a member of
    its group has it); ``shown_endpoint=True`` shows the fixed SHOWN_ENDPOINT (for
    snapshots)."""
    emulators: list[Emulator] = []
    stores: list[Store] = []

    def make(scenario: str | Scenario = "busy", *, at: float = 300, store: bool | str = True,
             demo: bool = True, shown_endpoint: bool = False, poll: bool = True,
             zoom: int | None = None, client_options: dict[str, Any] | None = None,
             **config: Any) -> Dashboard:
        if isinstance(scenario, str):
            scenario = load_scenario(scenario)
        clock = ManualClock(T0.timestamp())
        emulator = Emulator(scenario, clock=clock, speed=1.0)
        url = emulator.start()
        emulators.append(emulator)
        clock.set(emulator.epoch + at)
        data = tmp_path / f"data{len(emulators)}"
        opened = Store.open_dir(data) if store else None
        problem = None if store else "the test has no store"
        if opened is not None and store == "read-only":
            opened.close()  # made, then opened as its readers open it
            opened = Store.open_dir(data, readonly=True)
            problem = READ_ONLY_STORE
        if opened is not None:
            stores.append(opened)
        config.setdefault("interval", 0.2)
        config.setdefault("bell", True)
        settings = Config(endpoint=SHOWN_ENDPOINT if shown_endpoint else url, data_dir=data,
                          **config)
        client = ImdsClient(url, **{"rate": 50.0, "burst": 20, **(client_options or {})})
        app = SetuiApp(client=client, config=settings,
                       store=opened, store_problem=problem,
                       demo=demo, clock=lambda: datetime.fromtimestamp(clock(), timezone.utc),
                       identity=IDENTITY, poll=poll, zoom=zoom)
        return Dashboard(app, emulator, clock, opened, emulator.epoch)

    yield make
    for emulator in emulators:
        emulator.stop()
    for opened in stores:
        opened.close()


@pytest.fixture
def write_scenario(tmp_path: Path) -> Callable[[str, dict[str, Any]], Scenario]:
    """Write a scenario file (JSON keeps every control character exact) and load it."""

    def write(name: str, data: dict[str, Any]) -> Scenario:
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(data), encoding="utf-8")
        return load_scenario(str(path))

    return write


# -- what the tests of the dashboard do again and again -----------------------------------------
WIDE = (120, 36)
NARROW = (80, 24)


def table(d: Dashboard) -> EventsTable:
    return d.app.main_screen.query_one(EventsTable)


def status(d: Dashboard) -> str:
    return d.app.main_screen.query_one(StatusBar).plain()


def event_of(d: Dashboard, kind: str, *resources: str) -> Event:
    """The event of that type with exactly those resources."""
    document = d.app.session.document
    assert document is not None
    return next(e for e in document.events
                if e.event_type == kind and e.resources == resources)


async def start(d: Dashboard, pilot: Any) -> None:
    """Wait for the first answer and for the VM name."""
    await d.settle(pilot)
    await d.wait_for(pilot, lambda: d.app.vm_name == "web-0")
    await pilot.pause()


async def select(d: Dashboard, pilot: Any, event: Event) -> None:
    assert table(d).select_key(event.event_id)
    await pilot.pause()
    assert table(d).selected_key == event.event_id


def screen_text(d: Dashboard) -> str:
    return "\n".join(strip.text for strip in d.app.screen._compositor.render_strips())


async def open_dialog(d: Dashboard, pilot: Any) -> ConfirmationModal:
    """Press a; the dialog once mounted (its guard counts from then, a key before is lost)."""
    await pilot.press("a")
    await d.wait_for(pilot, lambda: isinstance(d.app.screen, ConfirmationModal)
                     and d.app.screen.is_mounted)  # type: ignore[attr-defined]
    return d.app.screen  # type: ignore[return-value]  # Textual's Screen[object]
