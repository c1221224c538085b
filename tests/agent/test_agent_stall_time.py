"""When a stall happened, as a real `setui agent` keeps it: the moment the VM stopped (its
heartbeat's last tick before the gap), not the moment it ran again. The agent is stopped
with SIGSTOP for a few seconds, and the stall's ``at`` is compared with the test's own
clock at the stop and at the SIGCONT; the emulator answers on the same wall clock, so
the record's clock is this machine's."""

from __future__ import annotations

import os
import signal
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from setui.emulator.scenario import parse_scenario
from setui.emulator.server import Emulator
from setui.store import Store
from tests.support.agent_helpers import agent_said, start_agent, stop

pytestmark = [pytest.mark.slow,  # starts processes: the slow tier (docs/testing.md)
              pytest.mark.skipif(os.name != "posix", reason="SIGSTOP is POSIX")]

QUIET = """
name = "nothing-announced"
vm_name = "app-vm-1"
"""
STOPPED_FOR = 4.0  # seconds the agent is stopped: the stall it must place in time


def test_a_stall_is_kept_at_the_moment_the_vm_stopped_not_when_it_ran_again(
        tmp_path: Path) -> None:
    emu = Emulator(parse_scenario(QUIET), speed=1.0)
    emu.start()
    proc, lines = start_agent(emu.url, tmp_path)
    try:
        lines.until(lambda line: '"state": "live"' in line, 60, "the first answer")
        stopped_at = time.time()
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            time.sleep(STOPPED_FOR)  # the stimulus: the gap the agent must measure
        finally:
            os.kill(proc.pid, signal.SIGCONT)
            resumed_at = time.time()
        lines.until(agent_said("impact"), 60, "the stall")
    finally:
        assert stop(proc) == 0
        emu.stop()
    with Store.open_dir(tmp_path / "data", readonly=True) as store:
        kept_all = store.sessions.impacts(endpoint=emu.url)
    # The stop's stall (a busy machine may add short ones of its own).
    kept = max(kept_all, key=lambda impact: impact.seconds)
    assert kept.kind == "stall" and kept.seconds >= STOPPED_FOR - 0.5, kept_all
    # Its last tick came at most a tick (and the record's whole-second Date) before the
    # stop; its end is the SIGCONT, seconds later. Halfway between tells them apart.
    stop_time = datetime.fromtimestamp(stopped_at, tz=timezone.utc)
    resume_time = datetime.fromtimestamp(resumed_at, tz=timezone.utc)
    half = (resumed_at - stopped_at) / 2
    assert abs((kept.at - stop_time).total_seconds()) < half, (
        f"the stall is kept at {kept.at.isoformat()}: the VM stopped at "
        f"{stop_time.isoformat()} and ran again at {resume_time.isoformat()}")
