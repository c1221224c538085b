"""What the API server serves, read from the agent's own objects: the one place that
knows where the monitor's state, the agent's plan and its holds live.

Everything here runs on the agent's event loop and only reads memory; what goes to the
store (a hold, a release, the server's own small reads) runs on the recorder's thread, the
agent's one writer, so it is ordered with everything else the agent writes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from setui.api.codec import AgentInfo, AgentState, Plan, RecordingStatus
from setui.approval.snapshot import find_event
from setui.core.clock import utc_now
from setui.core.health import ConnectionState
from setui.core.tracker import Change
from setui.store.agent import HOLD, RELEASE, RUNNING
from setui.store.records import AuditEntry, AuditRecord, event_snapshot

if TYPE_CHECKING:
    from setui.agent.agent import Agent
    from setui.agent.policy import Rule
    from setui.core.client import ImdsClient
    from setui.monitor import Monitor
    from setui.store import Store
    from setui.system.identity import Identity

__all__ = ["AgentSource", "HoldRefused"]

_T = TypeVar("_T")


class HoldRefused(Exception):
    """A hold or release that cannot be made; the message is for people."""


@dataclass
class AgentSource:
    """The running agent, as the server sees it."""

    monitor: Monitor
    agent: Agent
    client: ImdsClient
    store: Store | None
    info: AgentInfo
    host: str
    store_problem: str | None = None  # why there is no store, when there is none
    mono: Callable[[], float] = time.monotonic  # the monitor's monotonic clock

    @property
    def endpoint(self) -> str:
        return self.monitor.endpoint

    @property
    def vm_name(self) -> str | None:
        return self.agent.vm_name or self.monitor.vm_name

    @property
    def vm_id(self) -> str | None:
        """This VM's vmId as the agent knows it: what its claims are keyed by."""
        return self.agent.vm_id

    def recording(self) -> RecordingStatus:
        recorder = self.monitor.recorder
        if recorder is None:
            return RecordingStatus(False, self.store_problem or "the agent keeps no store")
        return RecordingStatus(recorder.problem is None, recorder.problem)

    def state(self, *, changes: tuple[Change, ...] = (),
              previous_state: ConnectionState | None = None,
              approvals: Mapping[str, AuditRecord] | None = None) -> AgentState:
        self.monitor.health()  # the quiet thread's answers taken in: live is live
        return AgentState(state=self.monitor.state, now=self.monitor.now(),
                          interval=self.monitor.interval, changes=changes,
                          previous_state=previous_state, approvals=dict(approvals or {}),
                          recording=self.recording())

    def plan(self, held: frozenset[str]) -> Plan:
        """The agent's steps in memory (the events it works on now) and the holds."""
        steps = sorted(self.agent.steps.values(), key=lambda s: (s.event_id, s.updated))
        return Plan(tuple(steps), held | frozenset(self.agent.held))

    def event_ids(self) -> list[str]:
        document = self.monitor.state.document
        return [e.event_id for e in document.events] if document is not None else []

    def running(self, event_id: str) -> str | None:
        """The step the agent is running for the event now, if any."""
        folded = event_id.casefold()
        return next((s.step for s in self.agent.steps.values()
                     if s.event_id.casefold() == folded and s.state == RUNNING), None)

    def rule_for(self, event_id: str) -> Rule | None:
        """The rule of the agent's policy the event falls under: the one decided for it,
        the one whose decision waits for this VM's name, or (not decided yet) the one
        that matches it now; None when no rule applies."""
        agent = self.agent
        event = find_event(self.monitor.state.document, event_id)
        spelt = event.event_id if event is not None else event_id
        decided = agent.rule_of.get(spelt)
        if decided is not None:
            return decided
        waits = agent.rules.get(agent.waiting.get(spelt, ""))
        if waits is not None:
            return waits
        return agent.rule_now(event) if event is not None else None

    async def store_call(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """Run ``fn`` on the agent's store thread, the recorder's (or a thread of its own
        without a recorder): the agent's own reads and writes, in order with the rest."""
        recorder = self.monitor.recorder
        if recorder is not None:
            return await recorder.call(fn, *args, **kwargs)
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def set_hold(self, event_id: str, *, held: bool, identity: Identity,
                       details: Mapping[str, Any]) -> str:
        """Hold or release the agent's steps for an event, audit record first; returns the
        EventId as the document spells it. The agent reads the hold before every step."""
        log = self.agent.log
        if log is None or self.store is None:
            raise HoldRefused("the agent keeps no store, so it cannot record a hold: "
                              f"{self.store_problem or 'it runs without one'}")
        document = self.monitor.state.document
        event = find_event(document, event_id)
        if event is None and held:
            raise HoldRefused(f"event {event_id} is not in the current document")
        spelt = event.event_id if event is not None else event_id
        entry = AuditEntry(
            action=HOLD if held else RELEASE, time=utc_now(), user=identity.user,
            host=identity.host, ssh_client=identity.ssh_client, endpoint=log.endpoint,
            event_id=spelt, event=event_snapshot(event) if event is not None else None,
            incarnation=document.incarnation if document is not None else None,
            details={**details, **identity.details()})
        await self.store_call(log.set_hold, spelt, held=held, entry=entry)
        (self.agent.held.add if held else self.agent.held.discard)(spelt)
        return spelt
