"""A token bucket that keeps one VM well under the metadata service's rate limit.

IMDS answers 429 beyond about 5 requests per second per VM, approvals included. The
client takes one token per HTTP request (polls, approvals and their retries alike), so
no mix of them can exceed ``rate`` per second for long; ``burst`` lets an approval go
out at once even right after a poll, because polling once a second leaves the bucket
full. The quiet polls' thread (core.quiet) takes its tokens from the same bucket:
its methods may be called from any thread.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Awaitable, Callable

__all__ = ["TokenBucket"]


class TokenBucket:
    """``await acquire()`` returns when a request may be sent; it takes one token."""

    def __init__(self, rate: float = 4.0, burst: int = 3, *,
                 mono: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        if not (math.isfinite(rate) and rate > 0):
            raise ValueError(f"rate must be a positive number of requests per second, got {rate}")
        if burst < 1:
            raise ValueError(f"burst must be at least 1, got {burst}")
        self.rate = float(rate)
        self.burst = int(burst)
        self._mono = mono
        self._sleep = sleep
        self._tokens = float(burst)
        self._stamp = mono()
        self._lock = threading.Lock()

    def _refill(self) -> None:
        now = self._mono()
        elapsed = max(0.0, now - self._stamp)  # a clock that went back adds nothing
        self._tokens = min(float(self.burst), self._tokens + elapsed * self.rate)
        self._stamp = now

    @property
    def tokens(self) -> float:
        """Tokens available now (fractional while refilling)."""
        with self._lock:
            self._refill()
            return self._tokens

    def try_acquire(self) -> bool:
        """Take a token if one is there; never waits."""
        return self.take() == 0.0

    def take(self) -> float:
        """Take a token and return 0, or return the seconds until one will be there
        (taking none): a wait of the caller's own, on whatever thread it runs."""
        with self._lock:
            self._refill()
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return 0.0
            return (1.0 - self._tokens) / self.rate

    def wait_time(self) -> float:
        """Seconds until a token will be there (0 if one is there now)."""
        with self._lock:
            self._refill()
            return 0.0 if self._tokens >= 1.0 else (1.0 - self._tokens) / self.rate

    async def acquire(self) -> float:
        """Wait for a token and take it; returns the seconds spent waiting."""
        waited = 0.0
        # A loop rather than one sleep: another task may take the token we waited for.
        while not self.try_acquire():
            pause = self.wait_time()
            await self._sleep(pause)
            waited += pause
        return waited
