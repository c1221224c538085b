"""The one path to an approval, for ``setui approve`` and the dashboard alike.

Approving starts maintenance, for every VM in the event's Resources: it is setui's one
destructive action. So the order is fixed: refuse what must not be approved (and record
the refusal), commit an attempt record to the audit log, and only then POST; afterwards
append the outcome. If the attempt cannot be committed, nothing is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from setui.core.clock import utc_now
from setui.core.errors import ImdsError
from setui.core.model import Document, Event
from setui.identity import Identity
from setui.store import (
    APPROVE_ATTEMPT,
    APPROVE_OUTCOME,
    CANCELLED,
    REFUSED,
    AuditEntry,
    Store,
    StoreError,
    event_snapshot,
)

if TYPE_CHECKING:
    from setui.core.client import ImdsClient

__all__ = ["ApprovalOutcome", "Approver", "find_event"]


@dataclass(frozen=True)
class ApprovalOutcome:
    """What happened to one EventId; ``message`` is for people."""

    event_id: str
    approved: bool
    refused: bool
    status: int | None
    message: str
    latency: float | None
    record_seq: int | None  # the audit record telling this outcome, if one was written


def find_event(document: Document | None, event_id: str) -> Event | None:
    """The event with that id; an exact match first, then ignoring case (GUIDs)."""
    if document is None:
        return None
    exact = document.event(event_id)
    if exact is not None:
        return exact
    wanted = event_id.strip().casefold()
    return next((e for e in document.events if e.event_id.casefold() == wanted), None)


def _ms(seconds: float | None) -> str:
    return "" if seconds is None else f" in {seconds * 1000:.0f} ms"


class Approver:
    """Checks, records and posts approvals; see the module docstring for the order."""

    def __init__(self, client: ImdsClient, store: Store | None, *, endpoint: str,
                 identity: Identity | None = None, read_only: bool = False,
                 store_problem: str | None = None,
                 wall: Callable[[], datetime] = utc_now) -> None:
        self.client = client
        self.store = store
        self.endpoint = endpoint
        self.identity = identity or Identity.current()
        self.read_only = read_only
        self.store_problem = store_problem
        self.wall = wall
        # The last failure to write the audit log, for callers that show or act on it.
        self.store_error: str | None = None

    # -- checks ---------------------------------------------------------------------------
    def refusal(self, event_id: str, document: Document | None) -> str | None:
        """Why approving ``event_id`` now would be refused, or None when it may go ahead."""
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
        if event.is_started:
            return f"event {event.event_id} ({event.event_type}) has already started"
        return None

    # -- records --------------------------------------------------------------------------
    def _entry(self, action: str, event_id: str, document: Document | None,
               **fields: Any) -> AuditEntry:
        event = find_event(document, event_id)
        details: dict[str, Any] = dict(fields.pop("details", {}))
        details.update(self.identity.details())
        return AuditEntry(
            action=action, time=self.wall(), user=self.identity.user,
            host=self.identity.host, ssh_client=self.identity.ssh_client,
            endpoint=self.endpoint, event_id=event.event_id if event else event_id,
            event=event_snapshot(event) if event else None,
            incarnation=document.incarnation if document is not None else None,
            details=details, **fields)

    def record_refusal(self, event_ids: Sequence[str], document: Document | None,
                       reason: str) -> list[ApprovalOutcome]:
        """Record that setui refused these approvals (when the log can be written)."""
        seqs: list[int | None] = [None] * len(event_ids)
        if self.store is not None and not self.store.readonly:
            try:
                records = self.store.audit_extend(
                    [self._entry(REFUSED, i, document, error=reason) for i in event_ids])
                seqs = [r.seq for r in records]
            except StoreError as exc:
                self.store_error = str(exc)  # the refusal stands; it is just not written
        return [ApprovalOutcome(i, approved=False, refused=True, status=None,
                                message=f"refused: {reason}", latency=None, record_seq=seq)
                for i, seq in zip(event_ids, seqs, strict=True)]

    def record_cancel(self, event_ids: Sequence[str], document: Document | None) -> bool:
        """Record that the operator said no; True if it was written (nothing else depends
        on it: nothing was sent)."""
        if not event_ids or self.store is None or self.store.readonly:
            return False
        try:
            self.store.audit_extend([self._entry(CANCELLED, i, document) for i in event_ids])
        except StoreError as exc:
            self.store_error = str(exc)
            return False
        return True

    # -- the approval ---------------------------------------------------------------------
    async def approve(self, event_ids: Sequence[str],
                      document: Document | None) -> list[ApprovalOutcome]:
        """Refuse, record, POST once for all the rest, record the outcomes."""
        ids = list(dict.fromkeys(event_ids))
        results: dict[str, ApprovalOutcome] = {}
        going: list[str] = []
        resolved: set[str] = set()
        for event_id in ids:
            reason = self.refusal(event_id, document)
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
            for outcome in await self._post(going, document, self.store):
                results[outcome.event_id] = outcome
        return [results[i] for i in ids]

    async def _post(self, ids: list[str], document: Document,
                    store: Store) -> list[ApprovalOutcome]:
        events = [find_event(document, i) for i in ids]
        wire_ids = [e.event_id if e else i for i, e in zip(ids, events, strict=True)]
        batch = {"api_version": getattr(self.client, "api_version", None),
                 "event_ids": wire_ids}
        # A damaged or altered store refuses before anything is written or sent.
        damaged = await asyncio.to_thread(store.approval_integrity)
        if damaged is not None:
            return [ApprovalOutcome(i, False, True, None, f"refused: {damaged}", None, None)
                    for i in ids]
        try:
            attempts = await asyncio.to_thread(
                store.audit_extend,
                [self._entry(APPROVE_ATTEMPT, i, document, details=batch) for i in ids])
        except StoreError as exc:
            self.store_error = str(exc)
            reason = f"cannot write the audit log, so nothing was sent: {exc}"
            return [ApprovalOutcome(i, False, True, None, f"refused: {reason}", None, None)
                    for i in ids]
        started = time.monotonic()
        try:
            status, error, latency, extra = await self._send(wire_ids, document.incarnation)
        except asyncio.CancelledError:
            # Stopped mid-request: it may or may not have reached the service. Say so in
            # the log (best effort), then let the cancellation go on.
            with contextlib.suppress(StoreError):  # on this thread: being cancelled
                store.audit_extend([self._entry(
                    APPROVE_OUTCOME, i, document, attempt_seq=a.seq,
                    error="interrupted before the service answered: the request may or "
                          "may not have arrived", latency=time.monotonic() - started)
                    for i, a in zip(ids, attempts, strict=True)])
            raise
        approved = error is None
        try:
            outcomes = await asyncio.to_thread(store.audit_extend, [
                self._entry(APPROVE_OUTCOME, i, document, attempt_seq=a.seq, status=status,
                            error=error, latency=latency, details=extra)
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

    async def _send(self, ids: list[str], incarnation: int,
                    ) -> tuple[int | None, str | None, float | None, dict[str, Any]]:
        """POST once; (status, error or None, latency, details). Raises only
        CancelledError: every failure is an outcome to record."""
        started = time.monotonic()
        try:
            result = await self.client.approve(ids, incarnation=incarnation)
        except ImdsError as exc:
            return exc.status, exc.message or str(exc), time.monotonic() - started, {
                "kind": exc.kind}
        except Exception as exc:  # a bug or an unexpected library error: record, not crash
            return None, f"{type(exc).__name__}: {exc}", time.monotonic() - started, {}
        return result.status, None, result.latency, {
            "attempts": result.attempts, "elapsed_ms": round(result.elapsed * 1000, 1)}

