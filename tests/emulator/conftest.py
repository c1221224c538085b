"""Fixtures for the emulator tests: real loopback servers, a manual clock, a plain client."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from emulator_helpers import MakeEmulator

from setui.emulator.clock import ManualClock
from setui.emulator.scenario import Scenario, load_scenario
from setui.emulator.server import Emulator


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def make_emulator(clock: ManualClock) -> Iterator[MakeEmulator]:
    """Start emulators on loopback (manual clock unless ``clock=`` is given); all are
    stopped at the end of the test."""
    started: list[Emulator] = []

    def make(scenario: Scenario | str = "live-migration", **kwargs: Any) -> Emulator:
        if isinstance(scenario, str):
            scenario = load_scenario(scenario)
        kwargs.setdefault("clock", clock)
        emulator = Emulator(scenario, **kwargs)
        emulator.start()
        started.append(emulator)
        return emulator

    yield make
    for emulator in started:
        emulator.stop()


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(trust_env=False, timeout=5.0) as http:
        yield http
