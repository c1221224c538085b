"""What the monitor says when it may have missed something: over real loopback HTTP,
with the emulator failing on purpose, in ``setui watch`` and in the dashboard."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from setui.emulator.clock import ManualClock
from setui.emulator.faults import parse_faults
from setui.emulator.scenario import load_scenario
from setui.emulator.server import Emulator
from tests.support.children import SETUI, Lines, wait_until
from tests.support.dashboard import MakeDashboard, status

FREEZE = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"  # live-migration: at 60 s, 15 min notice
PATIENCE = 60.0


@pytest.mark.slow
def test_a_freeze_that_ran_while_every_poll_failed_is_never_cancelled(tmp_path: Path) -> None:
    """The measured case: polls failing while this VM's Freeze started and completed.
    It left the document unseen: ``gone``, not certain, never ``cancelled``."""
    clock = ManualClock(1_800_000_000.0)
    with Emulator(load_scenario("live-migration"), clock=clock, speed=1.0) as emulator:
        clock.set(emulator.epoch + 70)  # the Freeze is Scheduled, NotBefore 890 s away
        env = {"SETUI_DATA_DIR": str(tmp_path / "data")}
        proc = subprocess.Popen(
            [*SETUI, "watch", "--json", "--endpoint", emulator.url, "--interval", "0.2",
             "--vm-name", "WestNO_0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env={**os.environ, **env})
        try:
            lines = Lines(proc)

            def next_record(wanted: Callable[[dict[str, Any]], bool], what: str
                            ) -> dict[str, Any]:
                line = lines.until(lambda text: wanted(json.loads(text)), PATIENCE, what)
                return dict(json.loads(line))

            appeared = next_record(lambda r: r["change"] == "appeared", "the Freeze")
            assert appeared["event_id"] == FREEZE and appeared["this_vm"]
            emulator.set_faults(parse_faults("500=1"))
            next_record(lambda r: r["state"] == "retrying", "the failures")
            failed = len(emulator.requests)
            clock.set(emulator.epoch + 3600)  # started, paused the VM, and left meanwhile
            wait_until(lambda: len(emulator.requests) >= failed + 2, PATIENCE,
                       "two more failed polls")
            emulator.set_faults(None)
            gone = next_record(lambda r: r["event_id"] == FREEZE and r["change"] != "appeared",
                               "the Freeze's end")
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    assert gone["change"] == "gone", gone
    assert gone["certain"] is False and gone["missed"] >= 1
    assert "polls failed" in gone["detail"] and "never seen" in gone["detail"]
    assert "probably ran" in gone["detail"]
    assert not any(json.loads(line)["change"] == "cancelled" for line in lines.seen)


@pytest.mark.slow  # needs real time: stale comes MIN_STALE_AFTER (3 s) after the last answer
async def test_the_dashboard_stops_saying_live_while_the_service_hangs(
        make_dashboard: MakeDashboard) -> None:
    d = make_dashboard("live-migration", at=70)
    async with d.app.run_test(size=(120, 36)) as pilot:
        await d.settle(pilot)
        assert "● live" in status(d)
        d.emulator.set_faults(parse_faults("hang=1"))
        # No answer arrives at all: nothing but the passing time can say it is stale.
        await d.wait_for(pilot, lambda: "stale" in status(d))
        assert "● live" not in status(d)
        assert "STALE: showing the last answer" in status(d)
        row = d.app.main_screen.query_one("#events")
        assert any(str(cell).endswith("?") for cell in row.get_row_at(0))  # type: ignore[attr-defined]


async def test_the_dashboard_tells_a_vanished_event_as_gone_not_cancelled(
        make_dashboard: MakeDashboard) -> None:
    d = make_dashboard("live-migration", at=70)
    async with d.app.run_test(size=(120, 36)) as pilot:
        await d.settle(pilot)
        d.emulator.set_faults(parse_faults("500=1"))
        await d.wait_for(pilot, lambda: d.app.session.health.consecutive_failures >= 1)
        d.clock.set(d.emulator.epoch + 3600)
        d.emulator.set_faults(None)
        d.app.poller.poll_now()
        await d.wait_for(pilot, lambda: FREEZE in d.app.session.lives
                         and d.app.session.lives[FREEZE].fate is not None)
        life = d.app.session.lives[FREEZE]
        assert life.fate == "gone" and not life.fate_certain
        assert not any("cancelled" in n for n in d.notices())
        assert any("Event gone, not seen to end" in n for n in d.notices())
