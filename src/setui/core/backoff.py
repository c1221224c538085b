"""How long to wait before trying the metadata service again.

Capped exponential backoff with jitter, so that a fleet of VMs that lost the service
at the same moment does not come back in lock-step, and so that one VM does not burn
its ~5 requests/s allowance hammering a service that just said "later".
"""

from __future__ import annotations

import math
import random as _random
from collections.abc import Callable
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Literal

from setui.core.clock import utc_now

__all__ = ["APPROVAL_DEADLINE", "MAX_RETRY_AFTER", "Backoff", "parse_http_date",
           "parse_retry_after"]

# The longest an approval is tried for, from its first try: the service documents 410 as
# "retry after some time, for up to 70 seconds".
APPROVAL_DEADLINE = 70.0

# A Retry-After beyond this is treated as this: a misbehaving proxy saying "come back
# tomorrow" must not silence the dashboard for a day.
MAX_RETRY_AFTER = 120.0
# 2**64 seconds is already far beyond any cap; bounding the exponent avoids overflow.
_MAX_EXPONENT = 64


class Backoff:
    """``delay(attempt)`` for the 1st, 2nd, ... retry: ``min(cap, base * 2**(attempt-1))``
    with jitter.

    ``jitter="equal"`` (default) waits between half and all of that, so a retry is never
    immediate; ``"full"`` waits anywhere from 0 to all of it (best spread, but may retry
    at once). A Retry-After from the service is a floor: never retry sooner than it says
    (up to ``max_retry_after``).
    """

    def __init__(self, base: float = 0.5, cap: float = 30.0, *,
                 jitter: Literal["equal", "full"] = "equal",
                 max_retry_after: float = MAX_RETRY_AFTER,
                 random: Callable[[], float] = _random.random) -> None:
        if not (math.isfinite(base) and base > 0):
            raise ValueError(f"base must be a positive number of seconds, got {base}")
        if not (math.isfinite(cap) and cap >= base):
            raise ValueError(f"cap must be at least base ({base} s), got {cap}")
        if jitter not in ("equal", "full"):
            raise ValueError(f"jitter must be 'equal' or 'full', got {jitter!r}")
        if not (math.isfinite(max_retry_after) and max_retry_after >= 0):
            raise ValueError(f"max_retry_after must be 0 or more seconds, got {max_retry_after}")
        self.base = base
        self.cap = cap
        self.jitter = jitter
        self.max_retry_after = max_retry_after
        self._random = random

    def ceiling(self, attempt: int) -> float:
        """The un-jittered delay of retry number ``attempt`` (1-based)."""
        exponent = min(max(attempt, 1) - 1, _MAX_EXPONENT)
        return min(self.cap, self.base * 2.0 ** exponent)

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``attempt`` (1 = the first retry)."""
        ceiling = self.ceiling(attempt)
        roll = min(max(self._random(), 0.0), 1.0)  # a bad random source cannot break it
        wait = ceiling * (0.5 + roll / 2) if self.jitter == "equal" else ceiling * roll
        if retry_after is not None and math.isfinite(retry_after) and retry_after > 0:
            wait = max(wait, min(retry_after, self.max_retry_after))
        return wait


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """``Retry-After`` as seconds from now: delta-seconds or an HTTP-date (RFC 9110).

    None when absent or unreadable; a date in the past is 0.
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    if text.isascii() and text.replace(".", "", 1).isdigit():
        seconds = float(text)
        return seconds if math.isfinite(seconds) else None
    when = parse_http_date(text)
    if when is None:
        return None
    reference = now if now is not None else utc_now()
    return max(0.0, (when - reference).total_seconds())


def parse_http_date(value: str | None) -> datetime | None:
    """An HTTP-date (``Date``, ``Retry-After``) as an aware UTC datetime; None if unreadable."""
    if not value:
        return None
    try:
        parsed = parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.astimezone(timezone.utc)
