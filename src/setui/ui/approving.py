"""The dashboard's approvals: the dialog, the approval in a worker, asking again.

:class:`Approvals` is an object the dashboard app owns, given what it works with (the
approver, standalone or the agent's; the session; who approves) and a :class:`Front`,
the few things it asks of the app, so it can be read and tested alone. The dialog shows
the event as it is when ``a`` is pressed and the confirmation binds to that snapshot
(:class:`setui.approval.snapshot.Confirmed`); the approver reads the document once more
before the POST, and before each retry, and sends nothing for anything else; an approval
worth asking again (the event changed, before the first send or a retry, or another
approval claims it) opens the dialog again on the event as it is now. Notices never
cover the dialog: they wait on the dashboard's notice line (setui.ui.widgets.notices).
While the service fails, each try is shown on the row; quitting with an approval in
flight asks first and says on exit what became of it.
Nothing here waits on SQLite or HTTP on the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from rich.text import Text
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.screen import Screen

from setui.approval.outcome import HELD, ApprovalOutcome, Progress
from setui.approval.snapshot import Confirmed, changes_between, find_event
from setui.core.health import ConnectionState
from setui.core.textsafe import printable
from setui.core.timefmt import age
from setui.store import event_snapshot
from setui.ui.format import safe
from setui.ui.messages import ApprovalDone, ApprovalNote, Session
from setui.ui.screens.confirm import ConfirmationModal, Prompt, approval_prompt

if TYPE_CHECKING:
    from setui.api.approving import AgentApprover
    from setui.api.attached import AttachedMonitor
    from setui.approval.approver import Approver
    from setui.core.model import Document, Event
    from setui.monitor import Monitor
    from setui.system.identity import Identity

__all__ = ["Approvals", "Front"]


class Front(Protocol):
    """What the approvals ask of the app that shows them: its clock, connection and VM,
    the monitor (told of an approval), the seconds a dialog ignores a yes, a redraw, and
    Textual's own dialogs, notices and workers."""

    @property
    def confirm_guard(self) -> float: ...
    @property
    def vm_name(self) -> str | None: ...
    @property
    def monitor(self) -> Monitor | AttachedMonitor: ...
    @property
    def screen_stack(self) -> list[Screen[Any]]: ...
    def now(self) -> datetime: ...
    def redraw(self) -> None: ...
    def notify(self, message: str, *, title: str = "",
               severity: SeverityLevel = "information", timeout: float | None = None,
               markup: bool = True) -> None: ...
    def push_screen(self, screen: ConfirmationModal,
                    callback: Callable[[bool | None], None]) -> object: ...
    def run_worker(self, *args: Any, **kwargs: Any) -> Any: ...
    def call_later(self, callback: Callable[[], object]) -> bool: ...
    def call_from_thread(self, *args: Any, **kwargs: Any) -> Any: ...
    def post_message(self, message: Message) -> bool: ...
    def exit(self, *args: Any, **kwargs: Any) -> None: ...


class Approvals:
    """The approval half of the dashboard: the app sends it ``a`` (:meth:`request`),
    each :class:`ApprovalDone` (:meth:`done`) and ``q`` (:meth:`quit`). ``read_only``:
    why this dashboard may not approve, None when it may; ``no_approvals``: standalone
    where the agent should answer, why not approve here."""

    def __init__(self, front: Front, approver: Approver | AgentApprover, session: Session,
                 *, identity: Identity, mono: Callable[[], float],
                 read_only: str | None = None, no_approvals: str | None = None) -> None:
        self.front = front
        self.approver = approver
        self.session = session
        self.identity = identity
        self._mono = mono
        self.read_only = read_only
        self.no_approvals = no_approvals
        self._said_read_only = False

    def request(self, event_id: str) -> None:
        """``a``: refuse with the reason, or ask; only the dialog's yes approves."""
        front = self.front
        if self.read_only is not None:
            # No audit record: nothing was attempted. Said once; the status line keeps
            # saying READ-ONLY.
            if not self._said_read_only:
                self._said_read_only = True
                front.notify(f"Approvals are off: this dashboard runs read-only "
                             f"({self.read_only}).", title="Read-only", timeout=8,
                             markup=False)
            return
        if self.no_approvals is not None:  # the agent should approve; nothing to record
            front.notify(safe(self.no_approvals, 700), title="Not approved",
                         severity="error", timeout=15, markup=False)
            return
        if self.session.pending(event_id):
            front.notify("An approval of this event is already under way.", markup=False)
            return
        document = self.session.document
        reason = self.approver.refusal(event_id, document)
        event = find_event(document, event_id)
        if reason is not None or event is None or document is None:
            reason = reason or "the event is not in the current document"
            front.notify(safe(reason, 300), title="Not approved", severity="error",
                         timeout=10, markup=False)
            front.run_worker(partial(self._record_refusal, event_id, document, reason),
                             thread=True, group="audit", exit_on_error=False)
            return
        self._ask(event, document.incarnation)

    def _ask(self, event: Event, incarnation: int, *, changes: tuple[str, ...] = (),
             claimed: str | None = None, retried: bool = False) -> None:
        """Show the dialog for ``event`` as it is now: the confirmation binds to this
        snapshot, whatever the document does while the dialog is open. ``retried``: the
        change was found before a retry (a try had gone), not before the first send."""
        seen = Confirmed(event.event_id, event_snapshot(event), incarnation)
        again = claimed is not None

        def prompt() -> Prompt:  # the dialog follows the event while it is open
            document = self.session.document
            if document is None or document.incarnation < incarnation:
                # The dashboard has not caught up with what the approver read: that
                # read is the newest known.
                return self._prompt(event, changes=changes, claimed=claimed,
                                    retried=retried)
            current = find_event(document, event.event_id)
            moved = tuple(changes_between(seen.snapshot, event_snapshot(current))) \
                if current is not None else ()
            return self._prompt(event, present=current is not None,
                                changes=moved or changes, claimed=claimed,
                                retried=retried and not moved)

        self.front.push_screen(ConfirmationModal(prompt(), guard=self.front.confirm_guard,
                                                 mono=self._mono, refresh=prompt),
                               partial(self._confirmed, event.event_id, seen, again))

    def _record_refusal(self, event_id: str, document: Document | None, reason: str) -> None:
        """On a thread: the audit record of a refusal, then its note on the row."""
        refused = self.approver.record_refusal([event_id], document, reason)
        self.front.post_message(ApprovalDone(self.noted(refused), announce=False))

    def noted(self, outcomes: Iterable[ApprovalOutcome]) -> list[ApprovalNote]:
        """The rows' notes of these outcomes, now, by this dashboard's user."""
        now, user = self.front.now(), self.identity.user
        return [ApprovalNote(o.event_id, now, user, approved=o.approved, refused=o.refused,
                             unknown=o.unknown, message=o.message) for o in outcomes]

    def _prompt(self, event: Event, present: bool = True, changes: tuple[str, ...] = (),
                claimed: str | None = None, retried: bool = False) -> Prompt:
        return approval_prompt(event, vm_name=self.front.vm_name,
                               identity=self.identity.label, now=self.front.now(),
                               previous=self.session.approvals.get(event.event_id),
                               present=present, stale=self._staleness(), changes=changes,
                               claimed=claimed, retried=retried)

    def _staleness(self) -> str | None:
        """Why what the dialog shows may not be what the service says now, if it may not."""
        health = self.front.monitor.health()
        if health.state is ConnectionState.LIVE:
            return None
        seen = self.session.last_seen
        old = f"{age(max(0.0, (self.front.now() - seen).total_seconds()))} old" if seen \
            else "old"
        return (f"The connection is {health.state.value}: this is the last answer, {old}. "
                "The event may have changed since.")

    def _confirmed(self, event_id: str, seen: Confirmed, again: bool, yes: bool | None) -> None:
        front = self.front
        if not yes:
            front.run_worker(partial(self._record_cancel, event_id, self.session.document),
                             thread=True, group="audit", exit_on_error=False)
            return
        self.session.mark_pending(event_id, front.now(), self.identity.user)
        # The approval first: its re-read and the store's check are under way before the
        # row is redrawn (3-5 ms on the loop), not after it.
        front.run_worker(self._approve(event_id, seen, again), group="approve",
                         exit_on_error=False)
        front.call_later(front.redraw)

    def _record_cancel(self, event_id: str, document: Document | None) -> None:
        """On a thread: the audit record of the operator's no."""
        written = self.approver.record_cancel([event_id], document)
        self.front.call_from_thread(
            self.front.notify, "Approval cancelled: nothing was sent."
            + ("" if written else " (The cancel could not be recorded.)"), timeout=5,
            markup=False)

    def _progress(self, progress: Progress) -> None:
        """A try failed and another follows: say so on the row (on the event loop)."""
        note = self.session.approvals.get(progress.event_id)
        if note is None or not note.pending:
            return
        status = progress.status
        self.session.approvals[progress.event_id] = replace(
            note, attempt=progress.attempt,
            last_error=f"HTTP {status}" if status else "held, not sent"
            if progress.kind == HELD else safe(progress.kind, 20),
            next_at=self.front.now() + timedelta(seconds=progress.next_in))
        self.front.redraw()

    async def _approve(self, event_id: str, seen: Confirmed, again: bool) -> None:
        # The document at this moment: the approver refuses an event that started or
        # left while the dialog was open, and reads it once more before the POST. The
        # operator confirmed (typing "yes" where other VMs are concerned) what was shown.
        front = self.front
        self.approver.vm_name = front.vm_name
        try:
            outcomes = await self.approver.approve(
                [event_id], self.session.document, confirmed_as={event_id: seen},
                allow_other_vms=True, again=again, progress=self._progress)
        except Exception as exc:  # a bug must not leave the row saying "approving…"
            front.post_message(ApprovalDone([ApprovalNote(
                event_id, front.now(), self.identity.user,
                message=f"not approved: setui failed ({type(exc).__name__}: {exc}); the "
                        "audit log tells whether the request was sent")]))
            return
        front.post_message(ApprovalDone(
            self.noted(outcomes), ask_again=[o for o in outcomes if o.ask_again],
            document=self.approver.last_read))
        for outcome in outcomes:
            if outcome.approved:
                front.monitor.note_approved(outcome.event_id)
        front.monitor.poll_now()

    def done(self, message: ApprovalDone) -> None:
        """An approval or its refusal finished: its notes on the rows, said on the notice
        line, and the dialog again for what is worth asking again."""
        asking = {outcome.event_id for outcome in message.ask_again}
        for note in message.notes:
            self.session.note_approval(note)
            if not message.announce or note.event_id in asking:
                continue
            if note.approved:
                said = note.message.removeprefix("approved: ")
                text = (f"{said[:1].upper()}{said[1:]}. Azure may start it now, for every VM "
                        "it lists.")
                self.front.notify(safe(text, 300), title="Approved", timeout=8, markup=False)
            elif note.unknown:  # the title says it: the message need not say it twice
                said = note.message.removeprefix("outcome unknown: ")
                self.front.notify(safe(said, 300), title="Outcome unknown",
                                  severity="warning", timeout=15, markup=False)
            else:
                self.front.notify(safe(note.message, 300), title="Not approved",
                                  severity="error", timeout=15, markup=False)
        self.front.redraw()
        # What was confirmed is not what would be approved now (it changed, or another
        # approval claims it): nothing (more) was sent; show it as it is and ask again.
        # A try that may have arrived is said too: a yes then sends again knowingly.
        document = message.document or self.session.document
        for outcome in message.ask_again:
            event = find_event(document, outcome.event_id)
            if event is None or document is None:
                continue
            claimed = outcome.message if outcome.unknown else None if outcome.changes \
                else outcome.message.removeprefix("refused: ")
            self._ask(event, document.incarnation, changes=outcome.changes, claimed=claimed,
                      retried=not outcome.refused)

    def in_flight(self) -> list[ApprovalNote]:
        """The approvals still under way."""
        return [n for n in self.session.approvals.values() if n.pending]

    def quit(self) -> None:
        """``q`` (and Ctrl+C, Ctrl+Q): quit, asking first while an approval is in flight,
        and saying on exit what became of it. In the dialog, Ctrl+C (and q) answer no:
        the dialog closes and nothing quits."""
        front, stack = self.front, self.front.screen_stack
        if isinstance(stack[-1], ConfirmationModal):
            stack[-1].action_cancel()
            return
        if any(isinstance(s, ConfirmationModal) for s in stack):
            return  # a dialog is up under another screen: it answers first
        if not self.in_flight():
            front.exit()
            return
        now = front.now()
        body = Text()
        for note in self.in_flight():
            body.append(f"{safe(note.event_id, 40)}: {safe(note.in_flight(now), 120)}\n")
        if self.approver.outlives_front_end:  # the agent approves: it carries on
            body.append("\nQuitting leaves it to the agent: it carries on and records the "
                        "outcome (`setui audit` shows it).")
        else:
            body.append("\nQuitting stops it: a request under way may or may not reach the "
                        "service. The audit log records the outcome as unknown if a try may "
                        "have arrived, as failed if none can have.")
        front.push_screen(ConfirmationModal(
            Prompt("An approval is in flight. Quit anyway?", body), yes="quit",
            no="stay", guard=front.confirm_guard, mono=self._mono), self._quit_confirmed)

    def _quit_confirmed(self, yes: bool | None) -> None:
        if not yes:
            return
        now = self.front.now()
        what = ("the agent carries it on and records its outcome" if
                self.approver.outlives_front_end else "a request under way may or may not "
                "have reached the service; the audit log records what is known of it "
                "(unknown if a try may have arrived)")
        lines = [f"setui quit while approving {printable(n.event_id, 80)} "
                 f"({printable(n.in_flight(now), 120)}): {what}. `setui events` shows "
                 "whether it started; `setui audit` what was recorded."
                 for n in self.in_flight()]
        self.front.exit(message="\n".join(lines) or None)
