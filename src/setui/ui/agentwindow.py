"""The dashboard's window onto ``setui agent``: what it plans and does, and the hold key.

The agent keeps its work in the store (setui.store.agent); this reads it on a thread
every few seconds for the events on screen, and writes a person's hold or release on a
thread too, with its audit record first. Nothing here waits on SQLite on the event loop.
A dashboard with no agent running finds no rows and shows nothing more.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from setui.agent.plan import EventPlan, plan_text
from setui.core.timefmt import time_of_day
from setui.store.agent import HOLD, RELEASE, AgentLog, Step
from setui.store.records import AuditEntry, event_snapshot

if TYPE_CHECKING:
    from textual.app import App

    from setui.core.model import Document, Event
    from setui.store import Store
    from setui.system.identity import Identity
    from setui.ui.changelog import Hold

__all__ = ["HELD_WORDS", "READ_EVERY", "RELEASED_WORDS", "AgentWindow", "due_while_held",
           "event_plan"]

READ_EVERY = 2.0  # seconds between reads of the agent's work
HELD_WORDS = "Held: the agent takes no step for this event until released (H)."
RELEASED_WORDS = "Released: the agent may act on it again."


_BEFORE = re.compile(r"approve (\d+(?:\.\d+)?) s before NotBefore")


def due_while_held(plan: EventPlan, event: Event, now: datetime,
                   hold: Hold | None) -> EventPlan:
    """A held event's plan, its approval said as due once its time has come ("approve
    due, held by alice since 10:02:11 UTC") rather than as still planned."""
    states = {s.name: s.state for s in plan.steps}
    views = []
    for view in plan.steps:
        if view.name == "approve" and view.state is None:
            before = _BEFORE.match(view.words)
            due = (before is not None and event.not_before is not None
                   and now >= event.not_before - timedelta(seconds=float(before.group(1))))
            due = due or view.words.startswith("approve at once") or (
                view.words.startswith("approve after prepare") and states.get("prepare")
                == "done")
            if due:
                who = (f"{hold.user} since {time_of_day(hold.since, now)} UTC"
                       if hold is not None else "a person")
                view = replace(view, words=f"approve due, held by {who}")
        views.append(view)
    return replace(plan, steps=tuple(views))


def event_plan(steps: Sequence[Step], *, held: bool, now: datetime) -> str:
    """What the agent plans and does for one event, or "" (no agent, no rule): its
    steps in words (agent.plan), or that a person holds it."""
    if not steps:
        return "HELD: the agent will not act on it (H releases)" if held else ""
    return plan_text(steps, now=now, held=held)


class AgentWindow:
    def __init__(self, app: App[None], store: Store | None, *, endpoint: str,
                 identity: Identity) -> None:
        self.app = app
        self.log = AgentLog(store, endpoint) if store is not None else None
        self.identity = identity
        self.steps: dict[str, list[Step]] = {}
        self.held: set[str] = set()
        self._reading = False
        self._read_at: float | None = None

    def learned(self, vm_id: str | None) -> None:
        """This VM's vmId: the agent's work is found by it from now on, whatever endpoint
        the agent was given (read again at the next chance)."""
        if self.log is not None and vm_id is not None:
            self.log.vm_id = vm_id
            self._read_at = None

    def text(self, event_id: str | None, now: datetime) -> str:
        """What the agent plans and does for the event, or "" (no agent, no rule)."""
        if event_id is None:
            return ""
        return event_plan(self.steps.get(event_id, ()), held=event_id in self.held, now=now)

    def read(self, event_ids: Sequence[str], mono: float) -> None:
        """Read the agent's work for these events on a thread (at most every READ_EVERY)."""
        if self.log is None or self._reading or not event_ids or (
                self._read_at is not None and mono - self._read_at < READ_EVERY):
            return
        self._reading = True
        self._read_at = mono
        log, ids = self.log, list(event_ids)

        def work() -> None:
            try:
                steps, held = log.steps(ids), log.held(ids)
            except Exception:  # the status line says what is wrong with the store
                steps, held = None, None
            with contextlib.suppress(RuntimeError):  # the app stopped meanwhile
                self.app.call_from_thread(self._got, steps, held)

        self.app.run_worker(work, thread=True, group="agent-window", exit_on_error=False)

    def _got(self, steps: list[Step] | None, held: set[str] | None) -> None:
        self._reading = False
        if steps is None or held is None:
            return
        found: dict[str, list[Step]] = {}
        for step in steps:
            found.setdefault(step.event_id, []).append(step)
        self.steps, self.held = found, held

    def toggle(self, event_id: str, document: Document | None, now: datetime) -> None:
        """``H``: hold the agent's automation for the event, or release it; audit-logged."""
        if self.log is None:
            self.app.notify("No store is open: the agent cannot be told to hold.",
                            severity="warning", markup=False)
            return
        hold = event_id not in self.held
        event = document.event(event_id) if document is not None else None
        entry = AuditEntry(
            action=HOLD if hold else RELEASE, time=now, user=self.identity.user,
            host=self.identity.host, ssh_client=self.identity.ssh_client,
            endpoint=self.log.endpoint, event_id=event_id,
            event=event_snapshot(event) if event is not None else None,
            incarnation=document.incarnation if document is not None else None)
        log = self.log

        def work() -> None:
            try:
                log.set_hold(event_id, held=hold, entry=entry)
            except Exception as exc:
                message, ok = f"Not recorded, so not changed: {exc}", False
            else:
                message, ok = (HELD_WORDS if hold else RELEASED_WORDS), True
            with contextlib.suppress(RuntimeError):
                self.app.call_from_thread(self._toggled, event_id, hold, ok, message)

        self.app.run_worker(work, thread=True, group="agent-hold", exit_on_error=False)

    def _toggled(self, event_id: str, hold: bool, ok: bool, message: str) -> None:
        if ok:
            (self.held.add if hold else self.held.discard)(event_id)
        self.app.notify(message[:300], severity="information" if ok else "error",
                        timeout=6, markup=False)
        self._read_at = None
