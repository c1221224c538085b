"""Approvals through the agent, for a front end attached to it: the Approver's interface
(refusal, claim, record_cancel, record_refusal, approve), the agent doing the work.

The agent runs the one :class:`~setui.approval.approver.Approver` itself, as the identity the
kernel gives (never one this process names), bound to the snapshots the operator
confirmed here; this side asks the same questions before it sends (the rule is
:func:`setui.approval.snapshot.refusal`, shared), shows the progress the agent streams, and says
what it knows of the outcome. A connection lost while an approval was in flight, or an
agent that failed in the middle of one, is an outcome unknown: the agent goes on (or
recorded how far it got), and its audit log says what became of it:
:meth:`AgentApprover.look_up` asks it, for a front end that stays (the dashboard, once the
agent is back). Each approval goes on a connection of its own (it may take a minute or
two; the front end's reads go on meanwhile). Nothing here writes a store or posts to IMDS
(the API's client-side contract holds for this module too).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TypeVar

from setui.api.client import AgentClient, ApiError, ConnectionLost, NoAgent, Unreadable
from setui.api.protocol import FORBIDDEN, INTERNAL
from setui.approval.outcome import ApprovalOutcome, Progress
from setui.approval.snapshot import NO_DOCUMENT, READ_ONLY, Confirmed, confirmed, refusal, with_left
from setui.core.clock import utc_now
from setui.core.textsafe import printable
from setui.store.records import APPROVE_ATTEMPT, APPROVE_OUTCOME, APPROVED, UNKNOWN

if TYPE_CHECKING:
    from setui.api.codec import Hello
    from setui.core.model import Document
    from setui.store.records import AuditRecord, Claim, StoryEntry

__all__ = ["ASK_THE_AGENT", "LOOK_BACK", "AgentApprover", "InDoubt"]

_T = TypeVar("_T")

# Where an outcome the front end could not hear is found.
ASK_THE_AGENT = "ask the agent: `setui audit` shows what became of it"

LOOK_BACK = 1000  # audit records read, newest first, to find what became of an approval
# How far before the approval was sent its attempt record may be stamped (the agent's
# clock against this process's).
_SKEW = timedelta(minutes=2)


@dataclass(frozen=True)
class InDoubt:
    """An approval sent to the agent whose answer was lost: what to look up."""

    event_id: str
    sent: datetime  # this process's clock, just before the request left
    pid: int  # the process the agent saw (the kernel's word in the attempt's record)


def _outcome(event_id: str, message: str, *, approved: bool = False, unknown: bool = False,
             status: int | None = None, record_seq: int | None = None) -> ApprovalOutcome:
    return ApprovalOutcome(event_id, approved=approved, refused=False, status=status,
                           message=message, latency=None, record_seq=record_seq,
                           unknown=unknown)


def _refused(event_ids: Sequence[str], reason: str) -> list[ApprovalOutcome]:
    return [ApprovalOutcome(i, approved=False, refused=True, status=None,
                            message=f"refused: {reason}", latency=None, record_seq=None)
            for i in event_ids]


def _unknown(event_ids: Sequence[str], why: str) -> list[ApprovalOutcome]:
    return [ApprovalOutcome(i, approved=False, refused=False, status=None,
                            message=f"outcome unknown: {why}; {ASK_THE_AGENT}",
                            latency=None, record_seq=None, unknown=True)
            for i in event_ids]


class AgentApprover:
    """The Approver's interface over the agent's API (see the module doc)."""

    audit_log = None  # the agent keeps the audit log: nothing is written here
    outlives_front_end = True  # the agent carries an approval on when the front end quits

    def __init__(self, client: AgentClient, *, read_only: bool = False,
                 vm_name: str | None = None, hello: Callable[[], Hello] | None = None,
                 wall: Callable[[], datetime] = utc_now) -> None:
        self.client = client
        self.read_only = read_only
        self.vm_name = vm_name  # the agent's name for this VM, by default
        self.endpoint = client.hello.agent.endpoint
        self.store_error: str | None = None  # why a dismissal was not recorded
        self.last_read: Document | None = None  # the agent's document after an approval
        # Interrupted while a request was with the agent: it goes on with it.
        self.abandoned = False
        self.in_doubt: list[InDoubt] = []  # sent, and the answer lost: see look_up
        # The agent's newest hello (a front end that stays hears it again on reconnecting).
        self._hello = hello or (lambda: self.client.hello)
        self._told_vm_id: str | None = None
        self._wall = wall
        # The record's story of an event (the agent's, Record.event_story): a refusal of
        # an event that left the document says when and how it left.
        self.story: Callable[[str], Sequence[StoryEntry]] | None = None

    @property
    def vm_id(self) -> str | None:
        """What the agent keys this VM's claims by, as it last said (it may learn it
        after it greeted: a ``vm`` push); else what the caller was told."""
        return self._hello().agent.vm_id or self._told_vm_id

    @vm_id.setter
    def vm_id(self, vm_id: str | None) -> None:
        self._told_vm_id = vm_id

    # -- checks ---------------------------------------------------------------------------
    def why_not(self) -> str | None:
        """Why nothing at all can be approved here, or None: read-only, the agent's word
        that this user may not approve, or an agent in a dry run."""
        if self.read_only:
            return READ_ONLY
        hello = self._hello()
        if not hello.you.may_approve:
            return self._not_from(hello.you.user, hello.you.why_not)
        if hello.agent.dry_run:
            return "the agent runs with --dry-run: it posts nothing, for the policy or for a " \
                   "person"
        return None

    @staticmethod
    def _not_from(user: str, why: str | None) -> str:
        """The agent's refusal of who asks, in its words (who may approve, what to do)."""
        return (f"the agent does not take approvals from {printable(user, 64)}: "
                f"{printable(why or 'it does not say why', 400)}")

    def refusal(self, event_id: str, document: Document | None, *,
                allow_other_vms: bool = True) -> str | None:
        """Why the agent would refuse, as far as this side can tell; None when it may go
        ahead. The agent asks again, on its own document, as the kernel says who asks."""
        return self.why_not() or with_left(
            refusal(event_id, document, vm_name=self.vm_name, allow_other_vms=allow_other_vms),
            event_id, document, self.story)

    def claim(self, event_id: str) -> Claim | None:
        """The earlier approval of this event on this VM, if any (blocking: a request)."""
        try:
            return self.client.claim(event_id, self.endpoint, vm_id=self.vm_id)
        except ApiError:
            return None  # cannot tell here; the agent checks again as it approves

    # -- records --------------------------------------------------------------------------
    def record_refusal(self, event_ids: Sequence[str], document: Document | None,
                       reason: str, **_: object) -> list[ApprovalOutcome]:
        """A refusal made here, before anything was sent: the agent records the refusals
        it makes itself, not this side's (there is no request that would only record)."""
        return _refused(event_ids, reason)

    def record_cancel(self, event_ids: Sequence[str], document: Document | None) -> bool:
        """Tell the agent the operator said no (its audit record ``dismissed``); True if
        it recorded it."""
        if not event_ids or self.read_only:
            return False
        try:
            return self.client.dismiss(list(event_ids))
        except ApiError as exc:
            self.store_error = exc.message
            return False

    # -- the approval ---------------------------------------------------------------------
    async def approve(self, event_ids: Sequence[str], document: Document | None, *,
                      confirmed_as: Mapping[str, Confirmed] | None = None,
                      allow_other_vms: bool = False, again: bool = False,
                      progress: Callable[[Progress], None] | None = None,
                      ) -> list[ApprovalOutcome]:
        """Send the approval to the agent, bound to what the operator confirmed (default:
        the events as in ``document``); ``progress`` hears of each failed try, on this
        event loop (a dashboard redraws the row from it), before the outcome. The agent
        records every refusal it makes, a refusal of who asks included."""
        ids = list(dict.fromkeys(event_ids))
        if self.read_only:
            return _refused(ids, READ_ONLY)
        if document is None:  # the agent could not be read: nothing to confirm, or send
            return _refused(ids, NO_DOCUMENT)
        shown = {i: (confirmed_as or {}).get(i) or self._shown(document, i) for i in ids}
        loop = asyncio.get_running_loop()

        def heard(update: Progress) -> None:  # on the thread that reads the answer
            if progress is not None:
                with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits
                    loop.call_soon_threadsafe(progress, update)

        sent = self._wall()
        try:
            outcomes = await self._in_thread(lambda: self._send(
                ids, shown, allow_other_vms=allow_other_vms, again=again, progress=heard))
        except NoAgent as exc:  # nothing left this process
            return [_outcome(i, f"not approved: the agent cannot be reached ({exc.message}); "
                                "nothing was sent") for i in ids]
        except ConnectionLost as exc:  # an answer unreadable is one lost: sent, or not
            self.in_doubt += [InDoubt(i, sent, os.getpid()) for i in ids]
            what = ("the agent's answer could not be read" if isinstance(exc, Unreadable)
                    else "the connection to the agent was lost")
            return _unknown(ids, f"{what} while it approved ({exc.message})")
        except ApiError as exc:
            if exc.code == INTERNAL:  # it failed somewhere in the approval
                self.in_doubt += [InDoubt(i, sent, os.getpid()) for i in ids]
                return _unknown(ids, f"the agent failed while it approved ({exc.message})")
            if exc.code == FORBIDDEN:  # who may approve, as the agent has it: said once
                return _refused(ids, f"{self._not_from(self._hello().you.user, exc.message)}"
                                     "; nothing was sent")
            return _refused(ids, f"the agent refused: {exc.message}; nothing was sent")
        if any(o.ask_again for o in outcomes):  # what to ask again about: the agent's now
            try:
                self.last_read = self.client.state()[0].state.document
            except ApiError:
                self.last_read = None
        return outcomes

    def _send(self, ids: list[str], shown: Mapping[str, Confirmed], *, allow_other_vms: bool,
              again: bool, progress: Callable[[Progress], None],
              ) -> list[ApprovalOutcome]:
        """On a connection of its own: the request, its progress and its answer."""
        with self.client.another() as client:
            return client.approve(ids, shown, allow_other_vms=allow_other_vms, again=again,
                                  progress=progress)

    @staticmethod
    def _shown(document: Document, event_id: str) -> Confirmed:
        """The event as ``document`` has it; an id not in it is sent as the id alone, which
        no event the agent has matches (it refuses it, and records that)."""
        return confirmed(document, event_id) or Confirmed(event_id, {"EventId": event_id},
                                                          document.incarnation)

    async def _in_thread(self, ask: Callable[[], _T]) -> _T:
        """``ask()`` on a daemon thread of its own, so that a command interrupted while
        the agent approves ends at once rather than wait for an answer it no longer
        needs: the agent goes on with what it was asked (``abandoned`` says so)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[_T] = loop.create_future()

        def settle(result: _T | None, error: BaseException | None) -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)  # type: ignore[arg-type]

        def run() -> None:
            try:
                result, error = ask(), None
            except BaseException as exc:  # handed to the waiting coroutine
                result, error = None, exc
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits
                loop.call_soon_threadsafe(settle, result, error)

        threading.Thread(target=run, daemon=True, name="setui-agent-request").start()
        try:
            return await future
        except asyncio.CancelledError:
            self.abandoned = True
            raise

    # -- after the agent came back --------------------------------------------------------
    def look_up(self) -> list[ApprovalOutcome]:
        """What the agent's audit log says became of the approvals whose answer was lost;
        those it cannot tell yet stay in doubt. Blocking: call it on a thread."""
        if not self.in_doubt:
            return []
        try:
            records = self.client.audit(limit=LOOK_BACK)
        except ApiError:
            return []  # asked again at the next reconnection
        told: list[ApprovalOutcome] = []
        for doubt in list(self.in_doubt):
            outcome = _what_became(doubt, records)
            if outcome is not None:
                told.append(outcome)
                self.in_doubt.remove(doubt)
        return told


def _what_became(doubt: InDoubt, records: Sequence[AuditRecord]) -> ApprovalOutcome | None:
    """The outcome the log (newest first) tells of one lost approval; None when the log
    read does not reach back to it, so it cannot tell."""
    wanted = doubt.event_id.casefold()
    since = doubt.sent - _SKEW

    def ours(record: AuditRecord) -> bool:
        api = record.details.get("api") if isinstance(record.details, dict) else None
        return (record.event_id or "").casefold() == wanted and record.time >= since \
            and isinstance(api, dict) and api.get("pid") == doubt.pid

    attempt = next((r for r in records if r.action == APPROVE_ATTEMPT and ours(r)), None)
    if attempt is None:
        if len(records) >= LOOK_BACK and records[-1].time >= since:
            return None  # the page read may not reach back to it
        return _outcome(doubt.event_id, "not approved: the agent's audit log has no attempt "
                        "from this front end, so nothing was sent")
    outcome = next((r for r in records if r.action == APPROVE_OUTCOME
                    and r.attempt_seq == attempt.seq), None)
    if outcome is None:
        return _outcome(doubt.event_id, "outcome unknown: the agent recorded the attempt "
                        f"(record {attempt.seq}) and no outcome: it stopped after it sent or "
                        "while it sent; `setui events` shows whether the event started",
                        unknown=True, record_seq=attempt.seq)
    result = outcome.result
    if result == APPROVED:
        return _outcome(doubt.event_id, f"approved: HTTP {outcome.status} (the agent's audit "
                        f"log, record {outcome.seq})", approved=True, status=outcome.status,
                        record_seq=outcome.seq)
    words = outcome.error or (f"HTTP {outcome.status}" if outcome.status else "no reason")
    if result == UNKNOWN:
        return _outcome(doubt.event_id, f"outcome unknown: {words} (the agent's audit log, "
                        f"record {outcome.seq})", unknown=True, record_seq=outcome.seq)
    return _outcome(doubt.event_id, f"not approved: {words} (the agent's audit log, record "
                    f"{outcome.seq})", status=outcome.status, record_seq=outcome.seq)
