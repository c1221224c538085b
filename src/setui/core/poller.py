"""Poll the events document on a fixed grid, one request at a time, and say how it went.

Azure recommends polling once a second because notice can be as short as 30 s. The
poller keeps that pace without drift (ticks at ``start + k * interval``), never has two
requests in flight, skips the ticks a slow answer missed instead of catching up in a
burst, backs off when the service fails, and turns every outcome, even a bug, into a
:class:`PollResult`; the loop itself never dies until it is cancelled.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from datetime import datetime, timedelta

from setui.core.backoff import Backoff
from setui.core.client import FetchResult, ImdsClient
from setui.core.clock import utc_now
from setui.core.errors import ImdsError, Unreachable
from setui.core.health import ConnectionState, Health, PollResult
from setui.core.model import Document
from setui.core.tracker import Change, Tracker

__all__ = ["MIN_INTERVAL", "SLOW_INTERVAL", "Poller"]

MIN_INTERVAL = 0.2  # IMDS allows about 5 requests a second per VM, approvals included
# After an answer that retrying cannot fix (400, 404, 405: a wrong endpoint or version),
# keep asking slowly: the operator may fix things, and the dashboard should notice.
SLOW_INTERVAL = 10.0
_log = logging.getLogger(__name__)


class Poller:
    """``async for result in poller.results()``: one PollResult per attempt."""

    def __init__(self, client: ImdsClient, *, interval: float = 1.0,
                 tracker: Tracker | None = None, wall: Callable[[], datetime] = utc_now,
                 mono: Callable[[], float] = time.monotonic, backoff: Backoff | None = None,
                 sleep: Callable[[float], Awaitable[None]] | None = None,
                 slow_interval: float = SLOW_INTERVAL) -> None:
        if not (math.isfinite(interval) and interval >= MIN_INTERVAL):
            raise ValueError("interval must be at least 0.2 s: IMDS limits the request rate")
        self.client = client
        self.interval = float(interval)
        self.slow_interval = max(self.interval, slow_interval)
        self.tracker = tracker if tracker is not None else Tracker()
        self.health = Health(first_call_pending=client.first_call_pending)
        self.document: Document | None = None
        self._wall = wall
        self._mono = mono
        self._backoff = backoff or Backoff()
        self._sleep = sleep or asyncio.sleep
        self._wake = asyncio.Event()
        self._running = False
        self._attempts = 0

    def poll_now(self) -> None:
        """Poll at once (the dashboard's ``r`` key), even during a backoff wait. A call
        while a request is in flight is folded into that request. Call it from the
        loop's thread."""
        self._wake.set()

    async def results(self) -> AsyncIterator[PollResult]:
        """Poll until cancelled; yields after every attempt, failed ones included."""
        if self._running:
            raise RuntimeError("this poller is already running: one loop, one request at a time")
        self._running = True
        try:
            start = self._mono()
            next_at = start
            while True:
                await self._wait_until(next_at)
                self._wake.clear()
                result = await self._attempt()
                self._wake.clear()  # presses during the request were answered by it
                now = self._mono()
                if result.fresh:
                    # The next tick of the grid still ahead: no drift, and no burst of
                    # catch-up requests after a slow answer.
                    next_at = start + (math.floor((now - start) / self.interval) + 1) \
                        * self.interval
                else:
                    next_at = now + self._retry_delay(result.error)
                    self.health = replace(self.health, next_attempt_in=next_at - now)
                    result = replace(result, health=self.health)
                yield result
        finally:
            self._running = False

    # -- one attempt ------------------------------------------------------------------------
    async def _attempt(self) -> PollResult:
        self._attempts += 1
        try:
            fetched = await self.client.fetch()
            if fetched.document is None and self.document is None:
                # 304, but the cached document is not ours (the client was used before
                # this poller): ask again in full. Sequential, so still one in flight.
                self.client.forget_etag()
                fetched = await self.client.fetch()
            return self._success(fetched)
        except ImdsError as exc:
            return self._failure(exc)
        except Exception as exc:  # a bug must show up as a failed poll, not end polling
            _log.exception("unexpected error while polling")
            text = str(exc).splitlines()[0][:200] if str(exc) else ""
            error = ImdsError(f"internal error: {type(exc).__name__}{': ' + text if text else ''}")
            error.retryable = True  # back off and try again rather than crawl at the slow pace
            return self._failure(error)

    def _success(self, fetched: FetchResult) -> PollResult:
        seen_at = self._wall()
        document = fetched.document
        changes: tuple[Change, ...] = ()
        if document is not None:
            changes = tuple(self.tracker.update(document, seen_at))
            self.document = document
        self.health = Health(
            state=ConnectionState.LIVE,
            last_success=seen_at,
            last_success_mono=self._mono(),
            consecutive_failures=0,
            last_error=None,
            latency=fetched.latency,
            first_call_pending=self.client.first_call_pending,
            next_attempt_in=None,
            clock_skew=self._skew(fetched, seen_at),
        )
        return PollResult(self.health, self.document, changes, None, fresh=True,
                          seen_at=seen_at,
                          details={"status": fetched.status, "attempt": self._attempts,
                                   "unchanged": fetched.document is None})

    def _failure(self, error: ImdsError) -> PollResult:
        state = ConnectionState.UNREACHABLE if isinstance(error, Unreachable) \
            else ConnectionState.RETRYING
        self.health = replace(
            self.health, state=state, consecutive_failures=self.health.consecutive_failures + 1,
            last_error=error.message, first_call_pending=self.client.first_call_pending,
            next_attempt_in=None)
        return PollResult(self.health, self.document, (), error, fresh=False,
                          details={"status": error.status, "kind": error.kind,
                                   "attempt": self._attempts})

    def _skew(self, fetched: FetchResult, seen_at: datetime) -> float | None:
        """Service ``Date`` minus this VM's wall clock at the moment the answer arrived."""
        if fetched.server_date is None:
            return self.health.clock_skew if fetched.document is None else None
        lag = self._mono() - fetched.received_mono
        # Parsing took ``lag``; a nonsense value means the client runs on another clock.
        received = seen_at - timedelta(seconds=lag) if 0 <= lag < 60 else seen_at
        return (fetched.server_date - received).total_seconds()

    def _retry_delay(self, error: ImdsError | None) -> float:
        if error is not None and not error.retryable:
            return self.slow_interval
        retry_after = error.retry_after if error is not None else None
        # Never faster than the normal pace, whatever the backoff's base.
        delay = self._backoff.delay(self.health.consecutive_failures, retry_after)
        return max(self.interval, delay)

    # -- waiting ----------------------------------------------------------------------------
    async def _wait_until(self, when: float) -> None:
        """Sleep until ``when`` on the monotonic clock, or until poll_now()."""
        while not self._wake.is_set():
            delay = when - self._mono()
            if delay <= 0:
                return
            sleeper = asyncio.ensure_future(self._sleep(delay))
            waker = asyncio.ensure_future(self._wake.wait())
            try:
                await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (sleeper, waker):
                    if not task.done():
                        task.cancel()
                await asyncio.gather(sleeper, waker, return_exceptions=True)
