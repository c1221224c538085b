"""The connection's health and the poller's results, shared by every front end.

Health is a fact about a moment: "live" is true only while the last good answer is
young. :meth:`Health.at` restates it for the moment a front end draws or prints, so a
service that hangs (no result arrives at all) turns "live" into "stale" by itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import Enum

from setui.core.errors import ImdsError
from setui.core.model import Document
from setui.core.tracker import Change

__all__ = ["MIN_STALE_AFTER", "ConnectionState", "Health", "PollResult", "stale_after"]

# Three intervals without a good answer make the document stale, but never sooner than
# this: one slow answer at a 0.2 s pace is not yet news.
MIN_STALE_AFTER = 3.0


def stale_after(interval: float) -> float:
    """Seconds after the last good answer at which what it said is no longer live."""
    return max(3 * interval, MIN_STALE_AFTER)


class ConnectionState(str, Enum):
    ENABLING = "enabling"  # first call pending: the service may take up to 2 minutes
    LIVE = "live"
    STALE = "stale"  # no failure yet, but the last good answer is too old to call live
    RETRYING = "retrying"  # failures, backing off; the reason is in Health.last_error
    UNREACHABLE = "unreachable"  # nothing answers at all

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Health:
    state: ConnectionState = ConnectionState.ENABLING
    last_success: datetime | None = None  # wall clock (UTC) of the last good answer
    last_success_mono: float | None = None  # monotonic time of the same, for ages
    consecutive_failures: int = 0
    last_error: str | None = None
    latency: float | None = None  # seconds, of the last answer
    first_call_pending: bool = True
    next_attempt_in: float | None = None  # seconds until the next try, when backing off
    clock_skew: float | None = None  # seconds the service's Date is ahead of this VM's clock
    next_attempt_mono: float | None = None  # monotonic time of the next try, when backing off
    stale_after: float = MIN_STALE_AFTER  # seconds: see :func:`stale_after`

    def age(self, mono_now: float) -> float | None:
        """Seconds since the last good answer, on the monotonic clock; None before one."""
        if self.last_success_mono is None:
            return None
        return max(0.0, mono_now - self.last_success_mono)

    def is_stale(self, mono_now: float) -> bool:
        """Whether the latest document is too old to be shown as what the service says."""
        age = self.age(mono_now)
        return age is not None and age > self.stale_after

    def at(self, mono_now: float) -> Health:
        """This health as it stands at ``mono_now``: live turns stale when the last good
        answer is older than ``stale_after``, and the wait for the next try counts down."""
        stale = self.state is ConnectionState.LIVE and self.is_stale(mono_now)
        if not stale and self.next_attempt_mono is None:
            return self
        return replace(self, state=ConnectionState.STALE if stale else self.state,
                       next_attempt_in=self.next_attempt_in if self.next_attempt_mono is None
                       else max(0.0, self.next_attempt_mono - mono_now))


@dataclass(frozen=True)
class PollResult:
    """What one poll attempt produced; ``document`` is the latest known document."""

    health: Health
    document: Document | None
    changes: tuple[Change, ...] = ()
    error: ImdsError | None = None
    fresh: bool = False  # this attempt got an answer (200 or 304)
    seen_at: datetime | None = None  # in the service's time when the VM clock is off
    gap: str | None = None  # why something may have been missed before this answer
    details: dict[str, object] = field(default_factory=dict)
    # The polls this result stands for: more than one when answers that said nothing new
    # were made on the quiet thread (core.quiet) and told in one result.
    polls: int = 1
