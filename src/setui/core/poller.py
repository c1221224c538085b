"""Poll the events document on a fixed grid, one request at a time, and say how it went.

Azure recommends polling once a second because notice can be as short as 30 s. The
poller keeps that pace without drift (ticks at ``start + k * interval``), never has two
requests in flight, skips the ticks a slow answer missed instead of catching up in a
burst, backs off when the service fails, and turns every outcome, even a bug, into a
:class:`PollResult`; the loop itself never dies until it is cancelled.

Polled quietly (``quiet_ok``: the agent, all day), the steady poll runs on a thread
of its own (core.quiet) while the consumers have nothing to do with an unchanged answer:
the loop then hears of the answers that say nothing new only every :data:`QUIET_SPAN`
(one result standing for them all, ``PollResult.polls``), and of anything else at once.

It also owns what only the place that polls can know: the service's clock (times are
stamped in it when the VM's clock is off), whether an answer came after a gap (failed
or late polls, which the tracker must not read as "nothing happened"), and when the
backoff must not grow because an event of this VM is close (``urgent``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from datetime import datetime, timedelta

from setui.core.backoff import Backoff, parse_http_date
from setui.core.client import FetchResult, ImdsClient
from setui.core.clock import ServiceClock, utc_now
from setui.core.errors import ImdsError, Unreachable
from setui.core.health import ConnectionState, Health, PollResult, stale_after
from setui.core.model import Document
from setui.core.pace import check_interval
from setui.core.quiet import Exchange, QuietPolls
from setui.core.tracker import Change, Tracker

__all__ = ["QUIET_SPAN", "SLOW_INTERVAL", "URGENT_CAP", "Poller"]

# While an event of this VM is close or under way, no wait between tries is longer than
# max(interval, this), whatever the backoff says (Retry-After still wins).
URGENT_CAP = 5.0
# After an answer that retrying cannot fix (400, 404, 405: a wrong endpoint or version),
# keep asking slowly: the operator may fix things, and the dashboard should notice.
SLOW_INTERVAL = 10.0
# Polled quietly, a result at least this often even when nothing is new: what the
# consumers keep on their own clocks (the recorder's touch, the API's ticks, a metrics
# file) never waits longer for the time of the last answer than this.
QUIET_SPAN = 10.0
# A bug's traceback, below the ``setui`` logger: where setui.system.logs.configure sends it (the
# agent's stderr, in journald's priorities under the journal).
_log = logging.getLogger(__name__)


class Poller:
    """``async for result in poller.results()``: one PollResult per attempt."""

    def __init__(self, client: ImdsClient, *, interval: float = 1.0,
                 tracker: Tracker | None = None, wall: Callable[[], datetime] = utc_now,
                 mono: Callable[[], float] = time.monotonic, backoff: Backoff | None = None,
                 sleep: Callable[[float], Awaitable[None]] | None = None,
                 slow_interval: float = SLOW_INTERVAL,
                 urgent: Callable[[], bool] | None = None,
                 approved: Callable[[], frozenset[str]] | None = None,
                 clock: ServiceClock | None = None,
                 quiet_ok: Callable[[], bool] | None = None) -> None:
        self.client = client
        self.interval = check_interval(interval)
        self.slow_interval = max(self.interval, slow_interval)
        self.tracker = tracker if tracker is not None else Tracker()
        self.clock = clock if clock is not None else ServiceClock(wall=wall, mono=mono)
        self.health = Health(first_call_pending=client.first_call_pending,
                             stale_after=stale_after(self.interval))
        self.document: Document | None = None
        self._wall = wall
        self._mono = mono
        self._urgent = urgent or (lambda: False)
        self._approved = approved or frozenset
        # Since the last good answer: how many tries failed, and when that answer came.
        self._failed_since = 0
        self._last_good_mono: float | None = None
        self._backoff = backoff or Backoff()
        self._sleep = sleep
        self._wake = asyncio.Event()
        self._waiter: asyncio.Future[None] | None = None
        self._running = False
        self._attempts = 0
        # Quiet polls: allowed while quiet_ok() says the consumers need no unchanged
        # answer; the thread's count of quiet answers taken into health, and into results.
        self._quiet_ok = quiet_ok
        self._quiet: QuietPolls | None = None
        self._quiet_folded = 0
        self._quiet_told = 0
        self._answered = 0  # good answers read on the loop (quiet ones are the thread's)
        self._quiet_before = 0  # quiet answers of the threads of earlier runs

    def poll_now(self) -> None:
        """Poll at once (the dashboard's ``r`` key), even during a backoff wait. A call
        while a request is in flight is folded into that request. Call it from the
        loop's thread."""
        self._wake.set()
        if self._waiter is not None:
            _resolve(self._waiter)
        if self._quiet is not None:
            self._quiet.poll_now()

    def want_next(self) -> None:
        """The next answer is wanted whatever it says (something the consumers wait
        for changed between polls); the pace stays. Call it from the loop's thread."""
        if self._quiet is not None:
            self._quiet.deliver_next()

    async def results(self) -> AsyncIterator[PollResult]:
        """Poll until cancelled; yields after every attempt, failed ones included."""
        if self._running:
            raise RuntimeError("this poller is already running: one loop, one request at a time")
        self._running = True
        try:
            start = self._mono()
            next_at = start
            while True:
                if self._may_be_quiet():
                    result = await self._quietly(next_at, start)
                else:
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
                    self.health = replace(self.health, next_attempt_in=next_at - now,
                                          next_attempt_mono=next_at)
                    result = replace(result, health=self.health)
                yield result
        finally:
            self._running = False
            if self._quiet is not None:
                self._quiet.close()
                latest = self._quiet.latest
                self._quiet_before += latest.polls if latest is not None else 0
                self._quiet = None
                self._quiet_folded = self._quiet_told = 0

    # -- quietly ---------------------------------------------------------------------------
    def _may_be_quiet(self) -> bool:
        """Polled quietly, live, with nothing asked of the next poll but its answer."""
        return self._quiet_ok is not None and self.health.state is ConnectionState.LIVE \
            and self.document is not None and not self._wake.is_set() and self._quiet_ok()

    async def _quietly(self, next_at: float, start: float) -> PollResult:
        """Polls on the thread from ``next_at`` until one is news or the span is over:
        the news read here, else one result for the quiet answers."""
        made: Exchange | None = None
        try:
            repeat = self.client.repeat()
            if repeat is not None:
                if self._quiet is None:
                    self._quiet = QuietPolls(mono=self._mono)
                made = await self._quiet.run(
                    repeat, first_at=next_at, start=start, interval=self.interval,
                    deliver_by=max(next_at, self._mono()) + QUIET_SPAN)
        except Exception:  # a bug: polling goes on, on the loop, from now on
            _log.exception("quiet polls failed; polling on the event loop from now on")
            self._quiet_ok = None
            repeat = None
        if repeat is None:  # nothing to compare with (or the bug above): on the loop
            await self._wait_until(next_at)
            return await self._attempt()
        assert self._quiet is not None
        self.fold_quiet()
        latest = self._quiet.latest
        quiet = latest.polls - self._quiet_told if latest is not None else 0
        self._quiet_told += quiet
        self._attempts += quiet
        if made is not None:
            result = await self._attempt(made)
            return replace(result, polls=result.polls + quiet)
        return PollResult(self.health, self.document, (), None, fresh=True,
                          seen_at=self.health.last_success, polls=quiet,
                          details={"status": 200, "attempt": self._attempts,
                                   "unchanged": True})

    def answers(self) -> int:
        """Good answers so far, quiet ones included, each counted once when it came:
        what a count of polls shows at any moment. Read it from the loop's thread."""
        latest = self._quiet.latest if self._quiet is not None else None
        return self._answered + self._quiet_before + (latest.polls if latest else 0)

    def newest_answer(self) -> float | None:
        """The monotonic time of the newest good answer, a quiet one included."""
        latest = self._quiet.latest if self._quiet is not None else None
        told = self.health.last_success_mono
        if latest is None:
            return told
        return latest.done_mono if told is None else max(told, latest.done_mono)

    def fold_quiet(self) -> bool:
        """Take into :attr:`health` (and the service's clock) the quiet answers the
        thread had since this was last asked; True if there were any. Readers of the
        health call it first: between results, live is the thread's to say."""
        latest = self._quiet.latest if self._quiet is not None else None
        if latest is None or latest.polls == self._quiet_folded:
            return False
        self._quiet_folded = latest.polls
        self.clock.observe(parse_http_date(latest.date), latest.head_mono)
        self._last_good_mono = latest.done_mono
        ago = max(0.0, self._mono() - latest.done_mono)
        self.health = replace(self.health, last_success=self.clock.now() - timedelta(seconds=ago),
                              last_success_mono=latest.done_mono, latency=latest.latency,
                              clock_skew=self.clock.skew)
        return True

    # -- one attempt ------------------------------------------------------------------------
    async def _attempt(self, made: Exchange | None = None) -> PollResult:
        self._attempts += 1
        try:
            fetched = await (self.client.fetch() if made is None else self.client.fetch(made))
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

    def now(self) -> datetime:
        """The service's time as best known: every time this poller stamps is in it."""
        return self.clock.now()

    def _success(self, fetched: FetchResult) -> PollResult:
        if fetched.server_date is not None:
            self.clock.observe(fetched.server_date, fetched.received_mono)
        seen_at = self.clock.now()
        mono = self._mono()
        gap = self._gap(mono)
        self._failed_since = 0
        self._last_good_mono = mono
        self._answered += 1
        document = fetched.document
        changes: tuple[Change, ...] = ()
        # The very document of the last answer (the client hands back the same object
        # for the same bytes) changes nothing: the tracker would compare it whole to
        # itself and find so. A gap before it hid nothing either: the document before and
        # after is one, whatever came between (the tracker says [] then too).
        unchanged = document is None or document is self.document
        if not unchanged:
            assert document is not None
            changes = tuple(self.tracker.update(document, seen_at, gap=gap,
                                                approved=self._approved()))
            self.document = document
        self.health = Health(
            state=ConnectionState.LIVE,
            last_success=seen_at,
            last_success_mono=mono,
            consecutive_failures=0,
            last_error=None,
            latency=fetched.latency,
            first_call_pending=self.client.first_call_pending,
            next_attempt_in=None,
            clock_skew=self.clock.skew,
            stale_after=self.health.stale_after,
        )
        return PollResult(self.health, self.document, changes, None, fresh=True,
                          seen_at=seen_at, gap=gap if document is not None else None,
                          details={"status": fetched.status, "attempt": self._attempts,
                                   "unchanged": unchanged})

    def _gap(self, mono: float) -> str | None:
        """Why this answer may not follow the last one directly, if it may not."""
        if self._last_good_mono is None:
            return None  # the first answer: the tracker knows it has no before
        reasons = []
        if self._failed_since:
            reasons.append(f"{self._failed_since} poll{'s' if self._failed_since > 1 else ''} "
                           "failed")
        waited = mono - self._last_good_mono
        # On the grid an answer follows the last one after about one interval; two
        # intervals and a second more means a poll that should have been made was not.
        if waited > 2 * self.interval + 1.0:
            reasons.append(f"no answer for {waited:.0f} s")
        return " and ".join(reasons) if reasons else None

    def _failure(self, error: ImdsError) -> PollResult:
        self._failed_since += 1
        state = ConnectionState.UNREACHABLE if isinstance(error, Unreachable) \
            else ConnectionState.RETRYING
        self.health = replace(
            self.health, state=state, consecutive_failures=self.health.consecutive_failures + 1,
            last_error=error.message, first_call_pending=self.client.first_call_pending,
            next_attempt_in=None)
        return PollResult(self.health, self.document, (), error, fresh=False,
                          details={"status": error.status, "kind": error.kind,
                                   "attempt": self._attempts})

    def _retry_delay(self, error: ImdsError | None) -> float:
        retry_after = error.retry_after if error is not None else None
        if error is not None and not error.retryable:
            delay = self.slow_interval
        else:
            delay = self._backoff.delay(self.health.consecutive_failures, retry_after)
        if self._urgent():
            # An event of this VM is close or under way: never back off into blindness.
            delay = min(delay, max(self.interval, URGENT_CAP))
            if retry_after is not None and math.isfinite(retry_after) and retry_after > 0:
                delay = max(delay, min(retry_after, self._backoff.max_retry_after))
        # Never faster than the normal pace, whatever the backoff's base.
        return max(self.interval, delay)

    # -- waiting ----------------------------------------------------------------------------
    async def _wait_until(self, when: float) -> None:
        """Sleep until ``when`` on the monotonic clock, or until poll_now().

        One future that the timer or poll_now() resolves, whichever comes first: no task
        a wait. A sleep and an event raced in two tasks took three times the turns of
        the loop, and the loop's turns were a third of an idle poll's CPU."""
        loop = asyncio.get_running_loop()
        while not self._wake.is_set():
            delay = when - self._mono()
            if delay <= 0:
                return
            self._waiter = waiter = loop.create_future()
            if self._sleep is None:
                timer: asyncio.Handle | asyncio.Future[None] = \
                    loop.call_later(delay, _resolve, waiter)
            else:  # a sleep of the caller's (tests' fake time)
                timer = asyncio.ensure_future(self._sleep(delay))
                timer.add_done_callback(functools.partial(_resolve, waiter))
            try:
                await waiter
            finally:
                self._waiter = None
                timer.cancel()


def _resolve(waiter: asyncio.Future[None], _done: object = None) -> None:
    # _done: the finished sleep, when this is its done callback.
    if not waiter.done():
        waiter.set_result(None)
