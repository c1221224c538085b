"""The agent: the monitor's updates in, the policy's steps out, each once.

For every event the first matching rule is decided once and kept (step ``match``); then
its steps run in order: ``prepare`` (a hook), ``approve`` (through the one Approver, so
the audit log says ``policy:RULE (setui agent, uid N)`` and carries the hook outcomes),
and ``recover`` (a hook, once the event has completed or gone). Each step's state is in
the store *before* it acts, so a restarted agent neither repeats what finished nor
blindly reruns what a dead agent left running (that is marked interrupted and told).
At most one task works on an event at a time: never two hooks for one event at once.
A hold, set by a person from the dashboard, stops any step from starting.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from setui.agent.plan import MATCH, plan_of
from setui.agent.policy import Policy, Rule
from setui.agent.rules import first_match
from setui.core.model import Event, format_not_before
from setui.core.tracker import ChangeKind
from setui.store.agent import (
    DONE,
    FAILED,
    INTERRUPTED,
    RUNNING,
    SKIPPED,
    AgentLog,
    Step,
)

if TYPE_CHECKING:
    from setui.agent.metrics import AgentMetrics
    from setui.agent.notify import Notifier
    from setui.core.client import ImdsClient
    from setui.monitor import Monitor, MonitorUpdate
    from setui.store import Store

__all__ = ["Agent", "actor_label"]

_T = TypeVar("_T")
_ENDED = (ChangeKind.COMPLETED, ChangeKind.CANCELLED, ChangeKind.GONE)
_TOLD = (ChangeKind.RESCHEDULED, ChangeKind.STARTED, *_ENDED)
# Told even by a rule that does not notify: a person must know the agent could not act.
_ALWAYS_TOLD = frozenset({"hook failed", "approval failed", "interrupted"})


def actor_label(rule: str, uid: int | None = None) -> str:
    """The audit log's actor for the agent's approvals under ``rule``."""
    uid = uid if uid is not None else (os.getuid() if hasattr(os, "getuid") else -1)
    return f"policy:{rule} (setui agent, uid {uid})"


class Agent:
    """Consumes :class:`MonitorUpdate` s (``await agent.handle(update)``) and acts."""

    def __init__(self, *, policy: Policy, monitor: Monitor, client: ImdsClient,
                 store: Store | None, vm_name: str, dry_run: bool,
                 say: Callable[[dict[str, Any]], None],
                 notifier: Notifier | None = None,
                 metrics: AgentMetrics | None = None) -> None:
        self.policy = policy
        self.monitor = monitor
        self.client = client
        self.store = store
        self.endpoint = monitor.endpoint
        self.vm_name = vm_name
        self.dry_run = dry_run
        self.say = say
        self.metrics = metrics
        self.log = AgentLog(store, monitor.endpoint) if store is not None else None
        self.notifier = notifier
        self.rules = {rule.name: rule for rule in policy.rules}
        self.rule_of: dict[str, Rule] = {}
        self.steps: dict[tuple[str, str], Step] = {}
        self.ended: set[str] = set()
        self.last_seen: dict[str, Event] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.held: set[str] = set()
        self._looked_up: set[str] = set()
        self._said: set[tuple[str, str]] = set()  # dry run: each "would" said once
        self._interrupted: list[Step] = []
        self._idle = False
        self._timed = any(rule.not_before_within is not None for rule in policy.rules)
        self._host = socket.gethostname() or "unknown"

    # -- the store, on its thread ---------------------------------------------------------
    async def _db(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        recorder = self.monitor.recorder
        if recorder is not None:
            return await recorder.call(fn, *args, **kwargs)
        return await asyncio.to_thread(fn, *args, **kwargs)

    def _record(self, kind: str, event_id: str | None, *, rule: str | None = None,
                step: str | None = None, state: str | None = None, detail: str = "") -> None:
        self.say({"time": self.monitor.now(), "agent": kind, "event_id": event_id,
                  "rule": rule, "step": step, "state": state, "detail": detail})

    async def start(self) -> None:
        """Take up where a previous agent stopped: what it left running is interrupted."""
        if self.notifier is not None:
            self.notifier.start()
        if self.log is None or self.dry_run:
            return
        try:
            left = await self._db(self.log.interrupt_running, self.monitor.now())
        except Exception as exc:
            self._record("store", None, detail=f"cannot read the agent's work: {exc}")
            return
        for step in left:
            self._record("interrupted", step.event_id, rule=step.rule, step=step.step,
                         state=INTERRUPTED, detail="the agent stopped while this ran; it is "
                         "not run again (whether it finished is not known)")
            if self.metrics is not None and step.step != "approve":
                self.metrics.hook_runs.labels(hook=step.step, outcome="interrupted").inc()
        self._interrupted = left  # told once the first document says what the events are

    async def stop(self) -> None:
        for task in list(self.tasks.values()):
            task.cancel()
        for task in list(self.tasks.values()):
            with contextlib.suppress(BaseException):
                await task
        if self.notifier is not None:
            await asyncio.to_thread(self.notifier.stop)

    # -- each poll ------------------------------------------------------------------------
    async def handle(self, update: MonitorUpdate) -> None:
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
        await self._catch_up(document.events, ids, approvals=bool(result.changes))
        for step in self._interrupted:
            self._notify(self.last_seen.get(step.event_id), step.event_id, step.rule,
                         "interrupted", f"{step.step} was interrupted by a stop of the agent; "
                         "it is not run again", extra=step.step)
        self._interrupted = []
        for change in result.changes:
            event_id = change.event_id
            rule = self.rule_of.get(event_id or "")
            if event_id is None or rule is None:
                continue
            if change.kind in _ENDED:
                self.ended.add(event_id)
            if change.kind in _TOLD and not change.initial:
                extra = format_not_before(change.event.not_before) \
                    if change.kind is ChangeKind.RESCHEDULED and change.event else ""
                self._notify(change.event, event_id, rule.name, change.kind.value,
                             change.detail, extra=extra)
        await self._advance()
        if result.changes:
            self._forget({e.event_id for e in document.events})
        # Idle until the next change when no step waits (on the clock, a hold or a task)
        # and no unmatched event could match later (only not_before_within depends on time).
        self._idle = not any(rule.acts and (self._next(i) is not None or self._on_clock(i))
                             for i, rule in self.rule_of.items()) \
            and not any(not t.done() for t in self.tasks.values()) \
            and not (self._timed and any(e.event_id not in self.rule_of
                                         for e in document.events))

    def _forget(self, current: set[str]) -> None:
        """Drop what is kept in memory of events that left and need nothing more: a
        long-running agent's memory is bounded by the document, not by its past (the
        store still has it all, and is asked again if such an event comes back)."""
        for event_id in [i for i in self.rule_of if i not in current]:
            task = self.tasks.get(event_id)
            if (task is not None and not task.done()) or self._next(event_id) is not None:
                continue
            for table in (self.rule_of, self.last_seen, self.tasks):
                table.pop(event_id, None)  # type: ignore[attr-defined]
            self.ended.discard(event_id)
            self._looked_up.discard(event_id)
            for key in [k for k in self.steps if k[0] == event_id]:
                del self.steps[key]

    async def _catch_up(self, events: tuple[Event, ...], ids: list[str], *,
                        approvals: bool) -> None:
        """What the document needs from the store, in one trip to the store's thread
        rather than one per question (each trip wakes that thread and then this loop):
        what a previous agent decided for events this one has not looked up yet, the
        rule each undecided event falls under (kept in the store before it is told), and,
        when the document changed, who approved the current events (for the metrics)."""
        now = self.monitor.now()
        new = [i for i in ids if i not in self._looked_up]
        self._looked_up.update(new)
        keeps = self.log is not None and not self.dry_run
        pending = [(event, rule) for event in events if event.event_id not in self.rule_of
                   and (rule := first_match(self.policy.rules, event, vm_name=self.vm_name,
                                            now=now)) is not None]
        approval_ids = list(dict.fromkeys(ids)) \
            if approvals and self.metrics is not None and self.store is not None else []

        def settle() -> tuple[list[Step], list[tuple[Event, Rule, str]],
                              dict[str, str] | None, Exception | None]:
            rows: list[Step] = []
            if keeps and new:
                assert self.log is not None
                with contextlib.suppress(Exception):  # unread: decided as if new
                    rows = self.log.steps(new)
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
            approved = None
            if approval_ids:
                assert self.store is not None
                with contextlib.suppress(Exception):  # unread: the labels stay as they were
                    approved = {i: r.user
                                for i, r in self.store.approvals(approval_ids).items()}
            return rows, decided, approved, failed

        if approval_ids or (keeps and (new or pending)):
            rows, decided, approved, failed = await self._db(settle)
        else:
            rows, decided, approved, failed = settle()  # nothing to read or write
        for row in rows:
            self.steps[(row.event_id, row.step)] = row
            known = self.rules.get(row.rule)
            if row.step == MATCH and known is not None:
                self.rule_of[row.event_id] = known
        for event, rule, plan in decided:
            self.rule_of[event.event_id] = rule
            self.steps[(event.event_id, MATCH)] = Step(event.event_id, MATCH, rule.name, DONE,
                                                       plan, None, now)
            self._record("matched", event.event_id, rule=rule.name, step=MATCH, state=DONE,
                         detail=plan if not self.dry_run else f"dry run, would: {plan}")
            self._notify(event, event.event_id, rule.name, "appeared",
                         f"{event.event_type.value} for {', '.join(event.resources) or 'no VM'}")
        if approved is not None and self.metrics is not None:
            self.metrics.set_approved_by(approved)
        if failed is not None:
            raise failed

    async def _set(self, event_id: str, step: str, rule: Rule, state: str, detail: str = "",
                   started: datetime | None = None) -> None:
        """Keep the step's state, in the store first (not in a dry run)."""
        now = self.monitor.now()
        if self.log is not None and not self.dry_run:
            await self._db(self.log.set_step, event_id, step, rule=rule.name, state=state,
                           at=now, detail=detail, started=started)
        old = self.steps.get((event_id, step))
        self.steps[(event_id, step)] = Step(event_id, step, rule.name, state, detail,
                                            started or (old.started if old else None), now)

    async def _advance(self) -> None:
        """Start a task for every event with a step to take (and no task already)."""
        due = [i for i, rule in self.rule_of.items()
               if rule.acts and self._next(i) is not None
               and (i not in self.tasks or self.tasks[i].done())]
        if not due:
            return
        if self.log is not None:
            try:
                self.held = await self._db(self.log.held, due)
            except Exception:
                return  # a hold cannot be checked: act on nothing until it can
        for event_id in due:
            if event_id in self.held:
                continue
            self.tasks[event_id] = asyncio.ensure_future(self._drive(event_id))

    def _state(self, event_id: str, step: str) -> str | None:
        row = self.steps.get((event_id, step))
        return row.state if row is not None else None

    def _next(self, event_id: str) -> tuple[str, str | None] | None:
        """The next step for the event: (step, None) to take it, (step, reason) to skip
        it, or None when there is nothing to do now."""
        rule = self.rule_of[event_id]
        if event_id in self.ended:
            if rule.recover is not None and self._state(event_id, "recover") is None:
                return "recover", None
            return None
        document = self.monitor.state.document
        event = document.event(event_id) if document is not None else None
        if event is None:
            return None
        prepare = self._state(event_id, "prepare")
        if rule.prepare is not None and prepare is None and not event.is_started:
            return "prepare", None
        if rule.approve == "never" or self._state(event_id, "approve") is not None:
            return None
        if event.is_started:
            return "approve", "the event has already started"
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
                and self._state(event_id, "approve") is None)

    async def _drive(self, event_id: str) -> None:
        rule = self.rule_of[event_id]
        current: str | None = None
        try:
            while (nxt := self._next(event_id)) is not None:
                step, skip = nxt
                current = step
                if skip is not None:
                    await self._set(event_id, step, rule, SKIPPED, skip)
                    self._record("skipped", event_id, rule=rule.name, step=step,
                                 state=SKIPPED, detail=skip)
                elif self.dry_run:
                    await self._set(event_id, step, rule, DONE, "dry run")
                    self._record("would", event_id, rule=rule.name, step=step,
                                 detail=f"dry run: would {self._words(rule, step)}")
                elif self.log is not None and await self._db(self.log.held, [event_id]):
                    self.held.add(event_id)
                    return
                elif step == "approve":
                    await self._approve(event_id, rule)
                else:
                    await self._hook(event_id, rule, step)
                current = None
        except asyncio.CancelledError:
            # Stopped mid-step: say so now rather than leave the next agent to find out.
            if current is not None and self._state(event_id, current) == RUNNING \
                    and self.log is not None and not self.dry_run:
                with contextlib.suppress(Exception):
                    self.log.set_step(event_id, current, rule=rule.name, state=INTERRUPTED,
                                      at=self.monitor.now(),
                                      detail="the agent was stopped while this ran")
            raise
        except Exception as exc:  # a store that fails: said, and tried again next poll
            self._record("error", event_id, rule=rule.name, step=current,
                         detail=f"{type(exc).__name__}: {exc}")

    @staticmethod
    def _words(rule: Rule, step: str) -> str:
        if step == "approve":
            return "approve"
        hook = rule.prepare if step == "prepare" else rule.recover
        return f"run {step} '{hook.text if hook else '?'}'"

    async def _hook(self, event_id: str, rule: Rule, step: str) -> None:
        # Here, not at the top: an agent whose policy runs no hook never loads subprocess.
        from setui.agent.hooks import hook_environment, hook_input, run_hook

        hook = rule.prepare if step == "prepare" else rule.recover
        assert hook is not None and self.log is not None
        event = self.last_seen.get(event_id)
        if event is None:
            return
        document = self.monitor.state.document
        incarnation = document.incarnation if document is not None else 0
        now = self.monitor.now()
        run_id = await self._db(self.log.hook_started, event_id, step, rule=rule.name,
                                command=hook.text, at=now)
        detail = f"{step} '{hook.name}'"
        await self._set(event_id, step, rule, RUNNING, detail, started=now)
        self._record("running", event_id, rule=rule.name, step=step, state=RUNNING,
                     detail=hook.text)
        kw = {"step": step, "rule": rule.name, "incarnation": incarnation,
              "vm_name": self.vm_name}
        result = await run_hook(hook, env=hook_environment(event, **kw),
                                stdin=hook_input(event, **kw))
        await self._db(self.log.hook_ended, run_id, at=self.monitor.now(),
                       exit_status=result.exit_status, timed_out=result.timed_out,
                       output=result.output if result.error is None else result.error)
        state = DONE if result.ok else FAILED
        await self._set(event_id, step, rule, state, f"{detail} {result.describe()}")
        outcome = "ok" if result.ok else ("timeout" if result.timed_out else (
            "error" if result.error is not None else "failed"))
        if self.metrics is not None:
            self.metrics.hook_runs.labels(hook=step, outcome=outcome).inc()
        self._record("finished" if result.ok else "failed", event_id, rule=rule.name,
                     step=step, state=state, detail=f"{hook.text}: {result.describe()}")
        if not result.ok:
            self._notify(event, event_id, rule.name, "hook failed",
                         f"{step} hook '{hook.name}' {result.describe()}"
                         + ("; the event is not approved" if step == "prepare" else ""),
                         extra=step)

    async def _approve(self, event_id: str, rule: Rule) -> None:
        from setui.approval import Approver  # loaded by the first approval, not at start
        from setui.identity import Identity

        assert self.log is not None and self.store is not None
        document = self.monitor.state.document  # the snapshot the decision is made on
        already = await self._db(self.store.approvals, [event_id])
        if already:
            record = next(iter(already.values()))
            await self._set(event_id, "approve", rule, DONE,
                            f"already approved by {record.user}")
            self._record("skipped", event_id, rule=rule.name, step="approve", state=DONE,
                         detail=f"already approved by {record.user}")
            return
        runs = await self._db(self.log.hook_runs, event_id)
        hooks = [{"step": r.step, "command": r.command[:200], "exit_status": r.exit_status,
                  "timed_out": r.timed_out} for r in runs]
        await self._set(event_id, "approve", rule, RUNNING, "approve",
                        started=self.monitor.now())
        actor = actor_label(rule.name)
        approver = Approver(self.client, self.store, endpoint=self.endpoint,
                            identity=Identity(user=actor, ssh_client=None, host=self._host),
                            vm_name=self.vm_name,
                            details={"agent": {"rule": rule.name, "hooks": hooks}})
        # An event that reaches other VMs is approved only by a rule that says so
        # (other_vms = true): the approver refuses it otherwise, as it does for a person.
        outcome = (await approver.approve(
            [event_id], document, allow_other_vms=rule.other_vms is True))[0]
        state = DONE if outcome.approved else FAILED
        await self._set(event_id, "approve", rule, state, outcome.message)
        if self.metrics is not None:
            kind = "approved" if outcome.approved else (
                "refused" if outcome.refused else "failed")
            self.metrics.approvals.labels(outcome=kind, actor_kind="policy").inc()
        self._record("approved" if outcome.approved else "failed", event_id,
                     rule=rule.name, step="approve", state=state,
                     detail=f"{outcome.message} (as {actor})")
        event = self.last_seen.get(event_id)
        if outcome.approved:
            self.monitor.note_approved(event_id)
            self._notify(event, event_id, rule.name, "approved", f"approved as {actor}")
            if self.metrics is not None:
                await self._refresh_approvals([event_id, *self._current_ids()])
        else:
            self._notify(event, event_id, rule.name, "approval failed", outcome.message)

    def _current_ids(self) -> list[str]:
        document = self.monitor.state.document
        return [e.event_id for e in document.events] if document is not None else []

    async def _refresh_approvals(self, ids: list[str]) -> None:
        assert self.metrics is not None and self.store is not None
        try:
            found = await self._db(self.store.approvals, list(dict.fromkeys(ids)))
        except Exception:
            return
        self.metrics.set_approved_by({i: r.user for i, r in found.items()})

    # -- notifications --------------------------------------------------------------------
    def _notify(self, event: Event | None, event_id: str, rule_name: str, change: str,
                detail: str, *, extra: str = "") -> None:
        rule = self.rules.get(rule_name)
        if not ((rule is not None and rule.notify) or change in _ALWAYS_TOLD):
            return
        if not self.policy.urls:
            return
        from setui.agent.notify import Message, render

        fields = {
            "change": change, "event_id": event_id,
            "event_type": event.event_type.value if event else "unknown",
            "status": event.status.value if event else "unknown",
            "not_before": format_not_before(event.not_before) if event else "",
            "resources": ", ".join(event.resources) if event else "unknown",
            "this_vm": "yes" if event and event.affects(self.vm_name) else "no",
            "vm_name": self.vm_name, "rule": rule_name, "detail": detail,
            "source": event.source.value if event and event.source else "unknown",
            "duration": "" if event is None or event.duration is None else event.duration,
            "incarnation": (self.monitor.state.document.incarnation
                            if self.monitor.state.document is not None else ""),
        }
        key = "|".join((self.endpoint, event_id, change, extra))
        message = Message(key, event_id, change, render(self.policy.title, fields),
                          render(self.policy.body, fields))
        if self.dry_run or self.notifier is None:
            if (key, "notify") not in self._said:
                self._said.add((key, "notify"))
                self._record("would", event_id, rule=rule_name, step="notify",
                             detail=f"dry run: would notify: {message.title}")
            return
        self.notifier.submit(message)
