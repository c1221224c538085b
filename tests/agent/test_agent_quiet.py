"""The agent's quiet polls, end to end: a real agent on a loopback emulator. While its
policy has nothing to do, its polls run on their own thread (core.quiet); what it tells
(changes, health, metrics) must be what every poll would have told."""

from __future__ import annotations

import asyncio
import json
import re
import time
import urllib.request
from pathlib import Path

import pytest

from setui.api.client import Subscription, Tick
from setui.core.health import ConnectionState
from setui.emulator.scenario import parse_scenario
from setui.emulator.server import Emulator
from tests.support.agent_helpers import agent_env, metrics_url, start_agent, stop, write_policy
from tests.support.children import wait_until

pytestmark = pytest.mark.slow

LATER = "0E5D2B1A-2F1B-4C1D-9E1A-3C2B1A0F9E8D"
SCENARIO = f"""
name = "agent-quiet"
vm_name = "app-vm-1"
tail = 600

[[events]]
id = "F020BA2E-3BC0-4C40-A10B-86575A9EABD5"
type = "Reboot"
source = "Platform"
at = 0
notice = "7d"
duration = -1

[[events]]
id = "{LATER}"
type = "Freeze"
source = "Platform"
at = 8
notice = "7d"
duration = 5
"""
POLICY = """
[[rule]]
name = "watch"
this_vm = true
notify = false
"""
OK_POLLS = re.compile(r'^setui_polls_total\{outcome="ok"\} (\d+)', re.M)


def _events_gets(emu: Emulator) -> int:
    return sum(1 for r in list(emu.requests)
               if r.method == "GET" and "scheduledevents" in r.path)


def _ok_polls(url: str) -> int:
    with urllib.request.urlopen(url, timeout=10) as answer:
        found = OK_POLLS.search(answer.read().decode())
    assert found, "no setui_polls_total{outcome=\"ok\"} in the metrics"
    return int(found.group(1))


def test_quiet_polls_keep_the_pace_and_tell_every_change_and_every_poll(
        tmp_path: Path) -> None:
    emu = Emulator(parse_scenario(SCENARIO), speed=1.0)
    emu.start()
    proc, lines = start_agent(emu.url, tmp_path, "--policy",
                              str(write_policy(tmp_path, POLICY)), "--metrics", "127.0.0.1:0")
    try:
        url = metrics_url(proc)
        # The event that appears later is told, as a change, by the poll that saw it.
        lines.until(lambda line: _appeared(line, LATER), 60, "the later event told")
        # Every poll is counted, quiet ones included: the metrics' count of good polls
        # follows the emulator's count of requests (one may be under way, and the
        # agent's first requests ask for its name and compute metadata first).
        wait_until(lambda: _events_gets(emu) >= 60, 60, "a dozen seconds of polls")
        gets, ok = _events_gets(emu), _ok_polls(url)
        assert gets - 7 <= ok <= gets, (gets, ok)
        # The pace: 0.2 s, so about five a second (no burst, no double polls).
        first = next(r.time for r in emu.requests if "scheduledevents" in r.path)
        span = time.time() - first
        assert _events_gets(emu) <= span / 0.2 + 5, (_events_gets(emu), span)
    finally:
        assert stop(proc) == 0
        emu.stop()


def _appeared(line: str, event_id: str) -> bool:
    if not line.startswith("{"):
        return False
    record = json.loads(line)
    return record.get("event_id") == event_id and record.get("change") == "appeared"



def test_a_subscriber_hears_the_connection_live_while_the_agent_polls_quietly(
        tmp_path: Path) -> None:
    """Ticks come every TICK_EVERY (5 s); quiet results every QUIET_SPAN (10 s), longer
    than "live" allows (3 s): each tick must read the thread's answers, not the last
    result's time."""
    emu = Emulator(parse_scenario(SCENARIO), speed=1.0)
    emu.start()
    socket_path = tmp_path / "api.sock"
    proc, _ = start_agent(emu.url, tmp_path, "--policy", str(write_policy(tmp_path, POLICY)),
                          env=agent_env(tmp_path, SETUI_SOCKET=str(socket_path)))

    async def ticks() -> list[Tick]:
        sub = await Subscription.open(socket_path, timeout=10)
        heard: list[Tick] = []
        try:
            while len(heard) < 4:
                push = await asyncio.wait_for(sub.next(), 60)
                if isinstance(push, Tick):
                    heard.append(push)
        finally:
            await sub.aclose()
        return heard

    try:
        wait_until(socket_path.exists, 30, "the agent's socket")
        heard = asyncio.run(ticks())
        assert [t.health.state for t in heard] == [ConnectionState.LIVE] * 4, heard
    finally:
        assert stop(proc) == 0
        emu.stop()
