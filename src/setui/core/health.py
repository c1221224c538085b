"""The connection's health and the poller's results, shared by every front end."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum

from setui.core.errors import ImdsError
from setui.core.model import Document
from setui.core.tracker import Change

__all__ = ["ConnectionState", "Health", "PollResult"]


class ConnectionState(str, Enum):
    ENABLING = "enabling"  # first call pending: the service may take up to 2 minutes
    LIVE = "live"
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


@dataclass(frozen=True)
class PollResult:
    """What one poll attempt produced; ``document`` is the latest known document."""

    health: Health
    document: Document | None
    changes: tuple[Change, ...] = ()
    error: ImdsError | None = None
    fresh: bool = False  # this attempt got an answer (200 or 304)
    seen_at: datetime | None = None
    details: dict[str, object] = field(default_factory=dict)
