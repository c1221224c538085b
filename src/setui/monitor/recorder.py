"""Recording to the store on a thread of its own, never on the caller's event loop.

SQLite can wait up to its busy timeout (5 s) for another writer; on Textual's event
loop that would freeze the dashboard, and in ``setui watch`` it would delay the next
poll. The recorder takes documents as they come, writes them in order on one worker
thread, and says in words when it cannot. It also keeps the recording session's row
(started, still beating, stopped), which is how the history knows its holes and the
dashboard knows whether another recorder is running.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from setui.core.health import PollResult
from setui.core.model import Document
from setui.store.history import TOUCH_INTERVAL
from setui.store.sessions import RECORDER_BEAT
from setui.system.boot import current_boot_id

if TYPE_CHECKING:
    from setui.store import Store
    from setui.store.records import RecorderSpan

__all__ = ["BEAT_SECONDS", "STORE_RETRY_SECONDS", "Recorder", "brief_store_problem"]

_T = TypeVar("_T")
# The session's row says "still recording" this often (store.RUNNING_WITHIN: how long
# after its last beat a session counts as running).
BEAT_SECONDS = RECORDER_BEAT.total_seconds()
# After the store failed, unchanged documents wait this long before the next try (a new
# incarnation is always tried: the history must not miss it).
STORE_RETRY_SECONDS = 30.0
MAX_QUEUED = 64  # new incarnations waiting for a stuck store; beyond that they are lost
# The store moves an unchanged document's last_seen at most once a TOUCH_INTERVAL; handing
# it every sighting (once a second) would be a thread hand-off for nothing. Half of it, so
# a sighting the store takes is never skipped here for the jitter between the two clocks.
TOUCH_SECONDS = TOUCH_INTERVAL.total_seconds() / 2


def brief_store_problem(message: str, path: object | None = None) -> str:
    """A store message for one status line: the file named, not its whole path, and
    without the "cannot record the history:" the status line already says."""
    text = message
    name = getattr(path, "name", None)
    if path is not None and name and str(path) != name:
        # The whole path only: a bare directory name could also be part of a word.
        text = text.replace(str(path), f"…/{name}")
    head, sep, rest = text.partition(": ")
    return rest if sep and head.startswith("cannot ") else text


class Recorder:
    """Writes what the monitor saw into ``store``, in order, off the event loop."""

    def __init__(self, store: Store, *, endpoint: str, command: str,
                 mono: Callable[[], float] = time.monotonic,
                 on_problem: Callable[[str | None, str | None], None] | None = None) -> None:
        self.store = store
        self.endpoint = endpoint
        self.command = command
        self.problem: str | None = None  # why the history is not being recorded now
        self.others: list[RecorderSpan] = []  # other sessions recording this endpoint now
        self.session_id: int | None = None
        # Set by whoever runs a heartbeat (the agent) before the session opens: the
        # session then says it measures from its first row, with no moment when a report
        # would read "not measured" while the heartbeat runs.
        self.measures = False
        self._mono = mono
        self._on_problem = on_problem or (lambda brief, full: None)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="setui-store")
        self._pending = 0
        self._retry_at: float | None = None
        self._beat_at: float | None = None
        self._beat_seen: datetime | None = None  # the service time of the last beat
        self._begun = False  # the first answer has set the session's start
        self._written_at: float | None = None  # when an unchanged document last went out
        self._closed = False

    @property
    def closed(self) -> bool:
        """Stopped: its thread takes no more work."""
        return self._closed

    # -- on the store thread ---------------------------------------------------------------
    async def call(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """Run ``fn(*args, **kwargs)`` on the store's thread and wait for it there."""
        future: Future[_T] = self._executor.submit(fn, *args, **kwargs)
        return await asyncio.wrap_future(future)

    async def start(self, at: datetime) -> None:
        """Open the recording session (its row tells others a recorder runs)."""
        try:
            self.session_id = await self.call(self._open, at)
            self.others = await self.call(self._others, at)
        except Exception as exc:  # StoreError, or a store that cannot do it: say so
            self._failed(exc)
        self._beat_at = self._mono()
        self._beat_seen = at

    async def stop(self, at: datetime) -> None:
        """Close the session and wait for every queued write; then the thread ends."""
        if self._closed:
            return
        self._closed = True
        if self.session_id is not None:
            # Stopping: if this fails, the last beat already bounds the session.
            with contextlib.suppress(Exception):
                await self.call(self.store.sessions.beat, self.session_id, at, stopped=True)
        await asyncio.to_thread(self._executor.shutdown, wait=True)

    def submit(self, result: PollResult, previous: Document | None,
               vm_name: str | None = None) -> None:
        """Record ``result``'s document (a fresh answer); returns at once.

        ``previous`` is the document the poller had just before this one: the store
        takes the poller's changes as the story only when that is the one it holds.
        ``vm_name``: this VM's name, once known, kept with the incarnation."""
        document = result.document
        if self._closed or document is None or not result.fresh:
            return
        new = previous is None or previous.incarnation != document.incarnation \
            or previous.raw != document.raw
        now = self._mono()
        wait = not new and (
            self._pending or (self._retry_at is not None and now < self._retry_at)
            or (self._written_at is not None and now - self._written_at < TOUCH_SECONDS))
        # An unchanged document can wait: the store is busy, failing or current. Beyond
        # MAX_QUEUED one is lost; the next one recorded is derived across that gap.
        if not wait and self._pending < MAX_QUEUED:
            self._pending += 1
            self._written_at = now
            future = self._executor.submit(self._write, result, document, previous, vm_name)
            future.add_done_callback(self._done_soon(asyncio.get_running_loop()))
        self._maybe_beat(now, result)

    def _maybe_beat(self, now: float, result: PollResult) -> None:
        """Say "still recording" once a :data:`BEAT_SECONDS`, with a fresh answer's time;
        also when the service's clock moved that far since the last beat (the record is
        kept in that clock, so a session must not look stopped in it while it runs)."""
        seen = result.seen_at
        if self.session_id is None or self._beat_at is None or seen is None:
            return
        if not self._begun:
            # The session starts with its first answer, in the record's clock.
            self._begun = True
            self._beat_at, self._beat_seen = now, seen
            begun = self._executor.submit(self._beat, seen, begins=True)
            begun.add_done_callback(self._done_soon(asyncio.get_running_loop(), count=False))
            return
        if now - self._beat_at >= BEAT_SECONDS or (
                self._beat_seen is not None
                and (seen - self._beat_seen).total_seconds() >= BEAT_SECONDS):
            self._beat_at = now
            self._beat_seen = seen
            beat = self._executor.submit(self._beat, seen)
            beat.add_done_callback(self._done_soon(asyncio.get_running_loop(), count=False))

    def _open(self, at: datetime) -> int:
        # The boot it runs in, read here on the store's thread (a file in /proc): how a
        # boot is found later (store.impacts).
        return self.store.sessions.start(endpoint=self.endpoint, pid=os.getpid(),
                                         host=socket.gethostname(), command=self.command,
                                         at=at, boot_id=current_boot_id(),
                                         measures=self.measures)

    def _write(self, result: PollResult, document: Document, previous: Document | None,
               vm_name: str | None) -> bool:
        from setui.store.history import content_hash

        assert result.seen_at is not None
        after = (previous.incarnation, content_hash(previous)) if previous is not None else None
        return self.store.history.record(
            document, seen_at=result.seen_at, endpoint=self.endpoint, changes=result.changes,
            gap=result.gap, after=after, clock_skew=result.health.clock_skew,
            vm_name=vm_name)

    def _beat(self, at: datetime, *, begins: bool = False) -> list[RecorderSpan]:
        assert self.session_id is not None
        self.store.sessions.beat(self.session_id, at, begins=begins)
        return self._others(at)

    def _others(self, at: datetime) -> list[RecorderSpan]:
        return [s for s in self.store.sessions.running(endpoint=self.endpoint, at=at)
                if s.id != self.session_id]

    # -- back on the loop --------------------------------------------------------------------
    def _done_soon(self, loop: asyncio.AbstractEventLoop, *, count: bool = True
                   ) -> Callable[[Future[Any]], None]:
        def done(future: Future[Any]) -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(self._done, future, count)
        return done

    def _done(self, future: Future[Any], count: bool) -> None:
        if count:
            self._pending -= 1
        exc = future.exception()
        if exc is not None:
            self._failed(exc)
            return
        if not count:
            self.others = future.result()
            return
        self._retry_at = None
        if self.problem is not None:
            self.problem = None
            self._on_problem(None, None)

    def _failed(self, exc: BaseException) -> None:
        self._retry_at = self._mono() + STORE_RETRY_SECONDS
        full = str(exc) or type(exc).__name__
        brief = brief_store_problem(full, getattr(exc, "path", None))
        if self.problem != brief:
            first = self.problem is None
            self.problem = brief
            if first:
                self._on_problem(brief, full)
