"""The one path to an approval, for ``setui approve``, the dashboard and the agent alike.

Approving starts maintenance, for every VM in the event's Resources: it is setui's one
destructive action. So the order is fixed: refuse what must not be approved (and record
the refusal), commit an attempt record to the audit log, and only then POST; afterwards
append the outcome. If the attempt cannot be committed, nothing is sent.

What is approved is what the operator was shown: the confirmation binds to a snapshot of
the event (:class:`Confirmed`), and every send is held against it, the first and each
retry alike: just before it the document is read once more (a real GET), and an event
that changed, started, left or is no longer alone under its EventId is not sent for,
with what changed field by field (:func:`setui.approval.snapshot.difference`, the one home of
that rule). Before the first send that is a refusal; before a retry it ends the tries, and
the outcome says how (``details.ending``). The attempt record is appended only if no
earlier approval of the event (by any process on this VM) claims it, in the same
transaction (store.claims): this VM is its vmId once known (``vm_id``, which every record
carries), else the endpoint (store.vmkeys). While the service fails, the POST is tried
again as the service asks (:meth:`ImdsClient.approval_retry`) for up to 70 s, never past
NotBefore.

What an approval came to is told as far as it is known (setui.approval.tries): approved,
failed, or unknown when a try may have arrived and no answer says what became of it
(a timeout, a connection lost after the request left, an interruption mid-request). An
unknown approval keeps its claim: nothing is sent for it again without ``again``.

:meth:`Approver.check` makes every check made before the first send, and writes and
sends nothing: a dry run.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from setui.approval.outcome import HELD, ApprovalOutcome, Progress
from setui.approval.snapshot import (
    READ_ONLY,
    Confirmed,
    Difference,
    confirmed,
    difference,
    find_event,
    refusal,
    with_left,
)
from setui.approval.tries import Tries, unread
from setui.core.backoff import APPROVAL_DEADLINE
from setui.core.clock import utc_now
from setui.core.errors import BadDocument, ImdsError
from setui.core.model import Document, parse_not_before
from setui.store import (
    APPROVE_ATTEMPT,
    APPROVE_OUTCOME,
    APPROVED,
    DISMISSED,
    FAILED,
    REFUSED,
    UNKNOWN,
    AuditEntry,
    StoreError,
    event_snapshot,
)
from setui.store.audit import AuditLog
from setui.store.claims import AlreadyClaimed, Claim
from setui.store.vmkeys import with_vm_id
from setui.system.identity import Identity

if TYPE_CHECKING:
    from setui.core.client import ImdsClient
    from setui.store.records import StoryEntry

__all__ = ["ApprovalCheck", "Approver"]


@dataclass(frozen=True)
class ApprovalCheck:
    """What the checks before a send say of one EventId: ``reason`` None, it may go."""

    event_id: str
    reason: str | None
    seen: Confirmed | None = None  # the snapshot it is held against: what would be approved
    changes: tuple[str, ...] = ()  # what changed since, field by field
    document: Document | None = None  # the document it was judged by


@dataclass(frozen=True)
class _End:
    """How the tries of an approval ended (its ``details.ending``), why the last try was
    the last in words ("" when its own failure says it all), and the events whose
    difference ended them."""

    ending: str
    why: str = ""
    differs: Mapping[str, Difference] = field(default_factory=dict)


def _ms(seconds: float | None) -> str:
    return "" if seconds is None else f" in {seconds * 1000:.0f} ms"


class Approver:
    """Checks, records and posts approvals; see the module docstring for the order."""

    # An approval under way ends with the process that runs it (a front end attached to
    # the agent has one that does not: api.approving).
    outlives_front_end = False

    def __init__(self, client: ImdsClient, audit_log: AuditLog | None, *, endpoint: str,
                 identity: Identity | None = None, read_only: bool = False,
                 store_problem: str | None = None, vm_name: str | None = None,
                 vm_id: str | None = None, wall: Callable[[], datetime] = utc_now,
                 details: dict[str, Any] | None = None, consent: str | None = None,
                 deadline: float = APPROVAL_DEADLINE) -> None:
        self.client = client
        self.audit_log = audit_log
        self.endpoint = endpoint
        self.identity = identity or Identity.current()
        self.read_only = read_only
        self.store_problem = store_problem
        self.vm_name = vm_name  # this VM's name in Resources, once known
        self.vm_id = vm_id  # this VM's vmId, once known: what its claims are keyed by
        self.wall = wall
        # Carried by every record this approver writes (the agent's rule and hook outcomes).
        self.details = dict(details or {})
        # What accepts an event that reaches other VMs, in the words of whoever approves
        # (the agent: its rule's key); None: the command line's --allow-other-vms.
        self.consent = consent
        # The last failure to write the audit log, for callers that show or act on it.
        self.store_error: str | None = None
        # The document read just before the last send (or refusal): what an operator
        # asked again is shown.
        self.last_read: Document | None = None
        self.deadline = deadline  # seconds an approval is tried for, from its first try
        # The record's story of an event (Record.event_story), when there is one: a
        # refusal of an event that left the document says when and how it left.
        self.story: Callable[[str], Sequence[StoryEntry]] | None = None

    # -- checks ---------------------------------------------------------------------------
    def refusal(self, event_id: str, document: Document | None, *,
                allow_other_vms: bool = True) -> str | None:
        """Why approving ``event_id`` now would be refused, or None when it may go ahead.
        ``allow_other_vms=False``: an event reaching beyond this VM is refused too."""
        if self.read_only:
            return READ_ONLY
        if self.audit_log is None or self.audit_log.readonly:
            problem = self.store_problem or (
                "no audit log is open" if self.audit_log is None else "it was opened read-only")
            return (f"the audit log cannot be written ({problem.rstrip('.')}); setui "
                    "approves nothing it cannot record")
        return with_left(refusal(event_id, document, vm_name=self.vm_name,
                                 allow_other_vms=allow_other_vms, consent=self.consent),
                         event_id, document, self.story)

    # -- records --------------------------------------------------------------------------
    def _entry(self, action: str, event_id: str, document: Document | None, *,
               snapshot: Mapping[str, Any] | None = None, incarnation: int | None = None,
               **fields: Any) -> AuditEntry:
        """A record of ``event_id``: the snapshot confirmed (default: the event as in
        ``document``) and its incarnation."""
        event = find_event(document, event_id)
        if snapshot is None and event is not None:
            snapshot = event_snapshot(event)
        details: dict[str, Any] = {**self.details, **fields.pop("details", {})}
        details.update(self.identity.details())
        details = with_vm_id(details, self.vm_id)
        return AuditEntry(
            action=action, time=self.wall(), user=self.identity.user,
            host=self.identity.host, ssh_client=self.identity.ssh_client,
            endpoint=self.endpoint,
            event_id=str(snapshot["EventId"]) if snapshot else event_id,
            event=snapshot, incarnation=incarnation if incarnation is not None else (
                document.incarnation if document is not None else None),
            details=details, **fields)

    def record_refusal(self, event_ids: Sequence[str], document: Document | None,
                       reason: str, *, ask_again: bool = False, changes: Sequence[str] = (),
                       seen: Confirmed | None = None) -> list[ApprovalOutcome]:
        """Record that setui refused these approvals (when the log can be written);
        ``seen``: the snapshot the operator confirmed, which the record holds."""
        seqs: list[int | None] = [None] * len(event_ids)
        fields: dict[str, Any] = {} if seen is None else {
            "snapshot": seen.snapshot, "incarnation": seen.incarnation}
        if self.audit_log is not None and not self.audit_log.readonly:
            try:
                records = self.audit_log.extend(
                    [self._entry(REFUSED, i, document, error=reason, **fields)
                     for i in event_ids])
                seqs = [r.seq for r in records]
            except StoreError as exc:
                self.store_error = str(exc)  # the refusal stands; it is just not written
        return [ApprovalOutcome(i, approved=False, refused=True, status=None,
                                message=f"refused: {reason}", latency=None, record_seq=seq,
                                ask_again=ask_again, changes=tuple(changes))
                for i, seq in zip(event_ids, seqs, strict=True)]

    def record_cancel(self, event_ids: Sequence[str], document: Document | None) -> bool:
        """Record that the operator said no; True if it was written (nothing else depends
        on it: nothing was sent)."""
        if not event_ids or self.audit_log is None or self.audit_log.readonly:
            return False
        try:
            self.audit_log.extend([self._entry(DISMISSED, i, document) for i in event_ids])
        except StoreError as exc:
            self.store_error = str(exc)
            return False
        return True

    def claim(self, event_id: str) -> Claim | None:
        """The earlier approval of this event on this VM, if any (blocking: SQLite)."""
        if self.audit_log is None:
            return None
        try:
            return self.audit_log.claim(event_id, self.endpoint, vm_id=self.vm_id)
        except StoreError:
            return None  # cannot tell here; the approval itself checks again, or refuses

    # -- the checks before a send ----------------------------------------------------------
    async def check(self, event_ids: Sequence[str], document: Document | None, *,
                    confirmed_as: Mapping[str, Confirmed] | None = None,
                    allow_other_vms: bool = False) -> list[ApprovalCheck]:
        """What :meth:`approve` would decide about each id now, writing and sending
        nothing (a dry run): the refusals, the document read once more, each event held
        against what was confirmed, and the store's own check. Whether an earlier
        approval claims the event is settled only as the attempt is written; :meth:`claim`
        tells of one."""
        verdicts, damaged = await self._judge(list(dict.fromkeys(event_ids)), document,
                                              confirmed_as, allow_other_vms)
        if damaged is None:
            return verdicts
        return [v if v.reason is not None else replace(v, reason=damaged) for v in verdicts]

    async def _judge(self, ids: list[str], document: Document | None,
                     confirmed_as: Mapping[str, Confirmed] | None, allow_other_vms: bool,
                     ) -> tuple[list[ApprovalCheck], str | None]:
        """Each id's verdict, and why the store may take no approval (None: it may)."""
        verdicts: dict[str, ApprovalCheck] = {}
        going: list[str] = []
        resolved: set[str] = set()
        for event_id in ids:
            reason = self.refusal(event_id, document, allow_other_vms=allow_other_vms)
            if reason is None:
                event = find_event(document, event_id)
                assert event is not None
                if event.event_id in resolved:  # the same event, spelt in another case
                    reason = f"event {event.event_id} is already in this approval"
                else:
                    resolved.add(event.event_id)
                    going.append(event_id)
                    continue
            verdicts[event_id] = ApprovalCheck(event_id, reason, document=document)
        damaged: str | None = None
        if going:
            assert document is not None and self.audit_log is not None
            # The store's check (on a thread) while the document is read again: both stand
            # between the operator's key and the POST, neither needs the other.
            # Handed to the executor now, not a loop turn later as to_thread would.
            checking = asyncio.get_running_loop().run_in_executor(
                None, self.audit_log.approval_integrity)
            try:
                latest, problem = await self._reread()
            finally:
                damaged = await checking
            for event_id in going:
                seen = (confirmed_as or {}).get(event_id) or confirmed(document, event_id)
                assert seen is not None
                if latest is None:
                    verdicts[event_id] = ApprovalCheck(
                        event_id, f"{unread(problem)}, so nothing was sent", seen,
                        document=document)
                    continue
                differs = self._difference(seen, latest, allow_other_vms)
                verdicts[event_id] = ApprovalCheck(event_id, None, seen, document=latest) \
                    if differs is None else ApprovalCheck(event_id, differs.reason, seen,
                                                          differs.changes, latest)
        return [verdicts[i] for i in ids], damaged

    def _difference(self, seen: Confirmed, latest: Document,
                    allow_other_vms: bool) -> Difference | None:
        """Why ``seen`` may not be sent for as ``latest`` has it, in this approver's
        words for the consent an event beyond this VM needs."""
        return difference(seen, latest, vm_name=self.vm_name,
                          allow_other_vms=allow_other_vms, consent=self.consent)

    async def _reread(self) -> tuple[Document | None, ImdsError | None]:
        """The document as the service has it now: one GET, never a cached 304; or why
        it could not be read."""
        forget = getattr(self.client, "forget_etag", None)
        if forget is not None:
            forget()
        try:
            document = (await self.client.fetch()).document
        except ImdsError as exc:
            return None, exc
        if document is None:
            return None, BadDocument("the service answered without a document")
        self.last_read = document
        return document, None

    # -- the approval ---------------------------------------------------------------------
    async def approve(self, event_ids: Sequence[str], document: Document | None, *,
                      confirmed_as: Mapping[str, Confirmed] | None = None,
                      allow_other_vms: bool = False, again: bool = False,
                      progress: Callable[[Progress], None] | None = None,
                      ) -> list[ApprovalOutcome]:
        """Check (as :meth:`check`), record, POST once for all that may go, check again
        before each retry, record the outcomes.

        ``allow_other_vms``: the operator explicitly accepted that the event reaches
        beyond this VM (typed "yes", or --allow-other-vms); otherwise such an event is
        refused. ``confirmed_as``: the snapshots the operator confirmed (default: the
        events as in ``document``). ``again``: approve even what an earlier approval
        claims. ``progress`` hears of each failed try before the wait for the next.
        """
        ids = list(dict.fromkeys(event_ids))
        verdicts, damaged = await self._judge(ids, document, confirmed_as, allow_other_vms)
        results: dict[str, ApprovalOutcome] = {}
        ready: dict[str, Confirmed] = {}
        for verdict in verdicts:
            if verdict.reason is None:
                assert verdict.seen is not None
                ready[verdict.event_id] = verdict.seen
                continue
            # On a thread: SQLite may wait for another writer, and the caller's loop
            # (the dashboard's) must not.
            results[verdict.event_id] = (await asyncio.to_thread(partial(
                self.record_refusal, [verdict.event_id], verdict.document, verdict.reason,
                ask_again=bool(verdict.changes), changes=verdict.changes,
                seen=verdict.seen)))[0]
        if ready:
            assert self.audit_log is not None
            for outcome in await self._post(ready, self.audit_log, again, allow_other_vms,
                                            progress, damaged):
                results[outcome.event_id] = outcome
        return [results[i] for i in ids]

    async def _post(self, ready: Mapping[str, Confirmed], log: AuditLog, again: bool,
                    allow_other_vms: bool, progress: Callable[[Progress], None] | None,
                    damaged: str | None) -> list[ApprovalOutcome]:
        """``damaged``: why the store may take no approval (its check, just made), or None."""
        ids = list(ready)
        wire_ids = [ready[i].event_id for i in ids]
        incarnation = min(c.incarnation for c in ready.values())
        batch = {"api_version": getattr(self.client, "api_version", None),
                 "event_ids": wire_ids, "confirmed_incarnation": incarnation,
                 **({"again": True} if again else {})}
        entries = [self._entry(APPROVE_ATTEMPT, i, None, snapshot=ready[i].snapshot,
                               incarnation=ready[i].incarnation, details=batch) for i in ids]
        # A damaged or altered store refuses before anything is written or sent.
        if damaged is not None:
            return [ApprovalOutcome(i, False, True, None, f"refused: {damaged}", None, None)
                    for i in ids]
        try:
            if again:
                attempts = await asyncio.to_thread(log.extend, entries)
            else:
                attempts = await asyncio.to_thread(partial(
                    log.extend_claiming, entries, wire_ids, self.endpoint, vm_id=self.vm_id))
        except AlreadyClaimed as exc:
            return [self._claimed(i, ready[i], exc) for i in ids]
        except StoreError as exc:
            self.store_error = str(exc)
            reason = f"cannot write the audit log, so nothing was sent: {exc}"
            return [ApprovalOutcome(i, False, True, None, f"refused: {reason}", None, None)
                    for i in ids]

        def outcomes(end: _End) -> list[AuditEntry]:
            error, status = tries.told(end.why), tries.recorded_status()
            details = tries.details(end.ending)
            if tries.result() != APPROVED:
                details["kind"] = tries.log[-1].get("kind", "held")
            return [self._entry(APPROVE_OUTCOME, i, None, snapshot=ready[i].snapshot,
                                incarnation=ready[i].incarnation, attempt_seq=attempt.seq,
                                status=status, error=error, latency=tries.latency,
                                details=details)
                    for i, attempt in zip(ids, attempts, strict=True)]

        tries = Tries()
        try:
            end = await self._tries(ready, wire_ids, incarnation, allow_other_vms, progress,
                                    tries)
        except asyncio.CancelledError:
            # Stopped from outside: say in the log what became of it (best effort, on
            # this thread: being cancelled), then let the cancellation go on.
            tries.interrupted()
            stopped = _End("interrupted", f"interrupted after {tries.said()}")
            with contextlib.suppress(StoreError):
                log.extend(outcomes(stopped))
            raise
        try:
            seqs = [o.seq for o in await asyncio.to_thread(log.extend, outcomes(end))]
            note = ""
        except StoreError as exc:
            self.store_error = str(exc)
            seqs = [a.seq for a in attempts]
            note = f" (the outcome could not be added to the audit log: {exc})"
        result = tries.result()
        if result == APPROVED:
            message = f"approved: the service answered HTTP {tries.status}" \
                      f"{_ms(tries.latency)}" + (f", at try {tries.count}"
                                                 if tries.count > 1 else "")
        else:
            told = tries.told(end.why)
            message = (told or "") if result == UNKNOWN else f"not approved: {told}"
        return [ApprovalOutcome(i, result == APPROVED, False, tries.recorded_status(),
                                message + note, tries.latency, seq,
                                ask_again=bool(changes), changes=changes,
                                unknown=result == UNKNOWN)
                for i, seq in zip(ids, seqs, strict=True)
                for changes in [end.differs[i].changes if i in end.differs else ()]]

    async def _tries(self, ready: Mapping[str, Confirmed], wire_ids: list[str],
                     incarnation: int, allow_other_vms: bool,
                     progress: Callable[[Progress], None] | None, tries: Tries) -> _End:
        """Send; while the service asks for another try, wait, check as before the first
        send, and send again. Every failure is an outcome: raises only CancelledError."""
        while True:
            error: ImdsError | None = None
            if tries.count:  # a retry: a new send, checked as the first was
                latest, error = await self._reread()
                if latest is None:
                    tries.held(f"not sent: {unread(error)}")
                else:
                    differs = {i: d for i, seen in ready.items() if (d := self._difference(
                        seen, latest, allow_other_vms)) is not None}
                    if differs:
                        first = next(iter(differs.values()))
                        return _End(first.kind, f"stopped after {tries.said()}: "
                                    f"{first.reason}; nothing more was sent", differs)
            if error is None:
                timeout = min(self.client.timeout, max(self.deadline - tries.elapsed, 0.05))
                tries.sending()
                try:
                    answer = await self.client.approve(wire_ids, incarnation=incarnation,
                                                       timeout=timeout)
                except ImdsError as exc:
                    tries.failed(exc)
                    error = exc
                except Exception as exc:  # a bug or an unexpected library error: recorded
                    tries.failed(exc)
                    return _End(FAILED)
                else:
                    tries.accepted(answer.status, answer.latency)
                    return _End(APPROVED)
            wait = self.client.approval_retry(tries.count, error)
            if wait is None:
                return _End(FAILED if tries.log[-1].get("held") is None else "unverified")
            if tries.elapsed + wait > self.deadline:
                return _End("gave-up", f"gave up after {tries.said()}")
            if progress is not None:
                # A held try sent nothing: the failed read is why, not an answer to a POST.
                held = tries.log[-1].get("held")
                for seen in ready.values():
                    progress(Progress(seen.event_id, tries.count,
                                      held or error.message or str(error), wait,
                                      None if held else error.status,
                                      HELD if held else error.kind))
            if (why := self._past_not_before(ready, wait)) is not None:
                return _End("stopped", f"stopped after {tries.said()}: {why}")
            await asyncio.sleep(wait)

    def _past_not_before(self, ready: Mapping[str, Confirmed], wait: float) -> str | None:
        """Why another try would be pointless: NotBefore passes before it (Azure starts
        the event by itself then)."""
        for seen in ready.values():
            not_before = parse_not_before(str(seen.snapshot.get("NotBefore") or ""))
            if not_before is not None and self.wall() + timedelta(seconds=wait) >= not_before:
                return "its NotBefore passes before the next try: Azure starts it then anyway"
        return None

    def _claimed(self, event_id: str, seen: Confirmed, exc: AlreadyClaimed) -> ApprovalOutcome:
        """An earlier approval claims the event: refused, recorded, and worth asking again."""
        claim = next((c for c in exc.claims if c.event_id.casefold()
                      == seen.event_id.casefold()), exc.claims[0])
        reason = f"{claim.describe()}; nothing was sent"
        entry = self._entry(REFUSED, event_id, None, snapshot=seen.snapshot,
                            incarnation=seen.incarnation, error=reason)
        seq = None
        try:
            assert self.audit_log is not None
            seq = self.audit_log.extend([entry])[0].seq
        except StoreError as problem:
            self.store_error = str(problem)
        return ApprovalOutcome(event_id, False, True, None, f"refused: {reason}", None, seq,
                               ask_again=True)

