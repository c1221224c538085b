"""The agent: the monitor's updates in, the policy's steps out, each once.

For every event the first matching rule is decided once and kept (step ``match``; a rule
that names this VM waits for its name); then its steps run in order, each after the
event is matched against its rule again (agent.acting): ``prepare`` (a hook),
``approve`` (through the one Approver, so the audit log says ``policy:RULE (setui agent,
uid N)`` and carries the hook outcomes), and ``recover`` (a hook, once the event has
completed or gone). Each step's state is in the store *before* it acts, so a restarted
agent neither repeats what finished nor blindly reruns what a dead agent left running
(that is marked interrupted and told); a clean stop waits a bounded time for a step
under way, then interrupts it and tells. At most one task works on an event at a time:
never two hooks for one event at once. A hold, set by a person from the dashboard, stops
any step from starting. Its parts act: agent.acting takes and keeps a step,
agent.budgeting guards the budget, agent.telling says and tells (its errors included).

A store that fails loses no event's work: a rule decided but not kept is decided again at
the next poll (not at the next change of the document), a step that cannot be kept
``running`` first is not taken and is tried again at the next poll, and what was done
(a hook's outcome, an approval's) is kept in memory at once and written before anything
else for that event once the store answers. While it fails, :meth:`Agent.faults` says
why (``/healthz``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from setui.agent.acting import StepBook, StepRunner
from setui.agent.budgeting import PLATFORM_STARTS, BudgetGate
from setui.agent.errors import WORK, AgentErrors, acting_kind, in_words
from setui.agent.notify import started_told
from setui.agent.plan import MATCH, plan_of
from setui.agent.policy import Policy, Rule
from setui.agent.rules import NameUnknown, first_match
from setui.agent.telling import MEANS, Teller, VmIdentity
from setui.approval.snapshot import Confirmed
from setui.core.model import Event, format_not_before
from setui.core.tracker import ChangeKind
from setui.store.agent import (
    DONE,
    FAILED,
    INTERRUPTED,
    RUNNING,
    SKIPPED,
    WAITING,
    AgentLog,
    Step,
)
from setui.store.records import event_snapshot

if TYPE_CHECKING:
    from setui.agent.budget import BudgetClient
    from setui.agent.metrics import AgentMetrics
    from setui.agent.notify import Notifier
    from setui.core.client import ImdsClient
    from setui.monitor import Monitor, MonitorUpdate
    from setui.store import Store

__all__ = ["STOP_GRACE", "Agent"]

# How long a clean stop waits for a hook or an approval under way: under the unit's
# TimeoutStopSec (30 s), with room for killing the hook (5 s), telling and closing.
STOP_GRACE = 20.0
_ENDED = (ChangeKind.COMPLETED, ChangeKind.CANCELLED, ChangeKind.GONE)
_TOLD = (ChangeKind.RESCHEDULED, ChangeKind.STARTED, *_ENDED)


class Agent:
    """Consumes :class:`MonitorUpdate` s (``await agent.handle(update)``) and acts: it
    decides what is due for each event and when, and wires the parts that take a step
    (``runner``), keep it (``book``), guard the budget (``gate``) and say it (``teller``)."""

    def __init__(self, *, policy: Policy, monitor: Monitor, client: ImdsClient,
                 store: Store | None, vm_name: str | None, dry_run: bool,
                 say: Callable[[dict[str, Any]], None], vm_id: str | None = None,
                 notifier: Notifier | None = None,
                 metrics: AgentMetrics | None = None,
                 errors: AgentErrors | None = None,
                 budget: BudgetClient | None = None) -> None:
        self.policy = policy
        self.monitor = monitor
        self.client = client
        self.store = store
        self.dry_run = dry_run
        self.metrics = metrics
        self.notifier = notifier
        self.vm = VmIdentity(monitor.endpoint, vm_name, vm_id)
        self.log = AgentLog(store, monitor.endpoint, vm_id=vm_id) \
            if store is not None else None
        self.rules = {rule.name: rule for rule in policy.rules}
        self.rule_of: dict[str, Rule] = {}
        self.ended: set[str] = set()
        self.last_seen: dict[str, Event] = {}
        # Each event as its rule last matched it: what an approval is bound to, and what
        # a change is told against.
        self.matched: dict[str, Confirmed] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.held: set[str] = set()
        # Events whose rule cannot be decided yet: a rule that names this VM comes first,
        # and its name is not known (event -> that rule's name).
        self.waiting: dict[str, str] = {}
        self._looked_up: set[str] = set()
        self._interrupted: list[Step] = []
        # What a previous agent left running is known (marked interrupted): until then
        # nothing is decided or done.
        self._resumed = False
        self.stopping = False  # a clean stop is under way: no step starts any more
        self._idle = False
        self._timed = any(rule.not_before_within is not None for rule in policy.rules)
        self._db = monitor.store_call  # the store, on its thread
        self.teller = Teller(policy, self.vm, say=say, errors=errors or AgentErrors(),
                             notifier=notifier, dry_run=dry_run, clock=monitor.now,
                             document=lambda: monitor.state.document)
        self.error = self.teller.error
        self.fine = self.teller.fine
        self.book = StepBook(None if dry_run else self.log, clock=monitor.now,
                             db=monitor.store_call, teller=self.teller,
                             on_change=lambda: self.gate.activity(), busy=self._busy)
        self.gate = BudgetGate(budget, metrics=metrics, book=self.book, teller=self.teller,
                               clock=monitor.now)
        self.runner = StepRunner(monitor, client, store, self.log, self.vm, dry_run=dry_run,
                                 metrics=metrics, book=self.book, teller=self.teller,
                                 gate=self.gate, last_seen=self.last_seen, ended=self.ended,
                                 matched=self.matched)

    @property
    def vm_name(self) -> str | None:
        return self.vm.name

    @property
    def vm_id(self) -> str | None:
        return self.vm.vm_id

    @property
    def steps(self) -> dict[tuple[str, str], Step]:
        """Each event's steps in memory, (event, step) -> its row (acting.StepBook)."""
        return self.book.steps

    def measured(self, kind: str, event: Event | None, event_id: str | None, detail: str, *,
                 tell: bool = False) -> None:
        """What the agent measured (agent.impact, agent.notice): said as a line; ``tell``:
        told to people too, whatever the event's rule says, once (its key)."""
        self.teller.record(kind, event_id, detail=detail)
        if tell and event_id:
            rule = self.rule_of.get(event_id)
            self.teller.notify(event, event_id, rule.name if rule is not None else "none",
                               kind, detail, always=True)

    def name_learned(self, vm_name: str) -> None:
        """This VM's name is known at last: the rules that wait for it are decided, and
        the steps that wait for it may start, at the next poll."""
        self.vm.name = vm_name
        self.monitor.vm_name = vm_name
        self._busy()

    def id_learned(self, vm_id: str) -> None:
        """This VM's vmId is known at last: from now on its steps, holds, claims and
        messages are found by it, whatever endpoint wrote them; the current events' steps
        are read again at the next poll (another endpoint of this VM may have taken some)."""
        self.vm.vm_id = vm_id
        if self.log is not None:
            self.log.vm_id = vm_id
        if self.notifier is not None and self.notifier.log is not None:
            self.notifier.log.vm_id = vm_id  # its messages are this VM's too
        self._looked_up.clear()
        self._busy()

    def faults(self) -> list[str]:
        """Why the agent cannot record or act now, in words (empty: it can): the history
        it cannot write, and the errors of its work and of each event's steps, which
        last until that work succeeds again."""
        reasons = []
        recorder = self.monitor.recorder
        if recorder is not None and recorder.problem is not None:
            reasons.append(f"cannot record the history: {recorder.problem}")
        reasons += [f"{f.kind}: {f.last}" for f in self.teller.errors.acting()]
        return reasons

    @property
    def idle(self) -> bool:
        """Nothing to do until the document changes: no step waits on the clock, a hold
        or a task. The agent's polls may then be quiet (core.quiet)."""
        return self._idle

    def _busy(self) -> None:
        """Something to do at the next poll, whatever it says."""
        self._idle = False
        self.monitor.want_next()

    async def start(self) -> None:
        """Take up where a previous agent stopped: what it left running is interrupted
        (tried again at each poll while the store cannot say)."""
        if self.notifier is not None:
            self.notifier.start()
        try:
            await self._resume()
        except Exception as exc:
            self.error(WORK, f"cannot read the agent's work: {exc}")
            self._busy()

    async def _resume(self) -> None:
        if self._resumed:
            return
        if self.log is None or self.dry_run:
            self._resumed = True
            return
        left = await self._db(self.log.interrupt_running, self.monitor.now())
        self._resumed = True
        for step in left:
            self.teller.record("interrupted", step.event_id, rule=step.rule, step=step.step,
                               state=INTERRUPTED, detail="the agent stopped while this ran; it is "
                               "not run again (whether it finished is not known)")
            self.runner.count_interrupted(step.step)
        self._interrupted = left  # told once the first document says what the events are

    async def stop(self, grace: float = STOP_GRACE) -> None:
        """A clean stop: no step starts any more; a hook or an approval under way may end
        by itself within ``grace`` seconds (and is recorded as usual); what still runs
        then is interrupted (a hook killed with its process group), and that is kept,
        said, told and counted. The messages due are sent before the notifier stops."""
        self.stopping = True
        # A wait for the budget is no action: it ends at once, and the next agent checks
        # again (its step stays "waiting").
        waits = [t for i, t in self.tasks.items() if i in self.gate.gating and not t.done()]
        for task in waits:
            task.cancel()
        await asyncio.gather(*waits, return_exceptions=True)
        busy = {i: t for i, t in self.tasks.items() if not t.done()}
        if busy:
            for step in self._running(busy):
                self.teller.record("stopping", step.event_id, rule=step.rule, step=step.step,
                                   state=RUNNING, detail=f"waiting up to {grace:g} s for "
                                   f"{step.step} to end by itself before stopping")
            with contextlib.suppress(asyncio.CancelledError):  # cancelled: no more waiting
                await asyncio.wait(busy.values(), timeout=grace)
        left = {i: t for i, t in busy.items() if not t.done()}
        cut = self._running(left)
        for task in left.values():
            task.cancel()
        for task in left.values():
            with contextlib.suppress(BaseException):
                await task
        for step in cut:
            await self.runner.cut(step, self.rules.get(step.rule), grace)
        # What was done and not kept yet: one more try each, until the store refuses one.
        for event_id in list(self.book.unsaved):
            if not await self.book.flush(event_id):
                break
        if self.notifier is not None:
            await asyncio.to_thread(self.notifier.stop)

    def stop_words(self, grace: float) -> str:
        """What a stop would wait for now, in words ("" when nothing): the steps running,
        which may end by themselves within ``grace`` seconds."""
        busy = {i: t for i, t in self.tasks.items() if i not in self.gate.gating and not t.done()}
        steps = self._running(busy)
        if not steps:
            return ""
        what = ", ".join(f"{s.step} (rule {s.rule}, event {s.event_id})" for s in steps[:3])
        more = f" and {len(steps) - 3} more" if len(steps) > 3 else ""
        return f"waiting up to {grace:g} s for {what}{more} to end"

    def _running(self, tasks: dict[str, asyncio.Task[None]]) -> list[Step]:
        return [s for (event_id, _), s in self.steps.items()
                if event_id in tasks and s.state == RUNNING]

    # -- each poll ------------------------------------------------------------------------
    async def handle(self, update: MonitorUpdate) -> None:
        """One poll's update: acted on, and never the end of the agent (an error is said,
        once a minute if it repeats, and tried again at the next poll)."""
        result = update.result
        # The connection's own lines say each change of it; a minute of failing polls is
        # an error state all the same, told like any other.
        if result.error is not None:
            self.error("reading the events", result.error.message or str(result.error),
                       quiet=True)
        elif result.fresh:
            self.fine("reading the events")
        try:
            await self._handle(update)
        except Exception as exc:  # a store that fails, or a bug: tried again next poll
            self.error(WORK, in_words(exc))
            self._busy()
        else:
            self.fine(WORK)
        self.teller.errors_due()

    async def _handle(self, update: MonitorUpdate) -> None:
        result = update.result
        document = result.document
        if self.metrics is not None:
            self.metrics.observe(document, fresh=result.fresh,
                                 error_kind=result.error.kind if result.error else None)
        if document is None or (self._idle and not result.changes):
            return  # the common case: nothing changed, and nothing waits on the clock
        ids = [e.event_id for e in document.events]
        ids += [c.event_id for c in result.changes if c.event_id and c.event_id not in ids]
        for event in document.events:
            self.last_seen[event.event_id] = event
        await self._resume()
        await self._catch_up(document.events, ids, approvals=bool(result.changes))
        for step in self._interrupted:
            self.teller.notify(self.last_seen.get(step.event_id), step.event_id, step.rule,
                               "interrupted", f"{step.step} was interrupted by a stop of the "
                               "agent; it is not run again", extra=step.step)
        self._interrupted = []
        for change in result.changes:
            event_id = change.event_id
            rule = self.rule_of.get(event_id or "")
            if event_id is None or rule is None:
                continue
            if change.kind in _ENDED:
                self.ended.add(event_id)
            if change.kind in _TOLD and not change.initial:
                # Only part of the message's key, never shown: kept in the service's form
                # so a restart after an upgrade does not send the same news again.
                extra = format_not_before(change.event.not_before) \
                    if change.kind is ChangeKind.RESCHEDULED and change.event else ""
                told, detail = change.event, change.detail or MEANS[change.kind]
                if change.kind is ChangeKind.STARTED:
                    told, detail = started_told(told, change.previous, detail)
                self.teller.notify(told, event_id, rule.name, change.kind.value, detail,
                                   extra=extra)
        await self._advance()
        if result.changes:
            self._forget({e.event_id for e in document.events})
        # Idle until the next change when no step waits (on the clock, a hold or a task)
        # and no unmatched event could match later (only not_before_within depends on time).
        self._idle = not any(rule.acts and (self._next(i) is not None or self._on_clock(i))
                             for i, rule in self.rule_of.items()) \
            and not any(not t.done() for t in self.tasks.values()) and not self.book.unsaved \
            and not (self._timed and any(e.event_id not in self.rule_of
                                         for e in document.events))
        self.waiting = {i: r for i, r in self.waiting.items() if i in ids}

    def _forget(self, current: set[str]) -> None:
        """Drop what is kept in memory of events that left and need nothing more: a
        long-running agent's memory is bounded by the document, not by its past (the
        store still has it all, and is asked again if such an event comes back)."""
        if self.vm_name is None:
            return  # every step waits for this VM's name: none is done yet
        for event_id in [i for i in self.rule_of if i not in current]:
            task = self.tasks.get(event_id)
            if (task is not None and not task.done()) or self._next(event_id) is not None \
                    or event_id in self.book.unsaved:
                continue
            for table in (self.rule_of, self.last_seen, self.tasks, self.matched):
                table.pop(event_id, None)
            self.ended.discard(event_id)
            self._looked_up.discard(event_id)
            self.book.forget(event_id)
            self.fine(acting_kind(event_id))  # nothing more to do for it, failing or not

    async def _catch_up(self, events: tuple[Event, ...], ids: list[str], *,
                        approvals: bool) -> None:
        """What the document needs from the store, in one trip to the store's thread
        rather than one per question (each trip wakes that thread and then this loop):
        what a previous agent decided for events this one has not looked up yet, the
        rule each undecided event falls under (kept in the store before it is told), and,
        when the document changed, who approved the current events (for the metrics)."""
        now = self.monitor.now()
        new = [i for i in ids if i not in self._looked_up]
        keeps = self.log is not None and not self.dry_run
        pending = [(event, rule) for event in events if event.event_id not in self.rule_of
                   and (rule := self._decide(event, now)) is not None]
        approval_ids = list(dict.fromkeys(ids)) \
            if approvals and self.metrics is not None and self.store is not None else []

        def settle() -> tuple[list[Step], list[tuple[Event, Rule, str]],
                              dict[str, str] | None, Exception | None, bool]:
            rows: list[Step] = []
            approved = None
            if approval_ids:
                assert self.store is not None
                with contextlib.suppress(Exception):  # unread: the labels stay as they were
                    approved = {i: r.user
                                for i, r in self.store.audit_log.approvals(approval_ids).items()}
            if keeps and new:
                assert self.log is not None
                try:
                    rows = self.log.steps(new)
                except Exception as exc:
                    # Unread: nothing is decided, since a previous agent may have decided
                    # and done some of it; asked again at the next poll.
                    return [], [], approved, exc, True
            taken = {r.event_id for r in rows if r.step == MATCH and r.rule in self.rules}
            decided: list[tuple[Event, Rule, str]] = []
            failed: Exception | None = None
            for event, rule in pending:
                if event.event_id in taken:
                    continue
                plan = plan_of(rule)
                if keeps:
                    assert self.log is not None
                    try:
                        self.log.set_step(event.event_id, MATCH, rule=rule.name, state=DONE,
                                          at=now, detail=plan)
                    except Exception as exc:  # raised on the loop, after what was done
                        failed = exc
                        break
                decided.append((event, rule, plan))
            return rows, decided, approved, failed, False

        if approval_ids or (keeps and (new or pending)):
            rows, decided, approved, failed, unread = await self._db(settle)
        else:
            rows, decided, approved, failed, unread = settle()  # nothing to read or write
        if not unread:
            self._looked_up.update(new)
        for row in rows:
            self.steps[(row.event_id, row.step)] = row
            known = self.rules.get(row.rule)
            if row.step == MATCH and known is not None:
                self.rule_of[row.event_id] = known
        document = self.monitor.state.document
        incarnation = document.incarnation if document is not None else 0
        for event, rule, plan in decided:
            self.rule_of[event.event_id] = rule
            self.matched[event.event_id] = Confirmed(event.event_id, event_snapshot(event),
                                                     incarnation)
            self.steps[(event.event_id, MATCH)] = Step(event.event_id, MATCH, rule.name, DONE,
                                                       plan, None, now)
            self.teller.record("matched", event.event_id, rule=rule.name, step=MATCH, state=DONE,
                               detail=plan if not self.dry_run else f"dry run, would: {plan}")
            vms = ", ".join(event.resources) or "no VM"
            self.teller.notify(event, event.event_id, rule.name, "appeared",
                               f"{event.event_type.value} for {vms}")
        if approved is not None and self.metrics is not None:
            self.metrics.set_approved_by(approved)
        if failed is not None:
            raise failed

    def rule_now(self, event: Event) -> Rule | None:
        """The rule ``event`` falls under by the policy now, decided again and kept
        nowhere (the probe's, for an event whose decided rule the store has not kept);
        None when none matches or it waits for this VM's name."""
        try:
            return first_match(self.policy.rules, event, vm_name=self.vm_name,
                               now=self.monitor.now())
        except NameUnknown:
            return None

    def _decide(self, event: Event, now: datetime) -> Rule | None:
        """The rule the event falls under; None also while that waits for this VM's name
        (said once per event)."""
        try:
            rule = first_match(self.policy.rules, event, vm_name=self.vm_name, now=now)
        except NameUnknown as wait:
            if event.event_id not in self.waiting:
                self.waiting[event.event_id] = wait.rule.name
                self.teller.record("waiting", event.event_id, rule=wait.rule.name, step=MATCH,
                                   detail="waiting for this VM's name (not known yet): the rule "
                                          "names this VM")
            return None
        self.waiting.pop(event.event_id, None)
        return rule

    async def _advance(self) -> None:
        """Start a task for every event with a step to take (and no task already)."""
        due = [i for i, rule in self.rule_of.items()
               if rule.acts and (self._next(i) is not None or i in self.book.unsaved)
               and (i not in self.tasks or self.tasks[i].done())]
        if not due or (self.log is None and not self.dry_run):
            return  # no audit log, nothing done: the agent observes (and said so)
        if self.log is not None:
            # Raises when a hold cannot be checked: nothing is acted on until it can.
            self.held = await self._db(self.log.held, due)
        for event_id in due:
            if event_id in self.held:
                await self.book.flush(event_id)  # what was done is kept all the same
                continue
            self.tasks[event_id] = asyncio.ensure_future(self._drive(event_id))

    def _next(self, event_id: str) -> tuple[str, str | None] | None:
        """The next step for the event: (step, None) to take it, (step, reason) to skip
        it, or None when there is nothing to do now."""
        rule = self.rule_of[event_id]
        if self.stopping:
            return None
        if self.vm_name is None:
            return None  # a hook is told this VM's name, the approver checks against it
        if self.book.state(event_id, MATCH) == SKIPPED:
            return None  # its rule no longer matches: nothing more without a person
        approve = self.book.state(event_id, "approve")
        if event_id in self.ended:
            if approve == WAITING:
                return "approve", "the event is over"
            if rule.recover is not None and self.book.state(event_id, "recover") is None:
                return "recover", None
            return None
        document = self.monitor.state.document
        event = document.event(event_id) if document is not None else None
        if event is None:
            return None
        prepare = self.book.state(event_id, "prepare")
        if rule.prepare is not None and prepare is None and not event.is_started:
            return "prepare", None
        if rule.approve == "never" or approve not in (None, WAITING):
            return None
        if event.is_started:
            return "approve", "the event has already started" + (
                f": {PLATFORM_STARTS}" if approve == WAITING else "")
        if rule.prepare is not None and prepare != DONE:
            if prepare in (FAILED, INTERRUPTED, SKIPPED):
                return "approve", f"prepare {prepare}: no approval"
            return None  # prepare is running
        if rule.approve == "before-not-before":
            if event.not_before is None:
                return None
            due = event.not_before - timedelta(seconds=rule.approve_before)
            if self.monitor.now() < due:
                return None
        return "approve", None

    def _on_clock(self, event_id: str) -> bool:
        """Whether the event's approval waits for a time (NotBefore minus N)."""
        rule = self.rule_of[event_id]
        return (rule.approve == "before-not-before" and event_id not in self.ended
                and self.book.state(event_id, "approve") in (None, WAITING))

    async def _drive(self, event_id: str) -> None:
        rule = self.rule_of[event_id]
        current: str | None = None
        try:
            # What was done is kept before anything more is done.
            while await self.book.flush(event_id) and (nxt := self._next(event_id)) is not None:
                step, skip = nxt
                current = step
                if skip is not None:
                    await self.book.set(event_id, step, rule, SKIPPED, skip)
                    self.teller.record("skipped", event_id, rule=rule.name, step=step,
                                       state=SKIPPED, detail=skip)
                elif (changed := self.runner.recheck(event_id, rule)) is not None:
                    await self.runner.unmatched(event_id, rule, step, *changed)
                elif self.dry_run:
                    words = await self.runner.would(event_id, rule, step)
                    await self.book.set(event_id, step, rule, DONE, "dry run")
                    self.teller.record("would", event_id, rule=rule.name, step=step,
                                       detail=f"dry run: would {words}")
                elif self.log is not None and bool(await self._db(self.log.held, [event_id])):
                    self.held.add(event_id)
                    return
                elif step == "approve":
                    event = self.last_seen.get(event_id)
                    if rule.max_unavailable is not None and event is not None \
                            and await self.gate.held_back(event, rule):
                        continue  # waited (and checks again), or too late
                    try:
                        await self.runner.approve(event_id, rule)
                    finally:
                        self.gate.release(event_id)  # its approval shows by now
                else:
                    await self.runner.hook(event_id, rule, step)
                current = None
            if event_id not in self.book.unsaved:
                self.fine(acting_kind(event_id))
        except Exception as exc:  # a store that fails: said, and tried again next poll
            self.error(acting_kind(event_id), in_words(exc), event_id=event_id,
                       rule=rule.name, step=current)
            self._busy()
        finally:
            self.gate.forget(event_id)

