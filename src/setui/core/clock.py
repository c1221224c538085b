"""The time to count down against: the service's, carried forward on a monotonic clock.

NotBefore is UTC as the service sees it, so a countdown is only as good as the VM's
clock. ``ServiceClock`` anchors to the ``Date`` header of each answer when the VM's
clock is off by more than ``SKEW_THRESHOLD`` seconds, and in between advances on the
monotonic clock, so a countdown neither jumps nor stalls when someone changes the
system time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

__all__ = ["SKEW_THRESHOLD", "ServiceClock", "utc_now"]

# The Date header has one-second resolution and arrives a little late: below this the
# VM's clock is as good as the service's and is trusted.
SKEW_THRESHOLD = 2.0


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


class ServiceClock:
    """``now()`` is the best estimate of the service's time."""

    def __init__(self, wall: Callable[[], datetime] = utc_now,
                 mono: Callable[[], float] = time.monotonic) -> None:
        self._wall = wall
        self._mono = mono
        self._anchor_time = wall()
        self._anchor_mono = mono()
        self.skew: float | None = None  # service minus VM, seconds; None until known
        self.skewed_before = False

    def observe(self, server_date: datetime | None, received_mono: float | None = None) -> None:
        """Take a ``Date`` header seen at ``received_mono`` (default: now)."""
        if server_date is None:
            return
        received = self._mono() if received_mono is None else received_mono
        self.skewed_before = self.skewed
        wall_now = self._wall()
        mono_now = self._mono()
        # The VM's clock when the answer arrived, not now: it may be taken in later.
        self.skew = (server_date - wall_now).total_seconds() + (mono_now - received)
        if abs(self.skew) > SKEW_THRESHOLD:
            # The Date header has one-second resolution: re-anchoring on every answer
            # would move the clock back by up to a second now and then. Keep the carried
            # estimate while it falls within the second the header names.
            carried = self._anchor_time + timedelta(seconds=received - self._anchor_mono)
            offset = (carried - server_date).total_seconds()
            if not (self.skewed_before and 0 <= offset < 1):
                self._anchor_time, self._anchor_mono = server_date, received
        else:
            # The VM's clock agrees with the service (again): carry it forward from now,
            # so the monotonic estimate never drifts further than one answer's interval.
            self._anchor_time, self._anchor_mono = wall_now, mono_now

    @property
    def skewed(self) -> bool:
        return self.skew is not None and abs(self.skew) > SKEW_THRESHOLD

    def now(self) -> datetime:
        carried = self._anchor_time + timedelta(seconds=self._mono() - self._anchor_mono)
        if self.skewed:
            return carried
        # The wall clock itself while it agrees with the carried estimate (exact to the
        # second it shows); a step of the system clock makes them disagree, and then the
        # monotonic estimate counts on until the next answer says which one is right.
        wall = self._wall()
        if abs((wall - carried).total_seconds()) <= SKEW_THRESHOLD:
            return wall
        return carried
