"""The dashboard's approvals: the dialog, the approval in a worker, asking again.

A mixin of :class:`setui.ui.app.SetuiApp`, kept apart so the app stays a thin shell.
The dialog shows the event as it is when ``a`` is pressed and the confirmation binds to
that snapshot (:class:`setui.approval.snapshot.Confirmed`); the
:class:`~setui.approval.approver.Approver` reads the document once more before the POST,
and before each retry, and sends nothing for anything else; an approval worth asking
again (the event changed, before the first send or a retry, or another approval claims
it) opens the dialog again on the event as it is now. Notices never cover the dialog:
they wait on the dashboard's notice line (setui.ui.widgets.notices). While the service
fails, each try is shown on the row; quitting with an approval in flight asks first and
says on exit what became of it.
Nothing here waits on SQLite or HTTP on the event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.notifications import SeverityLevel

from setui.approval.approver import Approver
from setui.approval.outcome import HELD, Progress
from setui.approval.snapshot import Confirmed, changes_between, find_event
from setui.core.health import ConnectionState, Health
from setui.core.textsafe import printable
from setui.core.timefmt import age
from setui.store import event_snapshot
from setui.ui.format import safe
from setui.ui.messages import ApprovalDone, ApprovalNote, Session
from setui.ui.screens.confirm import ConfirmationModal, Prompt, approval_prompt

if TYPE_CHECKING:
    from setui.api.approving import AgentApprover
    from setui.api.attached import AttachedMonitor
    from setui.core.model import Document, Event
    from setui.monitor import Monitor
    from setui.settings.config import Config
    from setui.system.identity import Identity

__all__ = ["Approvals"]


class Approvals:
    """The approval half of the dashboard app (see the module docstring)."""

    # What the app provides (set in SetuiApp.__init__): standalone, the approver and the
    # monitor; attached to the agent, their faces over its API (ui.attached).
    session: Session
    approver: Approver | AgentApprover
    config: Config
    identity: Identity
    monitor: Monitor | AttachedMonitor
    vm_name: str | None
    confirm_guard: float
    _mono: Callable[[], float]
    _said_read_only: bool
    _read_only_why: str | None
    no_approvals: str | None  # standalone where the agent should answer: why not approve

    if TYPE_CHECKING:  # the App's own, as the mixin uses them
        def notify(self, message: str, *, title: str = "",
                   severity: SeverityLevel = "information", timeout: float | None = None,
                   markup: bool = True) -> None: ...
        def now(self) -> datetime: ...
        def health(self) -> Health: ...
        def _refresh(self) -> None: ...
        def call_later(self, callback: Callable[..., object], *args: Any,
                       **kwargs: Any) -> bool: ...
        def run_worker(self, *args: Any, **kwargs: Any) -> Any: ...
        def post_message(self, message: Any) -> bool: ...
        def call_from_thread(self, *args: Any, **kwargs: Any) -> Any: ...
        def push_screen(self, *args: Any, **kwargs: Any) -> Any: ...
        def exit(self, *args: Any, **kwargs: Any) -> None: ...
        screen_stack: list[Any]
        screen: Any

    # -- approvals --------------------------------------------------------------------------
    def request_approval(self, event_id: str) -> None:
        """``a``: refuse with the reason, or ask; only the dialog's yes approves."""
        if self.config.read_only:
            # No audit record: nothing was attempted. Said once; the status line keeps
            # saying READ-ONLY.
            if not self._said_read_only:
                self._said_read_only = True
                why = self._read_only_why or ("the --read-only option, or read-only = true "
                                              "in the config file")
                self.notify(f"Approvals are off: this dashboard runs read-only ({why}).",
                            title="Read-only", timeout=8, markup=False)
            return
        if self.no_approvals is not None:  # the agent should approve; nothing to record
            self.notify(safe(self.no_approvals, 700), title="Not approved",
                        severity="error", timeout=15, markup=False)
            return
        if self.session.pending(event_id):
            self.notify("An approval of this event is already under way.", markup=False)
            return
        document = self.session.document
        reason = self.approver.refusal(event_id, document)
        event = find_event(document, event_id)
        if reason is not None or event is None or document is None:
            reason = reason or "the event is not in the current document"
            self.notify(safe(reason, 300), title="Not approved", severity="error",
                        timeout=10, markup=False)
            self.run_worker(partial(self._record_refusal, event_id, document, reason),
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

        self._push_dialog(ConfirmationModal(prompt(), guard=self.confirm_guard,
                                            mono=self._mono, refresh=prompt),
                          partial(self._confirmed, event.event_id, seen, again))

    def _push_dialog(self, dialog: ConfirmationModal, then: Callable[[bool | None], None],
                     ) -> None:
        """Push a dialog; ``then`` gets its answer."""
        self.push_screen(dialog, callback=then)

    def _record_refusal(self, event_id: str, document: Document | None, reason: str) -> None:
        """On a thread: the audit record of a refusal, then its note on the row."""
        notes = [ApprovalNote(o.event_id, self.now(), self.identity.user, refused=True,
                              message=o.message)
                 for o in self.approver.record_refusal([event_id], document, reason)]
        self.post_message(ApprovalDone(notes, announce=False))

    def _prompt(self, event: Event, present: bool = True, changes: tuple[str, ...] = (),
                claimed: str | None = None, retried: bool = False) -> Prompt:
        return approval_prompt(event, vm_name=self.vm_name, identity=self.identity.label,
                               now=self.now(), previous=self.session.approvals.get(
                                   event.event_id), present=present, stale=self._staleness(),
                               changes=changes, claimed=claimed, retried=retried)

    def _staleness(self) -> str | None:
        """Why what the dialog shows may not be what the service says now, if it may not."""
        health = self.health()
        if health.state is ConnectionState.LIVE:
            return None
        seen = self.session.last_seen
        old = f"{age(max(0.0, (self.now() - seen).total_seconds()))} old" if seen else "old"
        return (f"The connection is {health.state.value}: this is the last answer, {old}. "
                "The event may have changed since.")

    def _confirmed(self, event_id: str, seen: Confirmed, again: bool, yes: bool | None) -> None:
        if not yes:
            self.run_worker(partial(self._record_cancel, event_id, self.session.document),
                            thread=True, group="audit", exit_on_error=False)
            return
        self.session.mark_pending(event_id, self.now(), self.identity.user)
        # The approval first: its re-read and the store's check are under way before the
        # row is redrawn (3-5 ms on the loop), not after it.
        self.run_worker(self._approve(event_id, seen, again), group="approve",
                        exit_on_error=False)
        self.call_later(self._refresh)

    def _record_cancel(self, event_id: str, document: Document | None) -> None:
        """On a thread: the audit record of the operator's no."""
        written = self.approver.record_cancel([event_id], document)
        self.call_from_thread(
            self.notify, "Approval cancelled: nothing was sent."
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
            next_at=self.now() + timedelta(seconds=progress.next_in))
        self._refresh()

    async def _approve(self, event_id: str, seen: Confirmed, again: bool) -> None:
        # The document at this moment: the approver refuses an event that started or
        # left while the dialog was open, and reads it once more before the POST. The
        # operator confirmed (typing "yes" where other VMs are concerned) what was shown.
        self.approver.vm_name = self.vm_name
        try:
            outcomes = await self.approver.approve(
                [event_id], self.session.document, confirmed_as={event_id: seen},
                allow_other_vms=True, again=again, progress=self._progress)
        except Exception as exc:  # a bug must not leave the row saying "approving…"
            self.post_message(ApprovalDone([ApprovalNote(
                event_id, self.now(), self.identity.user,
                message=f"not approved: setui failed ({type(exc).__name__}: {exc}); the "
                        "audit log tells whether the request was sent")]))
            return
        self.post_message(ApprovalDone([
            ApprovalNote(o.event_id, self.now(), self.identity.user, approved=o.approved,
                         refused=o.refused, unknown=o.unknown, message=o.message)
            for o in outcomes],
            ask_again=[o for o in outcomes if o.ask_again], document=self.approver.last_read))
        for outcome in outcomes:
            if outcome.approved:
                self.monitor.note_approved(outcome.event_id)
        self.monitor.poll_now()

    def on_approval_done(self, message: ApprovalDone) -> None:
        asking = {outcome.event_id for outcome in message.ask_again}
        for note in message.notes:
            self.session.note_approval(note)
            if not message.announce or note.event_id in asking:
                continue
            if note.approved:
                said = note.message.removeprefix("approved: ")
                text = (f"{said[:1].upper()}{said[1:]}. Azure may start it now, for every VM "
                        "it lists.")
                self.notify(safe(text, 300), title="Approved", timeout=8, markup=False)
            elif note.unknown:  # the title says it: the message need not say it twice
                said = note.message.removeprefix("outcome unknown: ")
                self.notify(safe(said, 300), title="Outcome unknown", severity="warning",
                            timeout=15, markup=False)
            else:
                self.notify(safe(note.message, 300), title="Not approved", severity="error",
                            timeout=15, markup=False)
        self._refresh()
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

    async def action_quit(self) -> None:
        """``q`` (and Ctrl+C, Ctrl+Q): quit, asking first while an approval is in flight,
        and saying on exit what became of it. In the dialog, Ctrl+C (and q) answer no:
        the dialog closes and nothing quits."""
        if isinstance(self.screen, ConfirmationModal):
            self.screen.action_cancel()
            return
        if any(isinstance(s, ConfirmationModal) for s in self.screen_stack):
            return  # a dialog is up under another screen: it answers first
        if not self.in_flight():
            self.exit()
            return
        now = self.now()
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
        self._push_dialog(ConfirmationModal(
            Prompt("An approval is in flight. Quit anyway?", body), yes="quit",
            no="stay", guard=self.confirm_guard, mono=self._mono), self._quit_confirmed)

    def _quit_confirmed(self, yes: bool | None) -> None:
        if not yes:
            return
        now = self.now()
        what = ("the agent carries it on and records its outcome" if
                self.approver.outlives_front_end else "a request under way may or may not "
                "have reached the service; the audit log records what is known of it "
                "(unknown if a try may have arrived)")
        lines = [f"setui quit while approving {printable(n.event_id, 80)} "
                 f"({printable(n.in_flight(now), 120)}): {what}. `setui events` shows "
                 "whether it started; `setui audit` what was recorded."
                 for n in self.in_flight()]
        self.exit(message="\n".join(lines) or None)
