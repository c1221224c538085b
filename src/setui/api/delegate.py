"""Approvals made by the agent for a front end attached to it, behind the approver's face.

:class:`AgentApprover` answers what the dashboard asks of an
:class:`~setui.approval.Approver` (``refusal``, ``record_refusal``, ``record_cancel``,
``approve``, ``last_read``, ``vm_name``), so the dashboard's approving half does not know
which one it has. The approval itself runs in the agent, through its one Approver, bound
to the snapshot the operator confirmed and as the identity the kernel gives this process
(the agent reads the document again before the POST, and before each retry); each failed
try comes back as progress, on the caller's loop.

This side writes nothing. Before the dialog it refuses what the agent would refuse anyway
(read-only, a user the agent said may not approve, an agent in a dry run, an event it
cannot approve at all: snapshot.not_approvable), and such a refusal is said, not
recorded: nothing was asked of the agent. A "no" in the dialog is the agent's ``dismiss``.
An approval whose answer was lost (the agent went, or the connection broke, after the
request left) is "outcome unknown: ask the agent", neither approved nor failed;
:meth:`AgentApprover.look_up` asks the agent's audit log later what became of it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from setui.api.client import CONNECT_TIMEOUT, AgentClient, ApiError
from setui.api.codec import Hello
from setui.api.peer import DEFAULT_GROUP
from setui.api.protocol import INTERNAL
from setui.core.clock import utc_now
from setui.core.model import Document
from setui.outcome import ApprovalOutcome, Progress
from setui.snapshot import Confirmed, confirmed, not_approvable
from setui.store.records import APPROVE_ATTEMPT, APPROVE_OUTCOME, APPROVED, UNKNOWN, AuditRecord

__all__ = ["LOOK_BACK", "AgentApprover", "InDoubt"]

LOOK_BACK = 1000  # audit records read, newest first, to find what became of an approval
# How far before the approval was sent its attempt record may be stamped (the agent's
# clock against this process's).
_SKEW = timedelta(minutes=2)

Connect = Callable[[Path], AgentClient]


def _connect(path: Path) -> AgentClient:
    return AgentClient.connect(path, timeout=CONNECT_TIMEOUT)


@dataclass(frozen=True)
class InDoubt:
    """An approval sent to the agent whose answer was lost: what to look up."""

    event_id: str
    sent: datetime  # this process's clock, just before the request left
    pid: int  # the process the agent saw (the kernel's word in the attempt's record)


def _outcome(event_id: str, message: str, *, approved: bool = False, refused: bool = False,
             unknown: bool = False, status: int | None = None,
             record_seq: int | None = None) -> ApprovalOutcome:
    return ApprovalOutcome(event_id, approved=approved, refused=refused, status=status,
                           message=message, latency=None, record_seq=record_seq,
                           unknown=unknown)


class AgentApprover:
    """Approvals sent to the agent at ``path`` (see the module doc)."""

    outlives_front_end = True  # the agent carries an approval on when the front end quits

    def __init__(self, path: Path, hello: Callable[[], Hello], *, read_only: bool = False,
                 connect: Connect = _connect, wall: Callable[[], datetime] = utc_now) -> None:
        self.path = path
        self.hello = hello  # the agent's latest hello: who this process is, to it
        self.read_only = read_only
        self.vm_name: str | None = None  # set by the dashboard; the agent knows its own
        self.last_read: Document | None = None  # the agent reads the document, not this side
        self.store_error: str | None = None  # why the last dismissal was not recorded
        self.in_doubt: list[InDoubt] = []
        self._connect = connect
        self._wall = wall

    # -- before the dialog ----------------------------------------------------------------
    def why_not(self) -> str | None:
        """Why nothing can be approved here at all, or None: read-only, the agent's word
        that this user may not approve, or an agent in a dry run."""
        if self.read_only:
            return "setui runs read-only (--read-only): it approves nothing"
        hello = self.hello()
        if not hello.you.may_approve:
            why = (hello.you.why_not or "it gives no reason").rstrip(".")
            return (f"the agent says you may not approve: {why}. Root may, and the members "
                    f"of group {DEFAULT_GROUP} unless the agent's config names its approvers")
        if hello.agent.dry_run:
            return "the agent runs with --dry-run: it approves nothing, for anyone"
        return None

    def refusal(self, event_id: str, document: Document | None, *,
                allow_other_vms: bool = True) -> str | None:
        """Why approving ``event_id`` would be refused (the agent asks again, and also
        whether the event reaches other VMs: the dialog asks the operator that)."""
        del allow_other_vms
        return self.why_not() or not_approvable(document, event_id)

    def record_refusal(self, event_ids: Sequence[str], document: Document | None,
                       reason: str, **_: object) -> list[ApprovalOutcome]:
        """Refused here, before the agent was asked: said, and not recorded (this side
        writes nothing, and the agent was asked nothing)."""
        del document
        return [_outcome(i, f"refused: {reason}", refused=True) for i in event_ids]

    def record_cancel(self, event_ids: Sequence[str], document: Document | None) -> bool:
        """The operator said no: the agent records it (``dismiss``). Blocking."""
        del document
        try:
            with self._connect(self.path) as client:
                return client.dismiss(event_ids)
        except ApiError as exc:
            self.store_error = exc.message
            return False

    # -- the approval ---------------------------------------------------------------------
    async def approve(self, event_ids: Sequence[str], document: Document | None, *,
                      confirmed_as: Mapping[str, Confirmed] | None = None,
                      allow_other_vms: bool = False, again: bool = False,
                      progress: Callable[[Progress], None] | None = None,
                      ) -> list[ApprovalOutcome]:
        """Ask the agent to approve, bound to what was confirmed (default: the events as
        in ``document``); ``progress`` hears of each failed try, on this loop."""
        ids = list(dict.fromkeys(event_ids))
        seen: dict[str, Confirmed] = {}
        refused: dict[str, ApprovalOutcome] = {}
        for event_id in ids:
            bound = (confirmed_as or {}).get(event_id) or (
                confirmed(document, event_id) if document is not None else None)
            if bound is None:
                refused[event_id] = _outcome(event_id, "refused: "
                                             + (not_approvable(document, event_id)
                                                or "nothing was confirmed"), refused=True)
            else:
                seen[event_id] = bound
        if not seen:
            return [refused[i] for i in ids]
        loop = asyncio.get_running_loop()

        def heard(update: Progress) -> None:
            if progress is not None:
                loop.call_soon_threadsafe(progress, update)

        outcomes = await asyncio.to_thread(self._send, list(seen), seen, allow_other_vms,
                                           again, heard)
        found = {o.event_id: o for o in outcomes}
        return [refused.get(i) or found.get(i) or _outcome(
            i, "outcome unknown: the agent's answer did not name it; ask the agent",
            unknown=True) for i in ids]

    def _send(self, ids: list[str], seen: Mapping[str, Confirmed], allow_other_vms: bool,
              again: bool, heard: Callable[[Progress], None]) -> list[ApprovalOutcome]:
        """On a thread: a connection of its own (an approval may take 70 s), the request,
        its progress and its answer."""
        try:
            client = self._connect(self.path)
        except ApiError as exc:  # nothing left this process
            return [_outcome(i, f"not approved: the agent cannot be reached ({exc.message}); "
                                "nothing was sent") for i in ids]
        sent = self._wall()
        try:
            with client:
                return client.approve(ids, seen, allow_other_vms=allow_other_vms,
                                      again=again, progress=heard)
        except ApiError as exc:
            if exc.answered and exc.code != INTERNAL:  # the agent said no, and did nothing
                return [_outcome(i, f"refused by the agent: {exc.message}", refused=True)
                        for i in ids]
            self.in_doubt += [InDoubt(i, sent, os.getpid()) for i in ids]
            return [_outcome(i, f"outcome unknown: ask the agent (the answer was lost: "
                                f"{exc.message.rstrip('.')})", unknown=True) for i in ids]

    # -- after the agent came back --------------------------------------------------------
    def look_up(self) -> list[ApprovalOutcome]:
        """What the agent's audit log says became of the approvals whose answer was lost;
        those it cannot tell yet stay in doubt. Blocking: call it on a thread."""
        if not self.in_doubt:
            return []
        try:
            with self._connect(self.path) as client:
                records, _, _ = client.audit(limit=LOOK_BACK)
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
                        "from this dashboard, so nothing was sent")
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
