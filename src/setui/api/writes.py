"""The ops that change something: approve, dismiss, hold, release.

Each is allowed to approvers only (peer.Authority, asked at each request, so a reload
takes effect at once), acts as the identity the kernel gave (never one a request names),
and goes the one road setui has for it: approvals and dismissals through the
:class:`~setui.approval.approver.Approver` (bound to the snapshots the client confirmed, the
document read again before the POST, one claim per event across every process), holds
through the agent's own log, which it reads before every step. A refused request is
recorded as ``refused`` with the actor and why, for the events of the request that the
document has (one record if it has none of them), at most :data:`REFUSALS_BURST` times in
a row per uid and then once every :data:`REFUSAL_EVERY` seconds (each record says how many
refusals it stands for): a client refused in a loop cannot fill the audit log.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from setui.api.codec import decode_confirmed, encode_outcome, encode_progress
from setui.api.protocol import BAD_REQUEST, FORBIDDEN, UNAVAILABLE, Fields, ProtocolError
from setui.api.source import HoldRefused
from setui.approval.snapshot import find_event
from setui.core.ratelimit import TokenBucket

if TYPE_CHECKING:
    from setui.api.connection import Connection
    from setui.api.peer import Authority
    from setui.api.source import AgentSource
    from setui.approval.approver import Approver
    from setui.approval.outcome import Progress

__all__ = ["MAX_IDS", "Refusals", "WriteOps"]

MAX_IDS = 64  # EventIds in one approval or dismissal
SHORT = 1000
REFUSALS_BURST = 3
REFUSAL_EVERY = 10.0


class Refusals:
    """How often a uid's refusals are written to the audit log (see the module doc)."""

    def __init__(self, mono: Callable[[], float] = time.monotonic) -> None:
        self.mono = mono
        self._buckets: dict[int, TokenBucket] = {}
        self._untold: dict[int, int] = {}

    def take(self, uid: int) -> int | None:
        """None: do not record this one (it is counted); else record it, saying it
        stands for that many earlier refusals that were not recorded."""
        bucket = self._buckets.get(uid)
        if bucket is None:
            bucket = self._buckets[uid] = TokenBucket(1 / REFUSAL_EVERY, REFUSALS_BURST,
                                                      mono=self.mono)
        if not bucket.try_acquire():
            self._untold[uid] = self._untold.get(uid, 0) + 1
            return None
        return self._untold.pop(uid, 0)

    def owed(self) -> bool:
        """Whether a uid's buckets are still kept (forget_idle drops them when full)."""
        return bool(self._buckets)

    def forget_idle(self) -> None:
        """Drop the buckets that are full again and owe no count (bounded memory)."""
        for uid in [u for u, b in self._buckets.items()
                    if u not in self._untold and b.tokens >= REFUSALS_BURST]:
            del self._buckets[uid]


def _ids(args: Fields) -> list[str]:
    ids = args.texts("event_ids", limit=MAX_IDS, each=SHORT)
    if not ids or any(not i.strip() for i in ids):
        raise ProtocolError(BAD_REQUEST, "event_ids: one EventId or more, none empty")
    return list(dict.fromkeys(ids))


class WriteOps:
    """approve, dismiss, hold and release for one server."""

    def __init__(self, source: AgentSource, authority: Callable[[], Authority],
                 changed: Callable[[], None], mono: Callable[[], float] = time.monotonic,
                 ) -> None:
        self.source = source
        self.authority = authority
        self.changed = changed  # the agent's state changed: push it to subscribers
        self.refusals = Refusals(mono)

    def _approver(self, conn: Connection, op: str) -> Approver:
        from setui.approval.approver import Approver  # loaded by the first write, not at start

        assert conn.peer is not None
        source = self.source
        return Approver(source.client, None if source.store is None else source.store.audit_log,
                        endpoint=source.endpoint,
                        identity=conn.peer.identity(source.host), vm_name=source.vm_name,
                        vm_id=source.vm_id,
                        store_problem=source.store_problem,
                        details={**conn.peer.details(), "op": op},
                        # The client's own words for it differ (a flag, a typed yes): the
                        # refusal names what every client has.
                        consent="the operator's explicit yes to the other VMs "
                                "(allow_other_vms: setui approve --allow-other-vms, or "
                                "typing yes in the dashboard)")

    async def _allowed(self, conn: Connection, op: str, ids: list[str]) -> None:
        """Raise ``forbidden`` (after recording it) unless the client may do ``op``."""
        assert conn.creds is not None
        why = self.authority().why_not(conn.creds)
        if why is None:
            return
        untold = self.refusals.take(conn.creds.uid)
        if untold is not None:
            approver = self._approver(conn, op)
            if untold:
                approver.details["refusals_not_recorded"] = untold
            document = self.source.monitor.state.document
            # A record per event the document has (made-up ids would only fill the log),
            # and one in any case.
            shown = [i for i in ids if find_event(document, i) is not None] or ids[:1]
            await asyncio.to_thread(approver.record_refusal, shown, document,
                                    f"{op} through the agent's API: {why}")
        # The code says it is refused; the message says who may, and what to do, once.
        raise ProtocolError(FORBIDDEN, why)

    async def approve(self, conn: Connection, request_id: int, args: Fields) -> dict[str, Any]:
        ids = _ids(args)
        confirmed_fields = args.fields("confirmed")
        confirmed = {i: decode_confirmed(i, confirmed_fields.fields(i)) for i in ids}
        allow_other_vms, again = args.flag("allow_other_vms"), args.flag("again")
        await self._allowed(conn, "approve", ids)
        if self.source.info.dry_run:
            raise ProtocolError(UNAVAILABLE, "the agent runs with --dry-run: it posts nothing, "
                                             "for the policy or for a person")
        monitor = self.source.monitor

        def progress(update: Progress) -> None:
            conn.send_progress(request_id, encode_progress(update))

        outcomes = await self._approver(conn, "approve").approve(
            ids, monitor.state.document, confirmed_as=confirmed,
            allow_other_vms=allow_other_vms, again=again, progress=progress)
        for outcome in outcomes:
            if outcome.approved:
                monitor.note_approved(outcome.event_id)
        if any(o.approved for o in outcomes):
            monitor.poll_now()  # the start follows soon: see it at once
        self.changed()
        return {"outcomes": [encode_outcome(o) for o in outcomes]}

    async def dismiss(self, conn: Connection, request_id: int, args: Fields) -> dict[str, Any]:
        ids = _ids(args)
        await self._allowed(conn, "dismiss", ids)
        approver = self._approver(conn, "dismiss")
        recorded = await asyncio.to_thread(approver.record_cancel, ids,
                                           self.source.monitor.state.document)
        if not recorded and approver.store_error is not None:
            raise ProtocolError(UNAVAILABLE, f"not recorded: {approver.store_error}")
        return {"recorded": recorded}

    async def hold(self, conn: Connection, request_id: int, args: Fields) -> dict[str, Any]:
        return await self._hold(conn, args, held=True)

    async def release(self, conn: Connection, request_id: int, args: Fields
                      ) -> dict[str, Any]:
        return await self._hold(conn, args, held=False)

    async def _hold(self, conn: Connection, args: Fields, *, held: bool) -> dict[str, Any]:
        event_id = args.text("event_id", limit=SHORT)
        if not event_id.strip():
            raise ProtocolError(BAD_REQUEST, "event_id: empty")
        op = "hold" if held else "release"
        await self._allowed(conn, op, [event_id])
        assert conn.peer is not None
        try:
            spelt = await self.source.set_hold(
                event_id, held=held, identity=conn.peer.identity(self.source.host),
                details={**conn.peer.details(), "op": op})
        except HoldRefused as exc:
            raise ProtocolError(UNAVAILABLE, str(exc)) from None
        except Exception as exc:  # the store failed: nothing changed, said in words
            raise ProtocolError(UNAVAILABLE, f"not recorded, so not changed: {exc}") from None
        self.changed()
        rule = self.source.rule_for(spelt)
        return {"event_id": spelt, "held": held, "running": self.source.running(spelt),
                "rule": rule.name if rule is not None else None,
                "acts": rule is not None and rule.acts}
