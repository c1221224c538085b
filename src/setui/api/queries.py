"""The read-only queries: history, audit, the record replay and reports are built from.

They run on one thread of their own, with a read-only connection to the store of their
own: never on the agent's event loop (a query of the whole history would stop polling)
and never on the recorder's thread (it would delay what the agent writes). At most
:data:`MAX_WAITING` queries wait at a time across all clients (one per client: the
connection says so before it asks); past that a client hears ``busy``. Arguments are
read on the loop, before anything is queued; the answer is made and encoded on the
thread, and refused as ``too-large`` past the frame limit, with what to narrow.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from setui.api.codec import (
    encode_audit,
    encode_claim,
    encode_holes,
    encode_impact,
    encode_incarnation,
    encode_recording,
    encode_story,
    encode_verify,
)
from setui.api.protocol import (
    BUSY,
    MAX_ANSWER,
    TOO_LARGE,
    UNAVAILABLE,
    Fields,
    ProtocolError,
    encode_frame,
    error_frame,
)
from setui.core.model import MAX_INCARNATION
from setui.store import IncarnationRecord, Store, StoreError
from setui.store.errors import NothingRecorded
from setui.store.stored import StoredRecord

__all__ = ["MAX_WAITING", "QueryThread"]

MAX_WAITING = 16
MAX_HISTORY = 1000  # incarnations in one page
MAX_AUDIT = 10_000  # audit records in one answer
MAX_IDS = 1000  # EventIds asked about at once, or known by one prefix
SHORT = 1000

Query = Callable[[StoredRecord], dict[str, Any]]


def _page(args: Fields) -> IncarnationRecord | None:
    """``before``: where the previous page ended (its last record's first_seen, row_id)."""
    before = args.fields("before", optional=True)
    if before is None:
        return None
    return IncarnationRecord("", 0, before.time("first_seen"), before.time("first_seen"), "",
                             (), "", row_id=before.integer("row_id"))


def _history(args: Fields) -> Query:
    limit = args.integer("limit", low=1, high=MAX_HISTORY, optional=True) or 50
    since = args.time("since", optional=True)
    endpoint = args.text("endpoint", limit=SHORT, optional=True)
    event_id = args.text("event_id", limit=SHORT, optional=True)
    before = _page(args)
    return lambda store: {"records": [encode_incarnation(r) for r in store.history(
        limit=limit, since=since, endpoint=endpoint, event_id=event_id, before=before)]}


def _incarnation(args: Fields) -> Query:
    number = args.integer("number", high=MAX_INCARNATION)
    endpoint = args.text("endpoint", limit=SHORT, optional=True)

    def run(store: StoredRecord) -> dict[str, Any]:
        record = store.incarnation(number, endpoint=endpoint)
        return {"record": None if record is None else encode_incarnation(record)}
    return run


def _previous(args: Fields) -> Query:
    first_seen = args.time("first_seen")
    record = IncarnationRecord(args.text("endpoint", limit=SHORT), 0, first_seen, first_seen,
                               "", (), "", row_id=args.integer("row_id"))

    def run(store: StoredRecord) -> dict[str, Any]:
        found = store.previous(record)
        return {"record": None if found is None else encode_incarnation(found)}
    return run


def _event_story(args: Fields) -> Query:
    event_id = args.text("event_id", limit=SHORT)
    return lambda store: {"story": [encode_story(e) for e in store.event_story(event_id)]}


def _event_ids(args: Fields) -> Query:
    prefix = args.text("prefix", limit=SHORT)
    limit = args.integer("limit", low=1, high=MAX_IDS, optional=True) or 20
    return lambda store: {"event_ids": store.event_ids(prefix, limit=limit)}


def _impacts(args: Fields) -> Query:
    endpoint = args.text("endpoint", limit=SHORT)
    since, until = args.time("since", optional=True), args.time("until", optional=True)
    newest = args.integer("newest", low=1, high=MAX_AUDIT, optional=True)
    return lambda store: {"impacts": [encode_impact(i) for i in store.impacts(
        endpoint=endpoint, since=since, until=until, newest=newest)]}


def _approvals(args: Fields) -> Query:
    ids = args.texts("event_ids", limit=MAX_IDS, each=SHORT)
    unknown = args.flag("unknown")

    def run(store: StoredRecord) -> dict[str, Any]:
        found = store.approvals(ids, unknown=unknown)
        return {"approvals": {i: encode_audit(r) for i, r in found.items()}}
    return run


def _claim(args: Fields) -> Query:
    event_id = args.text("event_id", limit=SHORT)
    endpoint = args.text("endpoint", limit=SHORT)
    vm_id = args.text("vm_id", limit=SHORT, optional=True)  # checked by store.vmkeys

    def run(store: StoredRecord) -> dict[str, Any]:
        found = store.claim(event_id, endpoint, vm_id=vm_id)
        return {"claim": None if found is None else encode_claim(found)}
    return run


def _holes(args: Fields) -> Query:
    endpoint = args.text("endpoint", limit=SHORT)
    now = args.time("now", optional=True)
    return lambda store: {"holes": encode_holes(store.holes(endpoint=endpoint, now=now))}


def _audit(args: Fields) -> Query:
    limit = args.integer("limit", low=1, high=MAX_AUDIT, optional=True) or 100
    oldest_first = args.flag("oldest_first")
    after = args.integer("after", optional=True)
    before = args.integer("before", optional=True)

    def run(store: StoredRecord) -> dict[str, Any]:
        records = store.audit(limit=limit, oldest_first=oldest_first, after=after,
                              before=before)
        return {"records": [encode_audit(r) for r in records],
                "unforwarded": {str(seq): why for seq, why in store.unforwarded().items()},
                "missing": store.missing_records()}
    return run


def _verify_audit(args: Fields) -> Query:
    return lambda store: {"result": encode_verify(store.verify_audit()),
                          "missing": store.missing_records()}


def _recording(args: Fields) -> Query:
    since, until = args.time("since", optional=True), args.time("until", optional=True)
    endpoint = args.text("endpoint", limit=SHORT, optional=True)

    def run(store: StoredRecord) -> dict[str, Any]:
        found = store.recording(since=since, until=until, endpoint=endpoint)
        return {"recording": None if found is None else encode_recording(found)}
    return run


_READERS: dict[str, Callable[[Fields], Query]] = {
    "history": _history, "incarnation": _incarnation, "previous": _previous,
    "event_story": _event_story, "event_ids": _event_ids, "holes": _holes,
    "impacts": _impacts, "approvals": _approvals, "claim": _claim, "audit": _audit,
    "verify_audit": _verify_audit, "recording": _recording,
}


def _narrow(op: str) -> str:
    if op in ("history", "audit"):
        return "ask for fewer (limit) or page on (before)"
    if op == "impacts":
        return "ask for a shorter span (since, until) or the newest few (newest)"
    if op == "recording":
        return "ask for a shorter span (since, until)"
    return "it cannot be sent whole"


class QueryThread:
    """The query thread and its read-only store (see the module doc)."""

    def __init__(self, db_path: Path | None, problem: str | None = None) -> None:
        self.db_path = db_path
        self.problem = problem  # why there is no store to read, when there is none
        self.waiting = 0
        self._store: Store | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="setui-api-query")

    def prepare(self, op: str, args: Fields) -> Query:
        """The query an op's arguments ask for; ProtocolError (bad-request) if they are
        wrong, ``unavailable`` without a store, ``busy`` past MAX_WAITING."""
        query = _READERS[op](args)
        if self.db_path is None:
            raise ProtocolError(UNAVAILABLE, "the agent keeps no history or audit log: "
                                             f"{self.problem or 'it runs without a store'}")
        if self.waiting >= MAX_WAITING:
            raise ProtocolError(BUSY, f"the agent is answering {MAX_WAITING} queries "
                                      "already: ask again shortly")
        return query

    async def run(self, op: str, request_id: int, query: Query) -> bytes:
        """The answer's frame (or an error frame), made on the query thread."""
        self.waiting += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(
                self._executor, self._answer, op, request_id, query)
        finally:
            self.waiting -= 1

    def _answer(self, op: str, request_id: int, query: Query) -> bytes:
        try:
            body = query(self._open().record)
        except NothingRecorded as exc:
            return error_frame(UNAVAILABLE, str(exc), request_id)
        except StoreError as exc:
            self._close()  # opened again by the next query: the file may be back
            return error_frame(UNAVAILABLE, str(exc), request_id)
        frame = encode_frame({"id": request_id, "ok": body})
        if len(frame) > MAX_ANSWER:
            return error_frame(TOO_LARGE, f"the answer is {len(frame) // 1024} KiB, more than "
                                          f"a frame's {MAX_ANSWER // 1024} KiB: "
                                          f"{_narrow(op)}", request_id)
        return frame

    def _open(self) -> Store:
        if self._store is None:
            assert self.db_path is not None
            self._store = Store(self.db_path, readonly=True)
        return self._store

    def _close(self) -> None:
        if self._store is not None:
            with contextlib.suppress(Exception):
                self._store.close()
            self._store = None

    async def aclose(self) -> None:
        await asyncio.to_thread(self._executor.submit(self._close).result)
        self._executor.shutdown(wait=False)
