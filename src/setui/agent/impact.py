"""What events did to this VM, measured by the agent: its stalls and its boots.

The heartbeat (agent.heartbeat) hands each stall over from its thread; the stall waits
for the first poll after it ended, and is then tied (core.impact.tie) to the event of
this VM that was Started in the last document seen before it began, or that started or
left between that document and the first one after. A boot is found once, at the first
answer after the agent starts: the recording sessions of another boot id say when this
endpoint was last polled before it, the first session of this one when it was polled
again (store.impacts), and it is tied the same way. Each is kept in the store, counted
in the metrics, said as a line (``agent impact``); one with no event is kept and said
too. Nothing here is on the heartbeat's thread but the hand-over, and nothing here reads
a file or the store on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from setui.agent.heartbeat import Heartbeat, Stall
from setui.core.impact import BOOT, STALL, Impact, impact_words, tie
from setui.core.model import Document
from setui.system.boot import this_boot

if TYPE_CHECKING:
    from setui.agent.agent import Agent
    from setui.agent.metrics import AgentMetrics
    from setui.monitor import MonitorUpdate

__all__ = ["IMPACT", "ImpactWatch"]

IMPACT = "impact"  # the agent's line
_PENDING = 64  # stalls waiting for a poll (a VM stopped again and again between polls)


@dataclass(frozen=True)
class _Pending:
    stall: Stall
    at: datetime
    before: Document | None


class ImpactWatch:
    """``start()`` the heartbeat; ``await handle(update)`` after each poll; ``stop()``."""

    def __init__(self, agent: Agent, *, metrics: AgentMetrics | None,
                 mono: Callable[[], float] = time.monotonic,
                 heartbeat: Heartbeat | None = None) -> None:
        self.agent = agent
        self.monitor = agent.monitor
        self.metrics = metrics
        self._mono = mono
        # Each tick notes the document current then: a stall's "before".
        self.heartbeat = heartbeat or Heartbeat(
            self._from_thread, context=lambda: self.monitor.state.document)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: list[_Pending] = []
        self._booted = False  # the boot was looked for (once, at the first answer)

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.heartbeat.start()
        if self.monitor.recorder is not None:  # its session opens at the first poll
            self.monitor.recorder.measures = True

    def stop(self) -> None:
        self.heartbeat.stop()

    # -- from the heartbeat's thread --------------------------------------------------------
    def _from_thread(self, stall: Stall) -> None:
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed: the agent stopped
                loop.call_soon_threadsafe(self.stalled, stall)

    def stalled(self, stall: Stall) -> None:
        """A stall, on the loop: when it began in the record's clock, and the document
        current at its last tick before; tied at the next poll."""
        at = self.monitor.now() - timedelta(seconds=self._mono() - stall.before.mono)
        before = stall.before.context
        if len(self._pending) < _PENDING:
            self._pending.append(_Pending(stall, at, before if isinstance(before, Document)
                                          else None))
            self.monitor.want_next()

    @property
    def idle(self) -> bool:
        """No stall waits for a poll to be tied, and the boot was looked for."""
        return self._booted and not self._pending

    # -- each poll ----------------------------------------------------------------------------
    async def handle(self, update: MonitorUpdate) -> None:
        """After each poll: the stalls that ended before it are tied and kept; at the
        first answer, the boot is looked for."""
        now = self._mono()
        document = self.monitor.state.document
        due = [p for p in self._pending if p.stall.after.mono <= now]
        self._pending = [p for p in self._pending if p.stall.after.mono > now]
        try:
            for pending in due:
                await self._keep(self._stall_impact(pending, document))
            if not self._booted and update.result.fresh:
                self._booted = True
                await self._boot(document)
        except Exception as exc:  # a store that fails: said, once a minute
            self.agent.error("measuring what events did", f"{type(exc).__name__}: {exc}")

    def _stall_impact(self, pending: _Pending, after: Document | None) -> Impact:
        stall = pending.stall
        tied = tie(STALL, pending.before, after, self.agent.vm_name)
        event, how = tied if tied is not None else (None, None)
        return Impact(STALL, pending.at, stall.seconds, self.monitor.endpoint,
                      wall_seconds=stall.wall_seconds,
                      boottime_seconds=stall.boottime_seconds,
                      event_id=event.event_id if event else None,
                      event_type=event.event_type.value if event else None,
                      announced=event.duration if event else None, tie=how)

    async def _boot(self, after: Document | None) -> None:
        """The boot this agent runs in, if the record saw another and it was not told."""
        store, recorder = self.monitor.store, self.monitor.recorder
        if store is None or recorder is None or recorder.session_id is None:
            return  # nothing recorded: no sessions to tell boots apart by
        boot = await self.monitor.store_call(this_boot)  # files in /proc: off the loop
        await self.monitor.store_call(store.sessions.measures, recorder.session_id)
        if self.metrics is not None and self.metrics.last_impact is None:
            # The last one measured before this agent, for the fleet view's details.
            last = await self.monitor.store_call(store.sessions.impacts,
                                                 endpoint=self.monitor.endpoint, newest=1)
            if last and self.metrics.last_impact is None:
                self.metrics.last_impact = last[-1]
        if boot.boot_id is None:
            return
        gap = await self.monitor.store_call(store.sessions.boot_gap,
                                            endpoint=self.monitor.endpoint,
                                            boot_id=boot.boot_id, booted_at=boot.booted_at)
        if gap is None:
            return
        tied = tie(BOOT, gap.before, after, self.agent.vm_name)
        event, how = tied if tied is not None else (None, None)
        await self._keep(Impact(
            BOOT, gap.last_poll, max((gap.first_poll - gap.last_poll).total_seconds(), 0.0),
            self.monitor.endpoint, booted_at=boot.booted_at, first_poll=gap.first_poll,
            exact=gap.exact, boot_id=boot.boot_id,
            event_id=event.event_id if event else None,
            event_type=event.event_type.value if event else None,
            announced=event.duration if event else None, tie=how))

    async def _keep(self, impact: Impact) -> None:
        """Kept in the store first (a boot another agent told already is not told again),
        then counted and said."""
        store = self.monitor.store
        if store is not None:  # a measurement, recorded as the history is, dry run or not
            kept = await self.monitor.store_call(store.sessions.record_impact, impact)
            if kept is None:
                return
            impact = kept
        if self.metrics is not None:
            self.metrics.observe_impact(impact)
        event = self.agent.last_seen.get(impact.event_id or "")
        self.agent.measured(IMPACT, event, impact.event_id, impact_words(impact, local=False))
