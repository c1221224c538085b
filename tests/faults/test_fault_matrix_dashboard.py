"""The fault matrix for the dashboard, through Pilot: the app polls the emulator over
loopback HTTP while its faults are injected and then healed; nobody presses r.

On scaled time, so it runs in the fast tier: the client gives up on a request after
``TIMEOUT`` instead of 5 s and the poller asks again after a 400 or 404 at ``SLOW_PACE``
instead of 10 s (the real figures are `setui watch`'s, in test_fault_matrix_watch.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from setui.emulator.faults import parse_faults
from setui.ui.widgets.events import EventsTable
from setui.ui.widgets.status import StatusBar
from tests.support.faultmatrix import (
    AFTER_AT,
    AFTER_ID,
    BEFORE_AT,
    BEFORE_ID,
    CASE_IDS,
    CASES,
    Case,
    scenario,
    stored,
)

# The fixture (conftest.py, from tests/ui) hands these out; annotated loosely.
Dashboard = Any
MakeDashboard = Any
SIZE = (120, 36)
TIMEOUT = 1.0
SLOW_PACE = 1.0


def status(d: Dashboard) -> str:
    return str(d.app.main_screen.query_one(StatusBar).plain())


def keys(d: Dashboard) -> list[str]:
    return list(d.app.main_screen.query_one(EventsTable).keys)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
async def test_dashboard_rides_out_the_fault_and_recovers_by_itself(
        case: Case, make_dashboard: MakeDashboard) -> None:
    d = make_dashboard(scenario(), at=BEFORE_AT, client_options={"timeout": TIMEOUT})
    d.app.poller.slow_interval = SLOW_PACE
    async with d.app.run_test(size=SIZE) as pilot:
        await d.settle(pilot)
        await d.wait_for(pilot, lambda: BEFORE_ID in keys(d))
        shown = keys(d)
        assert d.store is not None
        before = stored(d.store)
        assert before

        case.inject(d.emulator)
        bad = "✖ unreachable" if case.faults is None else "↻ retrying"
        await d.wait_for(pilot, lambda: bad in status(d))
        await d.wait_for(pilot, lambda: all(w in status(d) for w in case.said(TIMEOUT)))
        text = status(d)
        assert "showing the last answer" in text, text
        assert keys(d) == shown  # the last known events stay on screen
        assert stored(d.store) == before

        d.clock.set(d.emulator.epoch + AFTER_AT)
        case.heal(d.emulator)
        await d.wait_for(pilot, lambda: "● live" in status(d))
        await d.wait_for(pilot, lambda: AFTER_ID in keys(d))
        assert BEFORE_ID in keys(d)
        # The store is written on its own thread: the new incarnation reaches it soon
        # after the screen shows it, not necessarily before.
        await d.wait_for(pilot, lambda: len(stored(d.store)) > len(before))
        after = stored(d.store)
        for incarnation, record in before.items():
            assert after.get(incarnation) == record


async def test_dashboard_refused_from_the_start_then_the_service_appears(
        make_dashboard: MakeDashboard) -> None:
    d = make_dashboard(scenario(), at=BEFORE_AT)
    d.emulator.stop()  # keeps its port: nothing listens there until start()
    async with d.app.run_test(size=SIZE) as pilot:
        await d.wait_for(pilot, lambda: "✖ unreachable" in status(d), timeout=20)
        assert "connection refused" in status(d) and "no answer yet" in status(d)
        d.emulator.start()
        await d.wait_for(pilot, lambda: "● live" in status(d), timeout=20)
        await d.wait_for(pilot, lambda: BEFORE_ID in keys(d), timeout=10)


@pytest.mark.parametrize(("spec", "least"), [("429=1,retry-after=3", 3.0),
                                              ("503=1,retry-after=3", 3.0)])
async def test_dashboard_says_when_it_will_try_again_as_the_service_asked(
        make_dashboard: MakeDashboard, spec: str, least: float) -> None:
    d = make_dashboard(scenario(), at=BEFORE_AT)
    async with d.app.run_test(size=SIZE) as pilot:
        await d.settle(pilot)
        d.emulator.set_faults(parse_faults(spec))
        await d.wait_for(pilot, lambda: "↻ retrying" in status(d), timeout=20)
        health = d.app.poller.health
        assert health.next_attempt_in is not None and health.next_attempt_in >= least
        assert f"next try in {round(health.next_attempt_in)} s" in status(d)


async def test_dashboard_shows_a_slow_first_call_as_enabling_until_it_answers(
        make_dashboard: MakeDashboard) -> None:
    # The documented 2 minutes on a clock 40 times faster: the first answer takes 3 s of
    # an enabling allowance of 3.75 s (120 s of 150 s), six normal request timeouts.
    d = make_dashboard(scenario(), at=BEFORE_AT,
                       client_options={"timeout": 0.5, "enabling_timeout": 3.75})
    d.emulator.set_faults(parse_faults("first-delay=3"))
    async with d.app.run_test(size=SIZE) as pilot:
        await d.wait_for(pilot, lambda: d.app.poller is not None)
        await pilot.pause()
        assert "◌ enabling: first call" in status(d)
        shown: set[str] = set()

        def live() -> bool:
            shown.add(status(d).splitlines()[1].split("  ·  ")[0])
            return "● live" in status(d)

        await d.wait_for(pilot, live, timeout=20)
        # Never shown as failing while the service was enabling, nor announced so.
        assert not any("retrying" in s or "unreachable" in s for s in shown), shown
        assert not any(n.startswith("Connection") for n in d.app.notices)
        assert BEFORE_ID in keys(d)
    await d.app.client.aclose()


async def test_dashboard_a_first_call_past_its_deadline_says_why_and_recovers(
        make_dashboard: MakeDashboard) -> None:
    d = make_dashboard(scenario(), at=BEFORE_AT,
                       client_options={"timeout": 0.5, "enabling_timeout": 0.8})
    d.emulator.set_faults(parse_faults("first-delay=2"))
    async with d.app.run_test(size=SIZE) as pilot:
        await d.wait_for(pilot, lambda: "↻ retrying" in status(d), timeout=20)
        text = status(d)
        assert "no answer from" in text and "the first call enables scheduled events" in text
        # the service keeps enabling; a later first call gets the answer
        await d.wait_for(pilot, lambda: "● live" in status(d), timeout=20)
        assert BEFORE_ID in keys(d)
    await d.app.client.aclose()
