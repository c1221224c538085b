"""The poller under the faults whose pacing and cost the matrix cannot see from outside:
Retry-After with and without, and the memory a 50 MB answer costs (over loopback HTTP).
The poller's waits are on fake time (tests/support/faketime.py): asserted as chosen, not waited."""

from __future__ import annotations

import asyncio
import tracemalloc
from collections.abc import AsyncIterator

import pytest

from setui.core.backoff import Backoff
from setui.core.client import ImdsClient
from setui.core.health import ConnectionState, PollResult
from setui.core.poller import Poller
from setui.emulator.faults import Faults, parse_faults
from setui.emulator.server import Emulator
from tests.support.faketime import FakeTime
from tests.support.faultmatrix import BEFORE_ID, scenario


async def _next(results: AsyncIterator[PollResult], timeout: float = 15.0) -> PollResult:
    return await asyncio.wait_for(results.__anext__(), timeout)


async def test_retry_after_sets_the_next_attempt_and_is_obeyed() -> None:
    t = FakeTime()
    with Emulator(scenario()) as emulator:
        async with ImdsClient(emulator.url, rate=50.0, burst=20) as client:
            # roll 0: the backoff alone would wait half its ceiling, 0.25 s
            poller = Poller(client, interval=0.2, backoff=Backoff(random=lambda: 0.0),
                            mono=t.mono, sleep=t.sleep, wall=t.wall)
            results = poller.results()
            assert (await _next(results)).fresh
            emulator.set_faults(parse_faults("429=1,retry-after=2"))
            failed = await _next(results)
            assert failed.error is not None and failed.error.retry_after == 2
            assert failed.health.next_attempt_in is not None
            assert failed.health.next_attempt_in >= 2.0
            emulator.set_faults(Faults())
            waited = len(t.slept)
            again = await _next(results)
            assert again.fresh and again.health.state is ConnectionState.LIVE
            assert sum(t.slept[waited:]) >= 2.0  # it waited what the service asked
            await results.aclose()  # type: ignore[attr-defined]  # an async generator


async def test_without_retry_after_it_backs_off_more_each_time_then_recovers() -> None:
    t = FakeTime()
    with Emulator(scenario(), faults=None) as emulator:
        async with ImdsClient(emulator.url, rate=50.0, burst=20) as client:
            poller = Poller(client, interval=0.2, backoff=Backoff(random=lambda: 1.0),
                            mono=t.mono, sleep=t.sleep, wall=t.wall)
            results = poller.results()
            assert (await _next(results)).fresh
            emulator.set_faults(parse_faults("429=1"))
            waits = []
            for _ in range(3):
                failed = await _next(results)
                assert failed.error is not None and failed.error.retry_after is None
                assert "backing off" in failed.error.message
                waits.append(failed.health.next_attempt_in)
            # roll 1: exactly the ceilings, 0.5 s, 1 s, 2 s, each waited
            assert waits == pytest.approx([0.5, 1.0, 2.0])
            assert t.slept[-2:] == pytest.approx([0.5, 1.0])
            emulator.set_faults(Faults())
            again = await _next(results)
            assert again.fresh and again.health.consecutive_failures == 0
            assert again.document is not None
            assert [e.event_id for e in again.document.events] == [BEFORE_ID]
            await results.aclose()  # type: ignore[attr-defined]  # an async generator


async def test_50_mb_answers_are_refused_in_words_and_memory_stays_bounded() -> None:
    with Emulator(scenario()) as emulator:
        async with ImdsClient(emulator.url, rate=50.0, burst=20) as client:
            poller = Poller(client, interval=0.2, backoff=Backoff(base=0.2, cap=0.2))
            results = poller.results()
            good = await _next(results)
            assert good.fresh
            emulator.set_faults(parse_faults("big=50"))
            tracemalloc.start()
            try:
                for _ in range(3):  # three 50 MB answers: 150 MB if they were read
                    failed = await _next(results)
                    assert failed.error is not None and failed.error.kind == "too-large"
                    assert "more than the 4.0 MiB" in failed.error.message
                    assert failed.document == good.document  # the last good one is kept
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            assert peak < 20 * 1024 * 1024, peak
            emulator.set_faults(Faults())
            assert (await _next(results)).fresh
            await results.aclose()  # type: ignore[attr-defined]  # an async generator
