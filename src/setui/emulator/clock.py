"""A clock tests move by hand, so documents and countdowns are reproducible."""

from __future__ import annotations

import threading

__all__ = ["DEFAULT_START", "ManualClock"]

# Mon, 11 Apr 2022 22:00:00 GMT: the day of the documents' live-migration example.
DEFAULT_START = 1_649_714_400.0


class ManualClock:
    """Callable returning POSIX seconds; only ``advance`` and ``set`` change it."""

    def __init__(self, start: float = DEFAULT_START) -> None:
        self._now = float(start)
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        """Move forward (or back, if negative) and return the new time."""
        with self._lock:
            self._now += seconds
            return self._now

    def set(self, t: float) -> None:
        with self._lock:
            self._now = float(t)

    def __repr__(self) -> str:
        return f"ManualClock({self._now!r})"
