"""Fake time for code that takes a clock and a sleep (``mono=``, ``sleep=``, ``wall=``).

A sleep moves the clock by what it was asked, at once, and is recorded: no real time
passes, and a test asserts on the waits the code chose (``slept``), never on how long
anything took. Pass the clock and the sleep together: a fake clock with a real sleep
waits for ever, a real clock with a fake sleep spins.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

__all__ = ["WALL", "FakeTime"]

WALL = datetime(2022, 4, 11, 22, 0, tzinfo=timezone.utc)  # the documents' example day


class FakeTime:
    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self.slept: list[float] = []

    def mono(self) -> float:
        return self.now

    def wall(self) -> datetime:
        return WALL + timedelta(seconds=self.now)

    def advance(self, seconds: float) -> None:
        self.now += seconds

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += max(seconds, 0.0)
        await asyncio.sleep(0)  # a real sleep would let other tasks run
