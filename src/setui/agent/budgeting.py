"""The agent's side of the disruption budget: before an early approval under a rule that
says ``max_unavailable``, count the group (agent.budget), claim, and approve only within
the budget; otherwise wait and check again.

While an approval waits, its step is kept as ``waiting`` with the reason in words
(``waiting: 1 of 1 in ss-web busy (web-0: event Started)``: the dashboard's plan shows
it, and a restarted agent takes it up again), the agent says it once per change, and
``setui_agent_waiting{reason}`` says it to the fleet. It never waits past NotBefore: the
platform starts the event then whatever the budget, so the step is skipped, saying so.
Prometheus unreachable, or without setui's rules, means no early approval, and says why.
Nothing here is an action: a stop simply ends the wait (no step is interrupted), and the
next agent checks again.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from setui.agent.budget import Count, GroupAnswer, GroupLabels, count, group_of_vm
from setui.core.backoff import Backoff
from setui.core.model import Event
from setui.core.textsafe import printable
from setui.fleet.model import VmKey
from setui.fleet.prometheus import PrometheusError
from setui.store.records import RUNNING, SKIPPED, WAITING

if TYPE_CHECKING:
    from datetime import datetime

    from setui.agent.acting import StepBook
    from setui.agent.budget import BudgetClient
    from setui.agent.metrics import AgentMetrics
    from setui.agent.policy import Rule
    from setui.agent.telling import Teller

__all__ = ["CLAIM_PATIENCE", "CLAIM_POLL", "PLATFORM_STARTS", "RECHECK", "BudgetGate",
           "GateDecision"]

RECHECK = 5.0  # seconds between checks while waiting, plus as much again at random
CLAIM_POLL = 1.0  # seconds between looks while a claim waits for the group's scrapes
CLAIM_PATIENCE = 300.0  # seconds a claim waits for every VM of the group to be scraped
MAX_DOUBLINGS = 5  # of the pause after claims met (Ethernet's backoff, bounded)
# What a wait for the budget comes to at NotBefore.
PLATFORM_STARTS = ("not approved early; the platform starts the event at NotBefore "
                   "whatever the budget")


@dataclass(frozen=True)
class GateDecision:
    """What the gate decided: ``go`` (the claim held), ``wait`` (``reason``: "budget" or
    "prometheus"), or ``late`` (NotBefore has passed); ``words`` say why."""

    kind: str
    words: str
    reason: str = ""
    met: float = 0.0  # seconds a claim took before it met another's: step back by more


def _waiting(counted: Count | str) -> GateDecision:
    """Wait: the budget is spent, or cannot be told."""
    if isinstance(counted, str):
        return GateDecision("wait", counted, "prometheus")
    return GateDecision("wait", counted.words(),
                        "budget" if counted.problem is None else "prometheus")


class BudgetGate:
    """The budget's gate before an early approval (see the module docstring). ``budget``
    asks Prometheus; ``metrics`` gives this VM's identity and hears what keeps it busy;
    the waits are kept in ``book`` and said by ``teller``; ``clock`` is the monitor's."""

    def __init__(self, budget: BudgetClient | None, *, metrics: AgentMetrics | None,
                 book: StepBook, teller: Teller, clock: Callable[[], datetime]) -> None:
        self.budget = budget
        self.metrics = metrics
        self.book = book
        self.teller = teller
        self.clock = clock
        self.claims: set[str] = set()  # events whose approval is claimed ("approving")
        self.gating: set[str] = set()  # events in the gate now: a stop ends their wait at once
        self.waits: dict[str, str] = {}  # event -> why its approval waits ("budget", ...)
        self.claims_met: dict[str, int] = {}  # event -> its claims that met another's in a row

    def activity(self) -> None:
        """What makes this VM busy, and what waits, to the metrics (at each change)."""
        if self.metrics is None:
            return
        running = {step for (_, step), row in self.book.steps.items() if row.state == RUNNING}
        busy: set[str] = {step for step in ("prepare", "recover") if step in running}
        if self.claims or "approve" in running:
            busy.add("approving")
        self.metrics.set_activity(frozenset(busy), frozenset(self.waits.values()))

    def release(self, event_id: str) -> None:
        """The event's approval was made or failed: its claim shows no more."""
        self.claims.discard(event_id)
        self.activity()

    def forget(self, event_id: str) -> None:
        """The event's steps are over for now: it waits no more."""
        self.claims_met.pop(event_id, None)
        if self.waits.pop(event_id, None) is not None:
            self.activity()

    def _group(self, rule: Rule) -> tuple[GroupLabels | None, VmKey]:
        identity = self.metrics.identity if self.metrics is not None else {}
        assert rule.group is not None
        me = VmKey(identity.get("subscription_id", ""), identity.get("resource_group", ""),
                   identity.get("vm_name", ""))
        return group_of_vm(rule.group, identity), me

    async def _look(self, group: GroupLabels) -> GroupAnswer | str:
        """The group now, or why Prometheus cannot say (in words)."""
        assert self.budget is not None
        try:
            return await asyncio.to_thread(self.budget.look, group)
        except PrometheusError as exc:
            return f"cannot ask Prometheus: {exc}"

    async def _counted(self, event: Event, rule: Rule) -> Count | str:
        """The budget as this event's approval finds it now, or why it cannot be told."""
        group, me = self._group(rule)
        if group is None:
            kind = (rule.group or "").replace("-", " ")
            return f"this VM's {kind} is not known (compute metadata names none)"
        look = await self._look(group)
        if isinstance(look, str):
            return look
        assert rule.max_unavailable is not None
        return count(look, group, me=me, limit=rule.max_unavailable,
                     resources=event.resources)

    def _late(self, event: Event) -> bool:
        return event.not_before is not None and self.clock() >= event.not_before

    async def _gate(self, event: Event, rule: Rule) -> GateDecision:
        """Go (with this event's claim held: the caller lets go of it once the approval
        is made or failed), wait, or too late."""
        if self._late(event):
            return GateDecision("late", "NotBefore has passed")
        first = await self._counted(event, rule)
        if isinstance(first, str) or not first.within:
            return _waiting(first)
        group, me = self._group(rule)
        assert group is not None
        self.claims.add(event.event_id)
        self.activity()
        going = False
        try:
            since: float | None = None
            claimed = time.monotonic()
            give_up = claimed + CLAIM_PATIENCE
            while True:
                look = await self._look(group)
                if isinstance(look, str):
                    return _waiting(look)
                assert rule.max_unavailable is not None
                now = count(look, group, me=me, limit=rule.max_unavailable,
                            resources=event.resources)
                if not now.within:
                    decision = _waiting(now)
                    if now.claiming:  # claims met: each steps back, for a random while
                        decision = GateDecision("wait", decision.words, decision.reason,
                                                met=time.monotonic() - claimed)
                    return decision
                if since is None:
                    # Prometheus's time of an answer read after the claim: a scrape after
                    # it carries the claim, and the others' claims made before it.
                    since = look.at if look.at is not None else float("inf")
                elif not (behind := look.scraped_since(since, me)):
                    going = True
                    return GateDecision("go", now.words())
                elif time.monotonic() > give_up:
                    names = ", ".join(printable(k.vm_name, 64) for k in behind[:5])
                    return _waiting(f"Prometheus has not scraped {names} since this agent "
                                    f"claimed ({CLAIM_PATIENCE:g} s ago)")
                if self._late(event):
                    return GateDecision("late", "NotBefore has passed")
                await asyncio.sleep(CLAIM_POLL)
        finally:
            if not going:
                self.release(event.event_id)

    async def held_back(self, event: Event, rule: Rule) -> bool:
        """Whether the budget holds this early approval back now (True: the step was
        marked waiting, and the rest before the next check is over; or it was skipped at
        NotBefore). False: go, with the claim held (:meth:`release` lets go of it)."""
        event_id = event.event_id
        self.gating.add(event_id)
        try:
            decision = await self._gate(event, rule)
            if decision.kind == "go":
                self.waits.pop(event_id, None)
                self.claims_met.pop(event_id, None)
                self.activity()
                return False
            if decision.kind == "late":
                await self._past_not_before(event, rule, decision.words)
                return True
            await self._wait(event, rule, decision.reason, decision.words)
            pause = self._pause(event_id, decision)
            if event.not_before is not None:  # never past NotBefore: then it is too late
                left = (event.not_before - self.clock()).total_seconds()
                pause = min(pause, max(left, 0.0))
            await asyncio.sleep(pause)
            return True
        finally:
            self.gating.discard(event_id)

    def _pause(self, event_id: str, decision: GateDecision) -> float:
        """Seconds before the next check: RECHECK to twice it, at random. After claims
        met, more: at random up to what a claim took, doubled at each meeting in a row,
        so that two agents that stepped back for each other soon claim apart (a claim
        lasts about a scrape interval, which may be a minute)."""
        pause = RECHECK * (1 + random.random())
        if decision.met <= 0:
            self.claims_met.pop(event_id, None)
            return pause
        met = self.claims_met[event_id] = self.claims_met.get(event_id, 0) + 1
        stepping_back = Backoff(decision.met, decision.met * 2 ** MAX_DOUBLINGS,
                                jitter="full")
        return pause + stepping_back.delay(met + 1)

    async def _wait(self, event: Event, rule: Rule, reason: str, words: str) -> None:
        event_id = event.event_id
        detail = f"waiting: {printable(words, 600)}"
        row = self.book.steps.get((event_id, "approve"))
        first = event_id not in self.waits
        self.waits[event_id] = reason
        if row is None or row.state != WAITING or row.detail != detail:
            await self.book.set(event_id, "approve", rule, WAITING, detail)
            self.teller.record("waiting", event_id, rule=rule.name, step="approve",
                               state=WAITING, detail=detail if reason == "budget" else
                               f"{detail}: no early approval")
        self.activity()
        if first:
            self.teller.notify(event, event_id, rule.name, "waiting",
                               f"no early approval yet: {printable(words, 600)}",
                               extra=reason)

    async def _past_not_before(self, event: Event, rule: Rule, words: str) -> None:
        detail = f"{words} while waiting: {PLATFORM_STARTS}"
        self.waits.pop(event.event_id, None)
        await self.book.set(event.event_id, "approve", rule, SKIPPED, detail)
        self.teller.record("skipped", event.event_id, rule=rule.name, step="approve",
                           state=SKIPPED, detail=detail)

    async def words(self, event: Event, rule: Rule) -> str | None:
        """A dry run's word on the budget: None within it, else why it would wait."""
        counted = await self._counted(event, rule)
        if isinstance(counted, Count) and counted.within:
            return None
        return counted.words() if isinstance(counted, Count) else counted
