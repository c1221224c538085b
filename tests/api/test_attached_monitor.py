"""The attached monitor's rules on a manual clock, its agent stood in for by the
subscriptions it would open: live as of the agent's last frame (a tick every 5 s keeps it
so), stale while the agent is away and said once, reconnecting with backoff, what changed
meanwhile announced as seen across a gap, and this dashboard's own notes kept."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from setui.api.attached import AttachedMonitor
from setui.api.client import ApiError, NoAgent, StatePush, Tick
from setui.api.codec import AgentInfo, AgentState, CallerAccess, Hello, Plan, RecordingStatus
from setui.core.backoff import Backoff
from setui.core.health import ConnectionState, Health
from setui.core.model import parse_document
from setui.core.tracker import ChangeKind, Tracker
from setui.monitor.state import EventLife, MonitorState, MonitorUpdate
from tests.support.waiting import until

T0 = datetime(2026, 11, 25, 19, 0, tzinfo=timezone.utc)
HELLO = Hello(1, "0.1.0", AgentInfo(812, T0 - timedelta(days=3, hours=2), "web-0", None,
                                    "http://169.254.169.254", "/var/lib/setui", None, False),
              CallerAccess(0, "root", True, None))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def document(*ids: str, incarnation: int = 1) -> Any:
    return parse_document({"DocumentIncarnation": incarnation, "Events": [
        {"EventId": i, "EventType": "Reboot", "EventStatus": "Scheduled",
         "Resources": ["web-0"], "NotBefore": "Wed, 25 Nov 2026 19:15:00 GMT"} for i in ids]})


def frame(clock: Clock, doc: Any, *, age: float = 0.0) -> AgentState:
    health = Health(state=ConnectionState.LIVE, last_success=T0, first_call_pending=False,
                    last_success_mono=clock() - age, stale_after=3.0)
    lives = {e.event_id: EventLife(e.event_id, T0, doc.incarnation, True) for e in doc.events}
    return AgentState(MonitorState(document=doc, health=health, lives=lives, last_seen=T0),
                      T0, 1.0, (), None, {}, RecordingStatus(True))


class Agent:
    """What the monitor opens: a subscription whose pushes the test hands over, or
    NoAgent while the agent is 'away'."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.away = False
        self.opened = 0
        self.state = frame(clock, document("E1"))
        self.pushes: asyncio.Queue[Any] = asyncio.Queue()

    async def open(self, path: Path) -> Any:
        self.opened += 1
        if self.away:
            raise NoAgent(f"no agent at {path}")
        agent = self

        class Subscription:
            hello, state, plan = HELLO, agent.state, Plan()

            async def next(self) -> Any:
                push = await agent.pushes.get()
                if isinstance(push, ApiError):
                    raise push
                return push

            async def aclose(self) -> None:
                pass

        return Subscription()


async def consume(monitor: AttachedMonitor, got: list[MonitorUpdate]) -> None:
    async for update in monitor.updates():
        got.append(update)


@contextlib.asynccontextmanager
async def running(monitor: AttachedMonitor) -> AsyncIterator[list[MonitorUpdate]]:
    got: list[MonitorUpdate] = []
    task = asyncio.ensure_future(consume(monitor, got))
    try:
        yield got
    finally:
        task.cancel()


def attached(**options: Any) -> tuple[Clock, Agent, AttachedMonitor]:
    """A monitor of the stand-in agent, on a manual clock."""
    clock = Clock()
    agent = Agent(clock)
    return clock, agent, AttachedMonitor(Path("/run/setui/api.sock"), HELLO, mono=clock,
                                         opener=agent.open, **options)


async def test_live_as_of_the_agents_last_frame_and_a_tick_keeps_it_so() -> None:
    clock, agent, monitor = attached()
    async with running(monitor) as got:
        await until(lambda: len(got) == 1, what="the agent's state")
        assert not monitor.stale() and monitor.health().state is ConnectionState.LIVE
        # The agent speaks only when something changes, and ticks every 5 s: its own
        # 3 s, and a tick (and the second its sweep may add), pass before it is stale.
        clock.now += 8.9
        assert not monitor.stale()
        clock.now += 0.2
        assert monitor.stale() and monitor.health().state is ConnectionState.STALE
        agent.pushes.put_nowait(Tick(T0 + timedelta(seconds=9), Health(
            state=ConnectionState.LIVE, last_success=T0 + timedelta(seconds=9),
            last_success_mono=clock(), first_call_pending=False, stale_after=3.0)))
        await until(lambda: not monitor.stale(), what="the tick")
        assert len(got) == 1  # nothing changed: no update, the next redraw shows it
        assert monitor.state.last_seen == T0 + timedelta(seconds=9)
        clock.now += 1.5
        assert monitor.now() == T0 + timedelta(seconds=10.5)  # the agent's clock, run on


async def test_the_agent_away_is_stale_said_once_and_what_changed_is_announced() -> None:
    said: list[tuple[bool, str]] = []
    clock, agent, monitor = attached(on_link=lambda *a: said.append(a),
                                     backoff=Backoff(base=0.01, cap=0.02))
    monitor.state.lives["E1"] = EventLife("E1", T0, 1, True)
    async with running(monitor) as got:
        await until(lambda: len(got) == 1, what="the agent's state")
        monitor.state.lives["E1"].notes.append((T0, "approved here"))  # this dashboard's
        agent.away = True
        agent.pushes.put_nowait(ApiError("unavailable", "the agent is stopping"))
        await until(lambda: agent.opened >= 4, what="tries to reach it again")
        assert len(got) == 2 and monitor.stale()  # one update for the loss, not one a try
        # The agent's own word on its stop stays, not the tries' "no agent at".
        assert monitor.lost == "the agent is stopping"
        assert monitor.link_words().startswith("agent stopping: reconnecting…")
        assert said == [(True, "agent stopping: reconnecting…; the events shown are its last "
                               "word, stale until it is back")]
        # Back, with an event that appeared meanwhile.
        agent.state = frame(clock, document("E1", "E2", incarnation=2))
        agent.away = False
        await until(lambda: monitor.lost is None, what="the agent back")
        back = got[-1]
        assert [(c.kind, c.event_id, c.certain) for c in back.announce] == [
            (ChangeKind.APPEARED, "E2", False)]
        assert said[-1] == (False, "reconnected: attached to the agent (pid 812, up "
                                   f"{monitor.link_words().rsplit('up ', 1)[1]}")
        assert not monitor.stale()
        assert (T0, "approved here") in monitor.state.lives["E1"].notes


async def test_a_state_push_announces_its_news_and_says_the_connection_changed() -> None:
    clock, agent, monitor = attached()
    async with running(monitor) as got:
        await until(lambda: len(got) == 1, what="the agent's state")
        state = frame(clock, document("E1", "E3", incarnation=2))
        tracker = Tracker()
        tracker.update(document("E1"), T0)
        changes = tuple(tracker.update(document("E1", "E3", incarnation=2), T0))
        agent.pushes.put_nowait(StatePush(AgentState(
            state.state, T0, 1.0, changes, ConnectionState.RETRYING, {},
            RecordingStatus(False, "the disk is full"))))
        await until(lambda: len(got) == 2, what="the push")
        assert [c.event_id for c in got[1].announce] == ["E3"]
        assert got[1].previous_state is ConnectionState.RETRYING
        assert monitor.recording == RecordingStatus(False, "the disk is full")
