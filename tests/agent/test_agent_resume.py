"""A restarted agent keeps what its store knows: a real agent against the emulator sees a
Freeze appear and start, is stopped, and a new one starts on the same store. The event's
life (when it was first seen, when it started and that this is exact) as the new agent
serves it to an attached front end, and as ``setui watch`` prints it attached, continues
from the record: not "in the first document", not "started at least ... ago", not
"appeared at start"."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from setui.core.model import parse_iso
from setui.emulator.clock import ManualClock
from setui.emulator.scenario import parse_scenario
from setui.emulator.server import Emulator
from setui.monitor.state import EventLife
from tests.support.agent_helpers import agent_env, more_polls, start_agent, stop
from tests.support.children import SETUI, Lines, wait_until
from tests.support.served import life, served, started_life
from tests.support.waiting import PATIENCE

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not sys.platform.startswith("linux"),
                                 reason="the agent's socket and lock are Linux's")]

FREEZE_ID = "6A1B2C3D-0000-4000-8000-00000000F00D"
FREEZE = f"""
name = "agent-resume-freeze"
vm_name = "app-vm-1"
tail = 600

[[events]]
id = "{FREEZE_ID}"
type = "Freeze"
at = 10
notice = "3s"
duration = 600
"""


@pytest.fixture
def clock() -> ManualClock:
    """The emulator's time, moved by the test: the Freeze appears after the agent's
    first answer, and starts after it was seen Scheduled."""
    return ManualClock(time.time())


@pytest.fixture
def freeze(clock: ManualClock) -> Any:
    emu = Emulator(parse_scenario(FREEZE), speed=1.0, clock=clock)
    emu.start()
    yield emu
    emu.stop()


def _env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "run").mkdir(mode=0o700, exist_ok=True)
    return agent_env(tmp_path, SETUI_SOCKET=str(tmp_path / "run" / "api.sock"))


def _sock(tmp_path: Path) -> Path:
    return tmp_path / "run" / "api.sock"


def _life(tmp_path: Path) -> EventLife | None:
    return life(_sock(tmp_path), FREEZE_ID)


def _served(tmp_path: Path) -> bool:
    return served(_sock(tmp_path))


def _started_life(tmp_path: Path) -> EventLife:
    return started_life(_sock(tmp_path), FREEZE_ID)


def _time(text: object) -> datetime:
    moment = parse_iso(str(text))
    assert moment is not None, text
    return moment


def test_a_restarted_agent_continues_the_events_life_from_the_record(
        tmp_path: Path, freeze: Emulator, clock: ManualClock) -> None:
    env = _env(tmp_path)
    proc, _ = start_agent(freeze.url, tmp_path, env=env)
    try:
        wait_until(lambda: _served(tmp_path), PATIENCE, "the agent's first answer, served")
        clock.set(freeze.epoch + 10)
        wait_until(lambda: _life(tmp_path) is not None, PATIENCE,
                   "the agent to see the Freeze appear")
        clock.set(freeze.epoch + 14)
        before = _started_life(tmp_path)
        more_polls(freeze)
    finally:
        assert stop(proc) == 0
    # Seen to appear, then to start, both as they happened.
    assert not before.initial and before.appeared_certain, before
    assert before.started_exact and before.started_at > before.first_seen, before

    proc, _ = start_agent(freeze.url, tmp_path, env=env)
    watch: subprocess.Popen[str] | None = None
    try:
        wait_until(lambda: _life(tmp_path) is not None, PATIENCE,
                   "the new agent to serve the Freeze")
        more_polls(freeze)
        after = _life(tmp_path)
        assert after is not None
        # Served over the API: the life the record holds, not one begun at the restart.
        assert (after.first_seen, after.first_incarnation, after.initial) == (
            before.first_seen, before.first_incarnation, False), after
        assert (after.started_at, after.started_exact) == (before.started_at, True), after
        assert after.appeared_certain and after.announced == before.announced, after

        # setui watch, attached (its own data directory holds nothing): the event's
        # lines are its life from the record, not "appeared at start".
        watch_env = dict(env, SETUI_DATA_DIR=str(tmp_path / "nothing-here"))
        watch = subprocess.Popen([*SETUI, "watch", "--json"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, encoding="utf-8",
                                 env=watch_env, stdin=subprocess.DEVNULL)
        lines = Lines(watch)
        lines.until(lambda line: '"started"' in line and FREEZE_ID in line, PATIENCE,
                    "watch's line of the Freeze's start")
    finally:
        if watch is not None:
            watch.terminate()
            watch.wait(timeout=60)
        assert stop(proc) == 0
    told = [json.loads(line) for line in lines.seen if line.startswith("{")]
    mine = [r for r in told if r["event_id"] == FREEZE_ID]
    assert [(r["change"], r["initial"], _time(r["time"]), r["certain"]) for r in mine] == [
        ("appeared", False, before.first_seen, True),
        ("started", False, before.started_at, True)], mine
