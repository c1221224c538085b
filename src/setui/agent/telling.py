"""What the agent says and tells: its lines, and its messages to people.

One line per decision or step goes to ``say`` (printed by ``setui agent``); a message goes
through the notifier, in the policy's templates, under a key that makes it once (kept in
the store before it is sent). A rule's events are told when it says ``notify``; what a
person must know is told whatever it says: a hook or an approval that failed, a step
interrupted, an event that changed under its rule, and the agent's own error states
(agent.errors: a kind of error that lasts a minute, and its end); and, when the policy's
``[notify] short_notice`` says so, an event of this VM announced with less notice than
documented (agent.notice).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from setui.agent.errors import AgentErrors, Failing
from setui.agent.plan import NOT_EARLY, not_early
from setui.core.model import Document, Event
from setui.core.textsafe import printable
from setui.core.timefmt import duration, stamp
from setui.core.tracker import ChangeKind
from setui.store.vmkeys import ThisVm

if TYPE_CHECKING:
    from setui.agent.notify import Message, Notifier
    from setui.agent.policy import Policy

__all__ = ["ALWAYS_TOLD", "MEANS", "Teller", "VmIdentity"]

# Told even by a rule that does not notify: a person must know the agent could not act.
ALWAYS_TOLD = frozenset({"hook failed", "hook not run", "approval failed",
                         "approval outcome unknown", "interrupted", "event changed",
                         NOT_EARLY})
# An early approval refused because the event also starts for other VMs: nothing
# failed, the platform starts it at NotBefore (said as the budget's skip is).
_PLATFORM_STARTS = "the platform starts the event at NotBefore"
# A lifecycle change in words, for $detail when the change carries none of its own (the
# templates read "$change: $detail.", which must never say "completed: .").
MEANS = {
    ChangeKind.RESCHEDULED: "its NotBefore moved",
    ChangeKind.STARTED: "it has started",
    ChangeKind.COMPLETED: "it has ended (it left the document after it started)",
    ChangeKind.CANCELLED: "Azure cancelled it (it left the document before it started)",
    ChangeKind.GONE: "it left the document",
}


@dataclass
class VmIdentity:
    """This VM as the agent knows it: the endpoint it asks, and its name and vmId once
    learned (Agent.name_learned, Agent.id_learned). One copy, read by every part."""

    endpoint: str
    name: str | None = None
    # Its claims, steps, holds and messages are keyed by it once known (store.vmkeys).
    vm_id: str | None = None


class Teller:
    """The agent's lines and messages (see the module docstring). ``clock`` and
    ``document``: the monitor's time and the document it holds now."""

    def __init__(self, policy: Policy, vm: VmIdentity, *,
                 say: Callable[[dict[str, Any]], None], errors: AgentErrors,
                 notifier: Notifier | None, dry_run: bool, clock: Callable[[], datetime],
                 document: Callable[[], Document | None]) -> None:
        self.policy = policy
        self.vm = vm
        self.say = say
        self.errors = errors
        self.notifier = notifier
        self.dry_run = dry_run
        self.clock = clock
        self.document = document
        self._rules = {rule.name: rule for rule in policy.rules}
        self._said: set[str] = set()  # a dry run's messages, each said once (their keys)

    def record(self, kind: str, event_id: str | None, *, rule: str | None = None,
               step: str | None = None, state: str | None = None, detail: str = "") -> None:
        """One line: what the agent decided or did (``kind``), about what."""
        if step == "approve" and kind == "failed" and (early := not_early(detail)):
            kind, detail = "skipped", f"{early.split(' (as ')[0]}; {_PLATFORM_STARTS}"
        self.say({"time": self.clock(), "agent": kind, "event_id": event_id,
                  "rule": rule, "step": step, "state": state, "detail": detail})

    # -- events -----------------------------------------------------------------------------
    def notify(self, event: Event | None, event_id: str, rule_name: str, change: str,
               detail: str, *, extra: str = "", always: bool = False) -> None:
        """A message about ``event`` if its rule notifies, ``change`` is one a person must
        know, or ``always``; ``extra``: more of its key (what makes it once)."""
        if change == "approval failed" and (early := not_early(detail)):
            change, detail = NOT_EARLY, f"{early.removeprefix(NOT_EARLY + ': ')}; " \
                f"{_PLATFORM_STARTS}"
        rule = self._rules.get(rule_name)
        if not (always or (rule is not None and rule.notify) or change in ALWAYS_TOLD):
            return
        fields = {
            "change": change, "event_id": event_id,
            "event_type": event.event_type.value if event else "unknown",
            "status": event.status.value if event else "unknown",
            "not_before": stamp(event.not_before, local=False) if event else "",
            "resources": ", ".join(event.resources) if event else "unknown",
            "this_vm": "not known" if not self.vm.name else (
                "yes" if event and event.affects(self.vm.name) else "no"),
            "vm_name": self._vm(), "rule": rule_name, "detail": detail,
            "source": event.source.value if event and event.source else "unknown",
            "duration": "" if event is None or event.duration is None else event.duration,
            "incarnation": self._incarnation_text(),
        }
        self._send("|".join((self._vm_key(), event_id, change, extra)), event_id,
                   change, fields, rule_name=rule_name)

    def _vm_key(self) -> str:
        """What a message's key begins with: this VM (its vmId, else the endpoint's one
        spelling), so an agent restarted at another endpoint of it sends nothing twice,
        and an agent on a store from another VM still tells its own (store.vmkeys)."""
        return ThisVm.of(self.vm.endpoint, self.vm.vm_id).key

    def _vm(self) -> str:
        return self.vm.name or "(this VM's name is not known yet)"

    def _incarnation_text(self) -> str:
        document = self.document()
        return str(document.incarnation) if document is not None else ""

    def _send(self, key: str, event_id: str, change: str, fields: Mapping[str, object], *,
              rule_name: str | None, body: str | None = None) -> None:
        """The message in the policy's templates (``body``: instead of its body), handed
        to the notifier; in a dry run, said once instead."""
        if not self.policy.urls:
            return
        from setui.agent.notify import Message, render

        message = Message(key, event_id, change, render(self.policy.title, fields),
                          body if body is not None else render(self.policy.body, fields))
        if self.dry_run or self.notifier is None:
            self._would_send(key, event_id, rule_name, message)
            return
        self.notifier.submit(message)

    def _would_send(self, key: str, event_id: str, rule_name: str | None,
                    message: Message) -> None:
        if key not in self._said:
            self._said.add(key)
            self.record("would", event_id or None, rule=rule_name, step="notify",
                        detail=f"dry run: would notify: {message.title}")

    # -- the agent's own errors -------------------------------------------------------------
    def error(self, kind: str, message: str, *, event_id: str | None = None,
              rule: str | None = None, step: str | None = None, quiet: bool = False) -> None:
        """An error of ``kind``: said now, or counted and said with the count later
        (``quiet``: the caller has said it already its own way)."""
        line = self.errors.failed(kind, printable(message, 400), quiet=quiet)
        if line is not None:
            self.record("error", event_id, rule=rule, step=step, detail=line)

    def fine(self, kind: str) -> None:
        """``kind`` works again: said, and told if its error state was."""
        failing = self.errors.ok(kind)
        if failing is not None:
            self._over(failing)

    def errors_due(self) -> None:
        """At each turn: the counts owed, the error states a minute long, those over."""
        due = self.errors.due()
        for line in due.lines:
            self.record("error", None, detail=line)
        now = self.errors.mono()
        for failing in due.tell:
            detail = (f"{failing.kind} failing for {duration(failing.lasted(now))} "
                      f"({failing.count} error{'s' if failing.count != 1 else ''}): "
                      f"{failing.last}")
            self.record("error", None, detail=f"{detail}; telling people")
            self._tell_self("error", failing, detail)
        for failing in due.over:
            self._over(failing)

    def _over(self, failing: Failing) -> None:
        if failing.quiet and not failing.told:
            return  # its caller said it failed, and says it works again
        detail = (f"{failing.kind} works again after {failing.count} "
                  f"error{'s' if failing.count != 1 else ''}")
        self.record("recovered", None, detail=detail)
        if failing.told:
            self._tell_self("recovered", failing, detail)

    def _tell_self(self, change: str, failing: Failing, detail: str) -> None:
        """A message about the agent itself: the policy's title, and a body of its own
        (the body template speaks of an event)."""
        fields: dict[str, object] = {name: "" for name in (
            "event_id", "status", "not_before", "resources", "this_vm", "rule", "source",
            "duration")}
        fields.update({"change": change, "event_type": "agent", "vm_name": self._vm(),
                       "detail": detail, "incarnation": self._incarnation_text()})
        key = "|".join((self._vm_key(), "agent", change, failing.kind,
                        str(failing.since)))
        self._send(key, "", f"agent {change}", fields, rule_name=None,
                   body=f"setui agent on {self._vm()}: {detail}")
