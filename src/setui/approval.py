"""The one path to an approval, for ``setui approve`` and the dashboard alike.

Approving starts maintenance, for every VM in the event's Resources: it is setui's one
destructive action. So the order is fixed: refuse what must not be approved (and record
the refusal), commit an attempt record to the audit log, and only then POST; afterwards
append the outcome. If the attempt cannot be committed, nothing is sent.

What is approved is what the operator was shown: the confirmation binds to a snapshot of
the event (:class:`Confirmed`), and the document is read once more just before the POST.
An event that changed, started, left or is no longer alone under its EventId is refused,
with what changed field by field. The attempt record is appended only if no earlier
approval of the event (by any process on this VM) claims it, in the same transaction
(store.claims). While the service fails, the POST is retried only while the event is
still Scheduled, present and before its NotBefore, and each try is reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from setui.core.clock import utc_now
from setui.core.errors import ImdsError
from setui.core.model import Document, parse_not_before
from setui.identity import Identity
from setui.outcome import ApprovalOutcome, Progress
from setui.snapshot import (
    Confirmed,
    changes_between,
    confirmed,
    find_event,
    other_vms,
    repeated,
)
from setui.store import (
    APPROVE_ATTEMPT,
    APPROVE_OUTCOME,
    DISMISSED,
    REFUSED,
    AuditEntry,
    AuditRecord,
    Store,
    StoreError,
    event_snapshot,
)
from setui.store.claims import AlreadyClaimed, Claim
from setui.textsafe import printable

if TYPE_CHECKING:
    from setui.core.client import ImdsClient

# The outcome's values and the snapshot's rules, re-exported: callers import them from here.
__all__ = ["ApprovalOutcome", "Approver", "Confirmed", "Progress", "changes_between",
           "confirmed", "find_event", "other_vms", "repeated"]


def _ms(seconds: float | None) -> str:
    return "" if seconds is None else f" in {seconds * 1000:.0f} ms"


class Approver:
    """Checks, records and posts approvals; see the module docstring for the order."""

    def __init__(self, client: ImdsClient, store: Store | None, *, endpoint: str,
                 identity: Identity | None = None, read_only: bool = False,
                 store_problem: str | None = None, vm_name: str | None = None,
                 wall: Callable[[], datetime] = utc_now,
                 details: dict[str, Any] | None = None, consent: str | None = None) -> None:
        self.client = client
        self.store = store
        self.endpoint = endpoint
        self.identity = identity or Identity.current()
        self.read_only = read_only
        self.store_problem = store_problem
        self.vm_name = vm_name  # this VM's name in Resources, once known
        self.wall = wall
        # Carried by every record this approver writes (the agent's rule and hook outcomes).
        self.details = dict(details or {})
        # What accepts an event that reaches other VMs, in the words of whoever approves
        # (the agent: its rule's key); None: the command line's --allow-other-vms.
        self.consent = consent
        # The last failure to write the audit log, for callers that show or act on it.
        self.store_error: str | None = None
        # The document read just before the last POST (or refusal): what an operator
        # asked again is shown.
        self.last_read: Document | None = None

    # -- checks ---------------------------------------------------------------------------
    def refusal(self, event_id: str, document: Document | None, *,
                allow_other_vms: bool = True) -> str | None:
        """Why approving ``event_id`` now would be refused, or None when it may go ahead.
        ``allow_other_vms=False``: an event reaching beyond this VM is refused too."""
        if self.read_only:
            return "setui runs read-only (--read-only): it approves nothing"
        if self.store is None or self.store.readonly:
            problem = self.store_problem or (
                "no audit log is open" if self.store is None else "it was opened read-only")
            return (f"the audit log cannot be written ({problem.rstrip('.')}); setui "
                    "approves nothing it cannot record")
        if not event_id or not event_id.strip():
            return "an empty EventId cannot be approved"
        if document is None:
            return "there is no current events document to approve against"
        event = find_event(document, event_id)
        if event is None:
            return (f"EventId {event_id} is not in the current document "
                    f"(incarnation {document.incarnation})")
        count = repeated(document, event_id)
        if count > 1:
            return (f"EventId {event.event_id} appears {count} times in the document "
                    f"(incarnation {document.incarnation}): which of them the service would "
                    "start cannot be known, so setui approves none")
        if event.is_started:
            return f"event {event.event_id} ({event.event_type}) has already started"
        if not allow_other_vms:
            beyond = other_vms(event, self.vm_name)
            if beyond is not None:
                if self.consent is not None:
                    return f"{beyond}; approving it needs {self.consent}"
                return (f"{beyond}; --yes alone approves only events of this VM alone "
                        "(add --allow-other-vms to approve it anyway)")
        return None

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
        if self.store is not None and not self.store.readonly:
            try:
                records = self.store.audit_extend(
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
        if not event_ids or self.store is None or self.store.readonly:
            return False
        try:
            self.store.audit_extend([self._entry(DISMISSED, i, document) for i in event_ids])
        except StoreError as exc:
            self.store_error = str(exc)
            return False
        return True

    def claim(self, event_id: str) -> Claim | None:
        """The earlier approval of this event on this VM, if any (blocking: SQLite)."""
        if self.store is None:
            return None
        try:
            return self.store.claim(event_id, self.endpoint)
        except StoreError:
            return None  # cannot tell here; the approval itself checks again, or refuses

    # -- the approval ---------------------------------------------------------------------
    async def approve(self, event_ids: Sequence[str], document: Document | None, *,
                      confirmed_as: Mapping[str, Confirmed] | None = None,
                      allow_other_vms: bool = False, again: bool = False,
                      progress: Callable[[Progress], None] | None = None,
                      current: Callable[[], Document | None] | None = None,
                      ) -> list[ApprovalOutcome]:
        """Refuse, re-read the document, record, POST once for all the rest, record the
        outcomes.

        ``allow_other_vms``: the operator explicitly accepted that the event reaches
        beyond this VM (typed "yes", or --allow-other-vms); otherwise such an event is
        refused. ``confirmed_as``: the snapshots the operator confirmed (default: the events as in
        ``document``); the document is read once more just before the POST and any
        difference refuses. ``again``: approve even what an earlier approval claims.
        ``progress`` hears of each failed try; ``current`` gives the newest document
        known (the dashboard's), to stop retrying once the event started or left.
        """
        ids = list(dict.fromkeys(event_ids))
        results: dict[str, ApprovalOutcome] = {}
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
            # On a thread: SQLite may wait for another writer, and the caller's loop
            # (the dashboard's) must not.
            refused = await asyncio.to_thread(self.record_refusal, [event_id], document, reason)
            results[event_id] = refused[0]
        if going:
            assert document is not None and self.store is not None
            shown = {i: (confirmed_as or {}).get(i) or confirmed(document, i) for i in going}
            # The store's check (on a thread) while the document is read again: both stand
            # between the operator's key and the POST, neither needs the other.
            # Handed to the executor now, not a loop turn later as to_thread would.
            checking = asyncio.get_running_loop().run_in_executor(
                None, self.store.approval_integrity)
            try:
                latest, problem = await self._reread()
            finally:
                damaged = await checking
            ready: dict[str, Confirmed] = {}
            for event_id in going:
                seen = shown[event_id]
                assert seen is not None
                why, changes = self._still_as_shown(seen, latest, problem, allow_other_vms)
                if why is None:
                    ready[event_id] = seen
                    continue
                results[event_id] = (await asyncio.to_thread(partial(
                    self.record_refusal, [event_id], latest or document, why,
                    ask_again=bool(changes), changes=changes, seen=seen)))[0]
            if ready:
                for outcome in await self._post(ready, self.store, again, progress, current,
                                                damaged):
                    results[outcome.event_id] = outcome
        return [results[i] for i in ids]

    async def _reread(self) -> tuple[Document | None, str | None]:
        """The document as the service has it now: one GET, never a cached 304."""
        forget = getattr(self.client, "forget_etag", None)
        if forget is not None:
            forget()
        try:
            document = (await self.client.fetch()).document
        except ImdsError as exc:
            return None, exc.message or str(exc)
        if document is None:
            return None, "the service answered without a document"
        self.last_read = document
        return document, None

    def _still_as_shown(self, seen: Confirmed, latest: Document | None, problem: str | None,
                        allow_other_vms: bool) -> tuple[str | None, list[str]]:
        """Why the event may not be approved as confirmed, and what changed, if it may not."""
        if latest is None:
            return (f"the document could not be read again just before sending "
                    f"({printable(problem, 200)}), so nothing was sent"), []
        count = repeated(latest, seen.event_id)
        if count == 0:
            return (f"event {seen.event_id} left the document (incarnation "
                    f"{latest.incarnation}) since it was shown: it may have started and "
                    "ended, or been cancelled"), []
        event = find_event(latest, seen.event_id)
        assert event is not None
        now = event_snapshot(event)
        changes = changes_between(seen.snapshot, now)
        if count > 1:
            return (f"EventId {seen.event_id} now appears {count} times in the document "
                    f"(incarnation {latest.incarnation})"), changes
        if changes:
            return (f"event {seen.event_id} changed since it was shown (incarnation "
                    f"{seen.incarnation} -> {latest.incarnation}): " + "; ".join(changes),
                    changes)
        if event.is_started:
            return f"event {seen.event_id} has already started", []
        if not allow_other_vms:
            beyond = other_vms(event, self.vm_name)
            if beyond is not None:
                return f"{beyond}; it needs {self.consent or '--allow-other-vms'}", []
        return None, []

    async def _post(self, ready: Mapping[str, Confirmed], store: Store, again: bool,
                    progress: Callable[[Progress], None] | None,
                    current: Callable[[], Document | None] | None,
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
                attempts = await asyncio.to_thread(store.audit_extend, entries)
            else:
                attempts = await asyncio.to_thread(store.audit_claim, entries, wire_ids,
                                                   self.endpoint)
        except AlreadyClaimed as exc:
            return [self._claimed(i, ready[i], exc) for i in ids]
        except StoreError as exc:
            self.store_error = str(exc)
            reason = f"cannot write the audit log, so nothing was sent: {exc}"
            return [ApprovalOutcome(i, False, True, None, f"refused: {reason}", None, None)
                    for i in ids]

        def outcome(i: str, attempt: AuditRecord, **fields: Any) -> AuditEntry:
            return self._entry(APPROVE_OUTCOME, i, None, snapshot=ready[i].snapshot,
                               incarnation=ready[i].incarnation, attempt_seq=attempt.seq,
                               **fields)

        started = time.monotonic()
        try:
            status, error, latency, extra = await self._send(
                wire_ids, incarnation, self._retrying(ready, progress, current))
        except asyncio.CancelledError:
            # Stopped mid-request: it may or may not have reached the service. Say so in
            # the log (best effort), then let the cancellation go on.
            with contextlib.suppress(StoreError):  # on this thread: being cancelled
                store.audit_extend([outcome(
                    i, a, error="interrupted before the service answered: the request may "
                                "or may not have arrived", latency=time.monotonic() - started,
                    details={"ending": "interrupted"})
                    for i, a in zip(ids, attempts, strict=True)])
            raise
        approved = error is None
        try:
            outcomes = await asyncio.to_thread(store.audit_extend, [
                outcome(i, a, status=status, error=error, latency=latency, details=extra)
                for i, a in zip(ids, attempts, strict=True)])
            seqs = [o.seq for o in outcomes]
            note = ""
        except StoreError as exc:
            self.store_error = str(exc)
            seqs = [a.seq for a in attempts]
            note = f" (the outcome could not be added to the audit log: {exc})"
        if approved:
            message = f"approved: the service answered HTTP {status}{_ms(latency)}"
        else:
            message = f"not approved: {error}"
        return [ApprovalOutcome(i, approved, False, status, message + note, latency, seq)
                for i, seq in zip(ids, seqs, strict=True)]

    def _claimed(self, event_id: str, seen: Confirmed, exc: AlreadyClaimed) -> ApprovalOutcome:
        """An earlier approval claims the event: refused, recorded, and worth asking again."""
        claim = next((c for c in exc.claims if c.event_id.casefold()
                      == seen.event_id.casefold()), exc.claims[0])
        reason = f"{claim.describe()}; nothing was sent"
        entry = self._entry(REFUSED, event_id, None, snapshot=seen.snapshot,
                            incarnation=seen.incarnation, error=reason)
        seq = None
        try:
            assert self.store is not None
            seq = self.store.audit_extend([entry])[0].seq
        except StoreError as problem:
            self.store_error = str(problem)
        return ApprovalOutcome(event_id, False, True, None, f"refused: {reason}", None, seq,
                               ask_again=True)

    def _retrying(self, ready: Mapping[str, Confirmed],
                  progress: Callable[[Progress], None] | None,
                  current: Callable[[], Document | None] | None,
                  ) -> Callable[[int, ImdsError, float], str | None]:
        """The client's hook between tries: report, and say when to stop trying."""

        def on_retry(attempt: int, error: ImdsError, wait: float) -> str | None:
            for seen in ready.values():
                if progress is not None:
                    progress(Progress(seen.event_id, attempt, error.message or str(error),
                                      wait, error.status, error.kind))
            for seen in ready.values():
                why = self._stop_reason(seen, current() if current is not None else None,
                                        wait)
                if why is not None:
                    return why
            return None

        return on_retry

    def _stop_reason(self, seen: Confirmed, document: Document | None,
                     wait: float) -> str | None:
        """Why another try would be pointless or wrong: the event started, left, or its
        NotBefore passes before the next try (Azure starts it by itself then)."""
        if document is not None:
            event = find_event(document, seen.event_id)
            if event is None:
                return "the event left the document"
            if event.is_started:
                return "the event has started"
        not_before = parse_not_before(str(seen.snapshot.get("NotBefore") or ""))
        if not_before is not None and self.wall() + timedelta(seconds=wait) >= not_before:
            return "its NotBefore passes before the next try: Azure starts it then anyway"
        return None

    async def _send(self, ids: list[str], incarnation: int,
                    on_retry: Callable[[int, ImdsError, float], str | None],
                    ) -> tuple[int | None, str | None, float | None, dict[str, Any]]:
        """POST; (status, error or None, latency, details with the ending). Raises only
        CancelledError: every failure is an outcome to record."""
        started = time.monotonic()
        try:
            result = await self.client.approve(ids, incarnation=incarnation,
                                               on_retry=on_retry)
        except ImdsError as exc:
            ending = getattr(exc, "ending", None) or "failed"
            return exc.status, exc.message or str(exc), time.monotonic() - started, {
                "kind": exc.kind, "ending": ending}
        except Exception as exc:  # a bug or an unexpected library error: record, not crash
            return None, f"{type(exc).__name__}: {exc}", time.monotonic() - started, {
                "ending": "failed"}
        return result.status, None, result.latency, {
            "attempts": result.attempts, "elapsed_ms": round(result.elapsed * 1000, 1),
            "ending": "approved"}
