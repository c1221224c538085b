"""The one monitor every front end consumes: polling, the service's clock, the lives of
the events, recording, and what is known (and not known) right now.

``setui watch`` prints its updates, the dashboard renders them, and later front ends take
the same road; none of them polls, tracks, restates times or writes the history itself.
It imports no Textual: headless front ends start fast and the rules live in one place.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from setui.core.clock import ServiceClock, utc_now
from setui.core.health import Health, PollResult
from setui.core.model import Document
from setui.core.poller import Poller
from setui.core.timefmt import utc_time
from setui.core.tracker import ChangeKind, Tracker
from setui.monitor.recorder import Recorder
from setui.monitor.replay import recorded_lives
from setui.monitor.state import MonitorState, MonitorUpdate
from setui.store.records import APPROVED

if TYPE_CHECKING:
    from setui.core.client import ImdsClient
    from setui.store import AuditRecord, Store
    from setui.store.records import IncarnationRecord

__all__ = ["URGENT_WINDOW", "Monitor", "MonitorUpdate"]

_T = TypeVar("_T")

# While an event of this VM is Scheduled this close to its NotBefore, or Started, the
# poller never backs off further than core.poller.URGENT_CAP.
URGENT_WINDOW = timedelta(minutes=15)
# What a restart reads back of the lives of the events still there: at most this many
# events, and this many stored changes' incarnations of each (the newest).
_RESUMED_EVENTS = 200
_RESUMED_RECORDS = 500


class Monitor:
    """``async for update in monitor.updates()``: poll, track, record, until cancelled."""

    def __init__(self, client: ImdsClient, *, endpoint: str, interval: float,
                 store: Store | None = None, record: bool = True, vm_name: str | None = None,
                 state: MonitorState | None = None, command: str = "setui",
                 wall: Callable[[], datetime] = utc_now,
                 mono: Callable[[], float] = time.monotonic,
                 on_store_problem: Callable[[str | None, str | None], None] | None = None,
                 quiet_ok: Callable[[], bool] | None = None) -> None:
        self.client = client
        self.endpoint = endpoint
        self.store = store
        self.vm_name = vm_name
        self.state = state if state is not None else MonitorState()
        self._wall = wall
        self._mono = mono
        self.clock = ServiceClock(wall=wall, mono=mono)
        self._quiet_ok = quiet_ok
        self._approved: set[str] = set()
        # A store opened to read (the agent's, which the agent records) is only read.
        self.recorder = Recorder(store, endpoint=endpoint, command=command, mono=mono,
                                 on_problem=on_store_problem) \
            if store is not None and record and not store.readonly else None
        self.poller = self._poller(interval, Tracker())

    def _poller(self, interval: float, tracker: Tracker) -> Poller:
        return Poller(self.client, interval=interval, tracker=tracker, wall=self._wall,
                      mono=self._mono, clock=self.clock, urgent=self.urgent,
                      approved=lambda: frozenset(self._approved), quiet_ok=self._quiet_ok)

    # -- what is known now ------------------------------------------------------------------
    def now(self) -> datetime:
        """The service's time as best known (the VM's clock while it agrees)."""
        return self.clock.now()

    def health(self) -> Health:
        """The connection's health as it stands at this moment (live turns stale)."""
        self._fold_quiet()
        return self.state.health.at(self._mono())

    def stale(self) -> bool:
        """Whether the document shown is older than "live" allows."""
        self._fold_quiet()
        return self.state.health.is_stale(self._mono())

    def _fold_quiet(self) -> None:
        """Answers the quiet thread had since the last result keep the state live."""
        if self.poller.fold_quiet():
            self.state.health = self.poller.health

    @property
    def interval(self) -> float:
        return self.poller.interval

    def urgent(self) -> bool:
        """An event of this VM (of any VM while this one's name is unknown) is Started,
        or Scheduled within :data:`URGENT_WINDOW` of its NotBefore."""
        document = self.state.document
        if document is None:
            return False
        horizon = self.now() + URGENT_WINDOW
        for event in document.events:
            if self.vm_name and not event.affects(self.vm_name):
                continue
            if event.is_started or (event.not_before is not None
                                    and event.not_before <= horizon):
                return True
        return False

    def note_approved(self, event_id: str) -> None:
        """An approval of ``event_id`` was accepted: if it vanishes unseen, it probably ran."""
        self._approved.add(event_id)

    def poll_now(self) -> None:
        self.poller.poll_now()

    def want_next(self) -> None:
        """The next poll's update is wanted even if nothing changed (see Poller)."""
        self.poller.want_next()

    # -- running ----------------------------------------------------------------------------
    async def updates(self) -> AsyncGenerator[MonitorUpdate, None]:
        """Poll until cancelled; one update per attempt, failed ones included."""
        await self._resume()
        try:
            async for result in self.poller.results():
                previous = self.state.document
                if result.changes and self.store is not None:
                    result = await self._with_approvals(result)
                announce, before = self.state.apply(result)
                if self.recorder is not None:
                    self.recorder.submit(result, previous, self.vm_name)
                yield MonitorUpdate(result, tuple(announce), before)
        finally:
            if self.recorder is not None:
                self._fold_quiet()  # the service's time of the last answer, quiet or not
                await self.recorder.stop(self.now())

    async def _resume(self) -> None:
        """Take up the story where the store left it, and open the recording session."""
        if self.store is None:
            return
        if self.recorder is not None:
            await self.recorder.start(self.now())
        baseline: tuple[Document, str] | None = None
        try:
            baseline = await self.store_call(self.store.history.newest_document, self.endpoint)
            ids = [e.event_id for e in baseline[0].events] if baseline else []
            self._approved.update(await self.store_call(self.store.audit_log.approvals, ids))
        except Exception:  # a store that cannot say: start without a baseline
            baseline = None
        if baseline is not None and self.poller.tracker.incarnation is None:
            self.poller.tracker = Tracker(baseline=baseline[0])
            await self._resume_lives(baseline[0])

    async def _resume_lives(self, baseline: Document) -> None:
        """The lives of the events the newest stored document holds, as the record tells
        them: when each was first seen and started, and how surely. The first document
        of this session then continues them (MonitorState) instead of beginning them
        again as "in the first document seen"."""
        store = self.store
        if store is None or not baseline.events:
            return
        ids = [e.event_id for e in baseline.events[:_RESUMED_EVENTS]]

        def read() -> list[IncarnationRecord]:
            found: dict[int, IncarnationRecord] = {}
            for event_id in ids:
                for record in store.history.incarnations(
                        limit=_RESUMED_RECORDS, endpoint=self.endpoint, event_id=event_id):
                    found[record.row_id] = record
            return list(found.values())

        try:
            records = await self.store_call(read)
        except Exception:  # a store that cannot say: the lives begin with this session
            return
        for event_id, life in recorded_lives(records, ids).items():
            self.state.lives.setdefault(event_id, life)

    async def _with_approvals(self, result: PollResult) -> PollResult:
        """Say who approved an event that started early (or sent an approval whose outcome
        is unknown: it may be what started it), and that an event which vanished unseen
        was approved (so it probably ran), from the audit log: an approval made by
        another setui process is there too."""
        wanted = [c for c in result.changes if c.event_id and (
            (c.kind is ChangeKind.STARTED and "before its NotBefore" in c.detail)
            or (c.kind is ChangeKind.GONE and "it was approved" not in c.detail))]
        if not wanted or self.store is None:
            return result
        try:
            found = await self.store_call(partial(
                self.store.audit_log.approvals, [c.event_id for c in wanted if c.event_id],
                unknown=True))
        except Exception:
            return result
        self._approved.update(i for i, r in found.items() if r.result == APPROVED)
        changes = []
        for change in result.changes:
            record = found.get(change.event_id or "") if change in wanted else None
            if change in wanted and change.kind is ChangeKind.STARTED:
                change = replace(change, detail=f"{change.detail}; {_approved_by(record)}")
            elif record is not None and record.result == APPROVED:
                head = change.detail.rsplit("; ", 1)[0]
                change = replace(change, detail=f"{head}; it was approved: it probably ran")
            changes.append(change)
        return replace(result, changes=tuple(changes))

    async def store_call(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """``fn`` run on the store's thread (one writer, in order), off the event loop.
        Stopping, the recorder's thread may have ended already (the monitor stops when
        the signal reaches it): a thread of the pool's, then."""
        if self.recorder is not None and not self.recorder.closed:
            return await self.recorder.call(fn, *args, **kwargs)
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def aclose(self) -> None:
        if self.recorder is not None:
            await self.recorder.stop(self.now())


def _approved_by(record: AuditRecord | None) -> str:
    """Who started an event early, as far as this VM's audit log can tell."""
    if record is None:
        return "approved by another VM or by Azure"
    when = f"{utc_time(record.time)} UTC"
    if record.result == APPROVED:
        return f"approved by {record.user} at {when}"
    return f"approval by {record.user} at {when}, outcome unknown: it may be what started it"
