"""Waiting in a test: on a condition, with a deadline that only turns a hang into a failure.

A test never sleeps for a fixed time and never asserts how long something took: a busy
machine makes any such number wrong. It waits until what it needs is true; the deadline
(``PATIENCE``) is generous because a wait that succeeds returns at once, so it costs
nothing on a quiet machine and saves a flaky failure on a loaded one. The dashboard's
tests wait through Pilot instead (``dashboard.wait_for``), with the same patience.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

__all__ = ["PATIENCE", "until", "wait_until"]

# Two cores shared by several suites can be slow; a wait that succeeds returns at once.
PATIENCE = 30.0


def wait_until(predicate: Callable[..., object], timeout: float = PATIENCE,
               what: str = "the condition") -> None:
    """Until ``predicate()`` holds, polling from this thread."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


async def until(predicate: Callable[..., object], timeout: float = PATIENCE,
                what: str = "the condition") -> None:
    """Until ``predicate()`` holds, letting the event loop run in between."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.01)
