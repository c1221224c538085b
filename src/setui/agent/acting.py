"""The agent's steps themselves: a hook run, an approval, and what comes before each.

:class:`setui.agent.agent.Agent` decides what is due and when; this takes it. Before
every step the event is matched against its rule again (a rule decided on a 5 s Freeze
must not approve the 900 s Reboot it became): one that no longer matches gets no step
now or later, and a person is told. A hook is run with the event in its environment; an
approval goes through the one :class:`~setui.approval.approver.Approver`, bound to the event as
its rule last matched it, with the policy as the actor; one whose outcome is unknown (a
POST may have arrived) is said, told and counted so, never as failed. A dry run makes the
same checks (an earlier approval, :meth:`~setui.approval.approver.Approver.check` bound as the
approval would be, a claim, a hook's owner) and says what it would do.

A store that fails takes no step and loses none (:class:`StepBook`): a hook or an
approval starts only once its ``running`` state is kept; what came of it is kept in
memory at once and written, in order, as soon as the store answers; an approval the audit
log could not take (nothing was sent) waits and is tried again at the next poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Awaitable, Callable
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from setui.agent.deadline import MIN_HOOK_SECONDS, Limit, deadline_of, limit_of
from setui.agent.errors import StoreFault, acting_kind, in_words
from setui.agent.plan import MATCH
from setui.agent.rules import mismatch
from setui.approval.snapshot import Confirmed, changes_between, find_event
from setui.core.model import Event
from setui.core.textsafe import printable
from setui.store.agent import (
    DONE,
    FAILED,
    INTERRUPTED,
    RUNNING,
    SKIPPED,
    UNKNOWN,
    UNMATCHED,
    WAITING,
    Step,
)
from setui.store.records import APPROVED, AuditEntry, event_snapshot

if TYPE_CHECKING:
    from setui.agent.budgeting import BudgetGate
    from setui.agent.metrics import AgentMetrics
    from setui.agent.policy import Rule
    from setui.agent.telling import Teller, VmIdentity
    from setui.approval.approver import Approver
    from setui.core.client import ImdsClient
    from setui.monitor import Monitor
    from setui.store import Store
    from setui.store.agent import AgentLog

__all__ = ["StepBook", "StepRunner", "actor_label"]


def actor_label(rule: str, uid: int | None = None) -> str:
    """The audit log's actor for the agent's approvals under ``rule``."""
    uid = uid if uid is not None else (os.getuid() if hasattr(os, "getuid") else -1)
    return f"policy:{rule} (setui agent, uid {uid})"


class StepBook:
    """Each event's steps as the agent knows them (``steps``: (event, step) -> its row),
    and the writes the store refused (``unsaved``: event -> writes, in order). ``db`` runs
    a write on the store's thread; ``on_change`` hears of every change of a step; ``busy``
    asks for the next poll when a write is refused (said by ``teller``)."""

    def __init__(self, log: AgentLog | None, *, clock: Callable[[], datetime],
                 db: Callable[[Callable[[], object]], Awaitable[object]], teller: Teller,
                 on_change: Callable[[], None], busy: Callable[[], None]) -> None:
        self.log = log  # None: nothing is written (no store, or a dry run)
        self.clock = clock
        self.db = db
        self.teller = teller
        self.on_change = on_change
        self.busy = busy
        self.steps: dict[tuple[str, str], Step] = {}
        self.unsaved: dict[str, list[Callable[[], object]]] = {}

    def state(self, event_id: str, step: str) -> str | None:
        row = self.steps.get((event_id, step))
        return row.state if row is not None else None

    def forget(self, event_id: str) -> None:
        for key in [k for k in self.steps if k[0] == event_id]:
            del self.steps[key]

    async def set(self, event_id: str, step: str, rule: Rule, state: str, detail: str = "",
                  started: datetime | None = None) -> None:
        """Keep the step's state: ``running`` in the store first, or not at all (raises:
        the step is not taken); any other state in memory at once, and in the store now or
        before anything else for the event (:meth:`keep`)."""
        now = self.clock()
        write = partial(self.log.set_step, event_id, step, rule=rule.name, state=state,
                        at=now, detail=detail, started=started) \
            if self.log is not None else None
        if write is not None and state == RUNNING:
            await self.db(write)
        old = self.steps.get((event_id, step))
        self.steps[(event_id, step)] = Step(event_id, step, rule.name, state, detail,
                                            started or (old.started if old else None), now)
        self.on_change()
        if write is not None and state != RUNNING:
            await self.keep(event_id, write)

    async def keep(self, event_id: str, write: Callable[[], object]) -> None:
        """Write what was done or decided for ``event_id`` (already in memory), after any
        such write of it the store refused before; when the store refuses it too, it is
        said, and tried again at the next poll before anything else for the event."""
        self.unsaved.setdefault(event_id, []).append(write)
        await self.flush(event_id)

    async def flush(self, event_id: str) -> bool:
        """The event's writes the store refused, written in order; whether none is left
        (one still refused is said, and tried again at the next poll)."""
        pending = self.unsaved.get(event_id)
        while pending:
            try:
                await self.db(pending[0])
            except Exception as exc:
                self.teller.error(acting_kind(event_id), "cannot keep what was done (tried "
                                  f"again at the next poll): {in_words(exc)}",
                                  event_id=event_id)
                self.busy()
                return False
            pending.pop(0)
        self.unsaved.pop(event_id, None)
        return True


class StepRunner:
    """The agent's steps (see the module docstring). ``monitor``: the document, the time
    and the store's thread; ``client`` and ``store``: what an approval goes through;
    ``log``: the hook runs; ``book`` keeps each step, ``teller`` says and tells it,
    ``gate`` is the budget's (a dry run asks it). ``last_seen``, ``ended`` and ``matched``
    are the agent's memory of the events (each as last seen, those over, each as its rule
    last matched it): the agent keeps them, and a step's recheck updates ``matched``."""

    def __init__(self, monitor: Monitor, client: ImdsClient, store: Store | None,
                 log: AgentLog | None, vm: VmIdentity, *, dry_run: bool,
                 metrics: AgentMetrics | None, book: StepBook, teller: Teller,
                 gate: BudgetGate, last_seen: dict[str, Event], ended: set[str],
                 matched: dict[str, Confirmed]) -> None:
        self.monitor = monitor
        self.client = client
        self.store = store
        self.log = log
        self.vm = vm
        self.dry_run = dry_run
        self.metrics = metrics
        self.book = book
        self.teller = teller
        self.gate = gate
        self.last_seen = last_seen
        self.ended = ended
        self.matched = matched
        self._db = monitor.store_call
        self._host = socket.gethostname() or "unknown"

    def _incarnation(self) -> int:
        document = self.monitor.state.document
        return document.incarnation if document is not None else 0

    def recheck(self, event_id: str, rule: Rule) -> tuple[str, list[str]] | None:
        """Before each step: why the event, as it is now, no longer matches its rule, and
        what changed since the rule last matched it; None when it still matches (then
        that is the version an approval is bound to)."""
        event = find_event(self.monitor.state.document, event_id) \
            if event_id not in self.ended else None
        event = event or self.last_seen.get(event_id)
        if event is None:
            return None
        # The NotBefore window is about the approach: a started or ended event has none.
        window = event.is_scheduled and event_id not in self.ended
        why = mismatch(rule, event, vm_name=self.vm.name, now=self.monitor.now(),
                       window=window)
        now = event_snapshot(event)
        if why is None:
            self.matched[event_id] = Confirmed(event.event_id, now, self._incarnation())
            return None
        seen = self.matched.get(event_id)
        return why, changes_between(seen.snapshot, now) if seen is not None else []

    async def unmatched(self, event_id: str, rule: Rule, step: str, why: str,
                        changes: list[str]) -> None:
        """The event changed under its rule: no step now or later without a person (not
        under another rule either), and that is kept, printed, told and audit-logged."""
        detail = f"no longer matches: {why}" + (f" ({'; '.join(changes)})" if changes else "")
        told = f"rule {rule.name} {detail}; {step} not done, and nothing more without a person"
        event = find_event(self.monitor.state.document, event_id) or self.last_seen.get(event_id)
        if self.dry_run:
            self.teller.record("would", event_id, rule=rule.name, step=step,
                               detail=f"dry run: would take no step: {told}")
            self.teller.notify(event, event_id, rule.name, "event changed", told, extra=step)
            await self.book.set(event_id, MATCH, rule, SKIPPED, detail)
            return
        assert self.store is not None
        seen = self.matched.get(event_id)
        entry = AuditEntry(
            action=UNMATCHED, time=self.monitor.now(), user=actor_label(rule.name),
            host=self._host, endpoint=self.vm.endpoint, event_id=event_id,
            event=event_snapshot(event) if event is not None else None,
            incarnation=self._incarnation(), error=told,
            details={"agent": {"rule": rule.name, "step": step, "changes": changes,
                               "matched": dict(seen.snapshot) if seen else None}})
        await self.book.set(event_id, MATCH, rule, SKIPPED, detail)
        await self.book.keep(event_id, partial(self.store.audit_log.append, entry))
        self.teller.record("unmatched", event_id, rule=rule.name, step=step, state=SKIPPED,
                           detail=told)
        self.teller.notify(event, event_id, rule.name, "event changed", told, extra=step)

    async def would(self, event_id: str, rule: Rule, step: str) -> str:
        """What a real run would do now, in words, after the same checks (nothing is
        posted, run or written)."""
        if step != "approve":
            from setui.agent.trust import untrusted_command

            hook = rule.prepare if step == "prepare" else rule.recover
            assert hook is not None
            problem = untrusted_command(hook.argv)
            if problem is not None:
                return f"refuse to run {step} '{hook.text}': {problem}"
            event = self.last_seen.get(event_id)
            limit = limit_of(hook.timeout, deadline_of(event, step, self.monitor.now()),
                             rule.deadline_margin) if event is not None else None
            if limit is not None and not limit.runs:
                return f"not run {step} '{hook.text}': {limit.words}, leaves no time"
            if limit is not None and limit.by_deadline and limit.seconds is not None:
                return (f"run {step} '{hook.text}' for at most {limit.seconds:.0f} s "
                        f"({limit.words})")
            return f"run {step} '{hook.text}'"
        reason = await self._already(event_id)
        if reason is None:
            approver = self._approver(rule)
            # What the real run's approve checks before it sends, the document read again
            # and the store's integrity included, bound as it would be (the event as its
            # rule last matched it, just now in recheck); then what the claim would find.
            [verdict] = await approver.check(
                [event_id], self.monitor.state.document,
                confirmed_as={event_id: self.matched[event_id]},
                allow_other_vms=rule.other_vms is True)
            reason = verdict.reason
            if reason is None:
                claim = await self._db(approver.claim, event_id)
                reason = claim.describe() if claim is not None else None
        event = self.last_seen.get(event_id)
        if reason is None and rule.max_unavailable is not None and event is not None:
            held = await self.gate.words(event, rule)
            if held is not None:
                return f"wait for the budget: {held}"
        return "approve" if reason is None else f"be refused: {reason}"

    async def _already(self, event_id: str) -> str | None:
        """Who approved the event already on this VM, in words: an accepted approval that
        claims it here (store.claims; not one made on another VM whose store this is)."""
        if self.store is None:
            return None
        claim = await self._db(self.store.audit_log.claim, event_id, self.vm.endpoint,
                               vm_id=self.vm.vm_id)
        return None if claim is None or claim.unknown else f"already approved by {claim.user}"

    def _approver(self, rule: Rule, hooks: list[dict[str, Any]] | None = None) -> Approver:
        from setui.approval.approver import Approver  # loaded by the first approval, not at start
        from setui.system.identity import Identity

        details: dict[str, Any] = {"rule": rule.name}
        if hooks is not None:
            details["hooks"] = hooks
        # An event that reaches other VMs is approved only by a rule that says so: the
        # approver refuses it otherwise, as it does for a person, in the policy's words.
        return Approver(self.client, None if self.store is None else self.store.audit_log,
                        endpoint=self.vm.endpoint,
                        identity=Identity(user=actor_label(rule.name), ssh_client=None,
                                          host=self._host),
                        vm_name=self.vm.name, vm_id=self.vm.vm_id, details={"agent": details},
                        consent=f"other_vms = true in the rule (rule {rule.name} does not "
                                "say it)")

    async def hook(self, event_id: str, rule: Rule, step: str) -> None:
        # Here, not at the top: an agent whose policy runs no hook never loads subprocess.
        from setui.agent.hooks import HookFacts, hook_environment, hook_input, run_hook

        hook = rule.prepare if step == "prepare" else rule.recover
        assert hook is not None and self.log is not None
        event = self.last_seen.get(event_id)
        if event is None:
            return
        incarnation = self._incarnation()
        now = self.monitor.now()
        deadline = deadline_of(event, step, now)
        limit = limit_of(hook.timeout, deadline, rule.deadline_margin)
        if not limit.runs:
            await self._no_time(event, rule, step, hook.name, limit)
            return
        run_id = await self._db(self.log.hook_started, event_id, step, rule=rule.name,
                                command=hook.text, at=now)
        detail = f"{step} '{hook.name}'"
        try:
            await self.book.set(event_id, step, rule, RUNNING, detail, started=now)
        except Exception:  # not run: its run says so, and it is tried again next poll
            await self.book.keep(event_id, partial(
                self.log.hook_ended, run_id, at=self.monitor.now(), exit_status=None,
                timed_out=False, output="not run: the store could not keep its step"))
            raise
        self.teller.record("running", event_id, rule=rule.name, step=step, state=RUNNING,
                           detail=hook.text)
        assert self.vm.name is not None  # no step before it is known (Agent._next)
        kw: HookFacts = {"step": step, "rule": rule.name, "incarnation": incarnation,
                         "vm_name": self.vm.name}
        try:
            result = await run_hook(
                hook, env={**hook_environment(event, **kw), **deadline.environment()},
                stdin=hook_input(event, **kw), timeout=limit.seconds)
        except asyncio.CancelledError:  # a stop: the hook was killed; its run ends here
            with contextlib.suppress(Exception):
                await self._db(self.log.hook_ended, run_id, at=self.monitor.now(),
                               exit_status=None, timed_out=False,
                               output="killed: the agent stopped while it ran")
            raise
        await self.book.keep(event_id, partial(
            self.log.hook_ended, run_id, at=self.monitor.now(),
            exit_status=result.exit_status, timed_out=result.timed_out,
            output=result.output if result.error is None else result.error))
        state = DONE if result.ok else FAILED
        cut = result.timed_out and limit.by_deadline
        described = result.describe() + (
            f": cut short by the deadline ({limit.words})" if cut else "")
        await self.book.set(event_id, step, rule, state, f"{detail} {described}")
        outcome = "ok" if result.ok else ("deadline" if cut else "timeout" if result.timed_out
                                          else "error" if result.error is not None
                                          else "failed")
        if self.metrics is not None:
            self.metrics.count_hook_run(step, outcome)
        self.teller.record("finished" if result.ok else "failed", event_id, rule=rule.name,
                           step=step, state=state, detail=f"{hook.text}: {described}")
        if not result.ok:
            self.teller.notify(event, event_id, rule.name, "hook failed",
                               f"{step} hook '{hook.name}' {described}"
                               + ("; the event is not approved" if step == "prepare" else ""),
                               extra=step)

    async def _no_time(self, event: Event, rule: Rule, step: str, name: str,
                       limit: Limit) -> None:
        """Too little time is left to start the hook: it is not run, and that is kept,
        said, counted and told (the platform starts the event at NotBefore anyway)."""
        detail = (f"{step} '{name}' not run: {limit.words}, leaves under "
                  f"{MIN_HOOK_SECONDS:g} s")
        await self.book.set(event.event_id, step, rule, SKIPPED, detail)
        if self.metrics is not None:
            self.metrics.count_hook_run(step, "deadline")
        self.teller.record("skipped", event.event_id, rule=rule.name, step=step,
                           state=SKIPPED, detail=detail)
        self.teller.notify(event, event.event_id, rule.name, "hook not run",
                           detail + ("; the event is not approved: it starts at NotBefore"
                                     if step == "prepare" else ""), extra=step)

    async def approve(self, event_id: str, rule: Rule) -> None:
        assert self.log is not None and self.store is not None
        already = await self._already(event_id)
        if already is not None:
            await self.book.set(event_id, "approve", rule, DONE, already)
            self.teller.record("skipped", event_id, rule=rule.name, step="approve",
                               state=DONE, detail=already)
            return
        runs = await self._db(self.log.hook_runs, event_id)
        hooks = [{"step": r.step, "command": r.command[:200], "exit_status": r.exit_status,
                  "timed_out": r.timed_out} for r in runs]
        await self.book.set(event_id, "approve", rule, RUNNING, "approve",
                            started=self.monitor.now())
        actor = actor_label(rule.name)
        approver = self._approver(rule, hooks)
        # Bound to the event as its rule last matched it (just now, in recheck): if the
        # service's document says otherwise when it is read again, nothing is sent.
        outcome = (await approver.approve(
            [event_id], self.monitor.state.document,
            confirmed_as={event_id: self.matched[event_id]},
            allow_other_vms=rule.other_vms is True))[0]
        if outcome.refused and outcome.record_seq is None and approver.store_error:
            # The audit log took neither the attempt nor the refusal: nothing was sent, and
            # nothing is an outcome yet. It waits, and is tried again at the next poll.
            problem = printable(approver.store_error, 300)
            await self.book.set(event_id, "approve", rule, WAITING,
                                f"waiting: the audit log cannot be written ({problem})")
            raise StoreFault(f"approve not done, tried again at the next poll: "
                             f"{outcome.message}")
        # A POST that may have arrived is neither approved nor failed: said so everywhere,
        # and the event stays claimed (nothing is sent for it again without a person).
        result = APPROVED if outcome.approved else UNKNOWN if outcome.unknown else FAILED
        state = DONE if outcome.approved else result
        await self.book.set(event_id, "approve", rule, state, outcome.message)
        if self.metrics is not None:
            kind = "refused" if outcome.refused else result
            self.metrics.count_approval(kind, "policy")
        self.teller.record(result, event_id, rule=rule.name, step="approve", state=state,
                           detail=f"{outcome.message} (as {actor})")
        event = self.last_seen.get(event_id)
        if outcome.approved:
            self.monitor.note_approved(event_id)
            self.teller.notify(event, event_id, rule.name, "approved", f"approved as {actor}")
            if self.metrics is not None:
                await self._refresh_approvals([event_id, *self._current_ids()])
        else:
            change = "approval outcome unknown" if result == UNKNOWN else "approval failed"
            self.teller.notify(event, event_id, rule.name, change, outcome.message)

    def _current_ids(self) -> list[str]:
        document = self.monitor.state.document
        return [e.event_id for e in document.events] if document is not None else []

    async def _refresh_approvals(self, ids: list[str]) -> None:
        assert self.metrics is not None and self.store is not None
        try:
            found = await self._db(self.store.audit_log.approvals,
                                   list(dict.fromkeys(ids)))
        except Exception:
            return
        self.metrics.set_approved_by({i: r.user for i, r in found.items()})

    async def cut(self, step: Step, rule: Rule | None, grace: float) -> None:
        """A step the stop interrupted (under ``rule``, None when the policy has it no
        more): marked (not run again), said, told, counted."""
        detail = (f"{step.step} was interrupted: the agent stopped while it ran (waited "
                  f"{grace:g} s); it is not run again")
        if rule is not None and not self.dry_run:
            with contextlib.suppress(Exception):  # the next agent finds it running, then
                await self.book.set(step.event_id, step.step, rule, INTERRUPTED, detail)
        self.teller.record("interrupted", step.event_id, rule=step.rule, step=step.step,
                           state=INTERRUPTED, detail=detail)
        self.count_interrupted(step.step)
        self.teller.notify(self.last_seen.get(step.event_id), step.event_id, step.rule,
                           "interrupted", detail, extra=step.step)

    def count_interrupted(self, step: str) -> None:
        if self.metrics is None:
            return
        if step == "approve":
            self.metrics.count_approval("interrupted", "policy")
        else:
            self.metrics.count_hook_run(step, "interrupted")

