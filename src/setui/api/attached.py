"""The agent's state as a front end's monitor: what an attached dashboard draws, from the
agent's pushes alone. It asks IMDS nothing: one poller per VM however many people watch.

:class:`AttachedMonitor` offers what the dashboard uses of :class:`~setui.monitor.Monitor`
(its state, ``now``, ``health``, ``stale``, ``interval``, ``updates``, ``poll_now``,
``aclose``; ``recorder`` and ``poller`` are None: the agent polls and records) over a
:class:`~setui.api.client.Subscription`. Each push is folded into the state in place;
between pushes the agent's clock runs on this process's monotonic clock.

The agent pushes a state only when something changed, and a tick every
:data:`~setui.api.protocol.TICK_EVERY` seconds otherwise, so what is known here is known
as of the last frame: "live" turns stale when frames stop for longer than the agent's own
rule allows plus a tick, and the last answer is as old as the last frame says.

When the agent goes (stopped, restarting, crashed) nothing is lost: the state is shown
stale and the link says so (that it is stopping, and what it waits for, when its last
frame said so; else only that it cannot be reached: what comes next is not known), the
monitor connects again with backoff, subscribes, takes the agent's state whole, and
announces what changed while it could not see (across a gap, so nothing that left unseen
is called cancelled).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

from setui.api.client import ApiError, PlanPush, Push, StatePush, Subscription, VmPush
from setui.api.codec import AgentInfo, AgentState, Hello, Plan, RecordingStatus
from setui.api.protocol import STOPPING, TICK_EVERY
from setui.core.backoff import Backoff
from setui.core.clock import utc_now
from setui.core.health import ConnectionState, Health, PollResult
from setui.core.model import Document
from setui.core.textsafe import printable
from setui.core.timefmt import duration
from setui.core.tracker import Change, Tracker
from setui.monitor.state import ANNOUNCED, EventLife, MonitorState, MonitorUpdate
from setui.store.records import AuditRecord

__all__ = ["GAP", "HEARD_EVERY", "LOST_WORDS", "RETRY_CAP", "STOPPING_WORDS", "AttachedMonitor",
           "agent_words"]

RETRY_CAP = 10.0  # seconds at most between two tries to reach the agent again
# Seconds at most between two frames from the agent while nothing changes: a tick every
# TICK_EVERY, and the agent looks for one to send once a second.
HEARD_EVERY = TICK_EVERY + 1.0
# What a front end says while the agent cannot be reached: nothing says it will be back.
LOST_WORDS = "agent not reachable: reconnecting…"
# ... and when the agent's last frame said it was stopping.
STOPPING_WORDS = "agent stopping"
# What the changes seen on reconnecting are said to have come across.
GAP = "while the dashboard could not reach the agent"

Opener = Callable[[Path], Awaitable[Subscription]]


def agent_words(agent: AgentInfo, now: datetime) -> str:
    """What a front end says of the agent it is attached to, at ``now``: how long it has
    been up to the minute ("up 3d 02h", "up 12m", "up <1m"), so the status line does not
    change every second for it."""
    up = max(0.0, (now - agent.since).total_seconds())
    said = duration(up - up % 60).removesuffix(" 00s") if up >= 60 else "<1m"
    return f"attached to the agent (pid {agent.pid}, up {said})"


def _with_local_notes(life: EventLife, before: EventLife | None) -> EventLife:
    """The agent's life of an event, with the notes this front end added to it (its own
    approvals) kept: the agent's next state would otherwise drop them."""
    if before is None:
        return life
    theirs = set(life.notes)
    ours = [note for note in before.notes if note not in theirs]
    if ours:
        life.notes = sorted([*life.notes, *ours], key=lambda note: note[0])
    return life


class AttachedMonitor:
    """``async for update in monitor.updates()``: the agent's state, until cancelled."""

    recorder = None  # the agent records; nothing here writes a store
    poller = None  # the agent polls; nothing here asks IMDS

    def __init__(self, path: Path, hello: Hello, *, state: MonitorState | None = None,
                 mono: Callable[[], float] = time.monotonic,
                 wall: Callable[[], datetime] = utc_now,
                 on_link: Callable[[bool, str], None] | None = None,
                 backoff: Backoff | None = None, opener: Opener | None = None) -> None:
        self.path = path
        self.hello = hello  # the agent as it greeted this front end last
        self.vm_name: str | None = hello.agent.vm_name
        self.state = state if state is not None else MonitorState()
        self.interval = 1.0
        self.plan = Plan()
        self.approvals: Mapping[str, AuditRecord] = {}
        self.recording: RecordingStatus | None = None
        self.lost: str | None = None  # why the link to the agent is down, while it is
        # What the agent said it waits for as it stopped ("" nothing), until it is back.
        self.stopping: str | None = None
        self._mono = mono
        self._wall = wall
        self._on_link = on_link
        self._backoff = backoff or Backoff(base=0.5, cap=RETRY_CAP)
        self._open = opener or Subscription.open
        self._anchor: tuple[datetime, float] | None = None  # the agent's now, at our mono
        self._next_try: float | None = None
        self._wake = asyncio.Event()
        self._subscription: Subscription | None = None

    # -- what is known now ------------------------------------------------------------------
    def now(self) -> datetime:
        """The agent's clock (the service's time as it knows it), run on from its last
        frame by this process's monotonic clock."""
        if self._anchor is None:
            return self._wall()
        said, at = self._anchor
        return said + timedelta(seconds=self._mono() - at)

    def health(self) -> Health:
        """The agent's connection to IMDS as of its last frame; stale while the agent
        cannot be reached (nothing is known since)."""
        health = self.state.health.at(self._mono())
        if self.lost is None:
            return health
        return replace(health, state=ConnectionState.STALE, last_error=self.lost,
                       next_attempt_in=self.next_try_in(), next_attempt_mono=None)

    def stale(self) -> bool:
        return self.lost is not None or self.state.health.is_stale(self._mono())

    @property
    def heard_every(self) -> float:
        """Seconds at most between two frames from the agent while nothing changes."""
        return HEARD_EVERY

    def next_try_in(self) -> float | None:
        """Seconds to the next try to reach the agent again (None: under way, or linked)."""
        if self.lost is None or self._next_try is None:
            return None
        return max(0.0, self._next_try - self._mono())

    def link_words(self) -> str:
        """The link, for the status line: whom this front end is attached to, or that it
        is reaching the agent again."""
        if self.lost is None:
            return agent_words(self.hello.agent, self._wall())
        wait = self.next_try_in()
        return self._lost_words() + (
            f" (next try in {round(wait)} s)" if wait is not None and wait >= 0.5 else "")

    def link_short(self) -> str:
        """The link in a few words, for a narrow status line."""
        if self.lost is None:
            return f"agent pid {self.hello.agent.pid}"
        return STOPPING_WORDS if self.stopping is not None else LOST_WORDS

    def _lost_words(self) -> str:
        if self.stopping is None:
            return LOST_WORDS
        waits = f": {self.stopping};" if self.stopping else ":"
        return f"{STOPPING_WORDS}{waits} reconnecting…"

    def poll_now(self) -> None:
        """Nothing to ask IMDS (the agent polls); while the agent cannot be reached, try
        it again at once."""
        self._wake.set()

    def note_approved(self, event_id: str) -> None:
        """The agent knows of every approval it made: nothing to keep here."""
        del event_id

    # -- running ----------------------------------------------------------------------------
    async def updates(self) -> AsyncIterator[MonitorUpdate]:
        """The agent's state, then one update per push; across the agent's restarts, until
        cancelled."""
        attempt = 0
        while True:
            try:
                subscription = await self._open(self.path)
            except ApiError as exc:
                attempt += 1
                lost = self._lose(exc.message, attempt)
                if lost is not None:
                    yield lost
                await self._pause()
                continue
            self._subscription = subscription
            try:
                yield self._greeted(subscription)
                attempt = 0
                while True:
                    update = self._fold(await subscription.next())
                    if update is not None:
                        yield update
            except ApiError as exc:
                attempt = 1
                lost = self._lose(exc.message, attempt)
                if lost is not None:
                    yield lost
            finally:
                self._subscription = None
                await subscription.aclose()
            await self._pause()

    async def aclose(self) -> None:
        subscription, self._subscription = self._subscription, None
        if subscription is not None:
            await subscription.aclose()

    async def _pause(self) -> None:
        """Until the next try is due, or someone asks for one now (``r``)."""
        wait = self.next_try_in()
        self._wake.clear()
        if wait:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)
        self._next_try = None

    def _lose(self, why: str, attempt: int) -> MonitorUpdate | None:
        """The agent cannot be reached: when to try again; an update (and the news) the
        first time only."""
        self._next_try = self._mono() + self._backoff.delay(attempt)
        first = self.lost is None
        if first and why.startswith(STOPPING):
            self.stopping = printable(why[len(STOPPING):].lstrip(": ").rstrip("."), 300)
        if first or self.stopping is None:  # the agent's own word on its stop stays
            self.lost = why.rstrip(".") or "the agent went"
        if not first:
            return None
        if self._on_link is not None:
            said = "" if self.stopping is not None else f" ({self.lost})"
            self._on_link(True, f"{self._lost_words()}{said}; the events shown are its "
                                "last word, stale until it is back")
        return MonitorUpdate(self._result(), (), None)

    def _greeted(self, subscription: Subscription) -> MonitorUpdate:
        """Subscribed (again): the agent's state whole; after an outage, what changed
        while it could not be seen is announced, as seen across a gap."""
        was_lost = self.lost is not None
        before = self.state.document
        self.hello = subscription.hello
        self.vm_name = subscription.hello.agent.vm_name or self.vm_name
        self.lost = self.stopping = None
        self.plan = subscription.plan
        self._take(subscription.state)
        announce: tuple[Change, ...] = ()
        if was_lost:
            announce = self._missed(before, self.state.document)
            if self._on_link is not None:
                self._on_link(False, f"reconnected: {self.link_words()}")
        return MonitorUpdate(self._result(announce), announce, None)

    def _missed(self, before: Document | None, after: Document | None) -> tuple[Change, ...]:
        if before is None or after is None or before == after:
            return ()
        seen = self.state.last_seen or self.now()
        tracker = Tracker()
        tracker.update(before, seen)
        changes = tracker.update(after, seen, gap=GAP)
        return tuple(c for c in changes if c.kind in ANNOUNCED and not c.initial)

    def _fold(self, push: Push) -> MonitorUpdate | None:
        """A push folded in; the update it makes, or None for a tick: nothing changed,
        and a front end that redraws every second shows its news (the agent's clock and
        health) at the next second."""
        if isinstance(push, StatePush):
            frame = push.state
            self._take(frame)
            announce = tuple(c for c in frame.changes if c.kind in ANNOUNCED and not c.initial)
            return MonitorUpdate(self._result(frame.changes), announce, frame.previous_state)
        if isinstance(push, PlanPush):
            self.plan = push.plan
            return MonitorUpdate(self._result(), (), None)
        if isinstance(push, VmPush):  # learned by the agent after it greeted this one
            self.hello = self.hello.with_vm(push.vm)
            self.vm_name = push.vm.vm_name or self.vm_name
            return MonitorUpdate(self._result(), (), None)
        self.state.health = self._heard(push.health)
        if push.health.last_success is not None:
            self.state.last_seen = push.health.last_success
        self._anchor = (push.now, self._mono())
        return None

    def _take(self, frame: AgentState) -> None:
        """A state frame, folded into the state in place (the dashboard's session is it)."""
        agent, state = frame.state, self.state
        lives = state.lives
        state.document = agent.document
        state.health = self._heard(agent.health)
        state.lives = {i: _with_local_notes(life, lives.get(i)) for i, life in agent.lives.items()}
        state.gone = agent.gone
        state.anomalies = agent.anomalies
        state.last_seen = agent.last_seen
        state.incarnation_since = agent.incarnation_since
        self.interval = frame.interval
        self.approvals = frame.approvals
        self.recording = frame.recording
        self._anchor = (frame.now, self._mono())

    @staticmethod
    def _heard(health: Health) -> Health:
        """The agent's health as heard here: live for as long as the agent's own rule
        allows past its last good answer, plus the tick that would say otherwise."""
        return replace(health, stale_after=health.stale_after + HEARD_EVERY)

    def _result(self, changes: tuple[Change, ...] = ()) -> PollResult:
        """The state as a poll's result (what the dashboard's updates carry)."""
        state = self.state
        return PollResult(self.health(), state.document, changes, fresh=self.lost is None,
                          seen_at=state.last_seen)
