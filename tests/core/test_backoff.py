"""Backoff, Retry-After and the token bucket: pure timing arithmetic, on fake clocks."""

from __future__ import annotations

import asyncio
import math
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from setui.core.backoff import MAX_RETRY_AFTER, Backoff, parse_http_date, parse_retry_after
from setui.core.ratelimit import TokenBucket
from tests.support.faketime import FakeTime


def test_the_delay_doubles_up_to_the_cap() -> None:
    most = Backoff(base=0.5, cap=30.0, random=lambda: 1.0)
    assert [most.delay(n) for n in range(1, 9)] == [0.5, 1, 2, 4, 8, 16, 30, 30]
    assert most.delay(10_000) == 30.0  # no overflow however long the outage


def test_equal_jitter_never_retries_at_once_full_jitter_may() -> None:
    assert Backoff(random=lambda: 0.0).delay(3) == 1.0  # half of 2 s
    assert Backoff(random=lambda: 1.0).delay(3) == 2.0
    assert Backoff(jitter="full", random=lambda: 0.0).delay(3) == 0.0
    assert Backoff(jitter="full", random=lambda: 0.5).delay(3) == 1.0


def test_jitter_spreads_retries() -> None:
    import random

    rng = random.Random(1)
    delays = {round(Backoff(random=rng.random).delay(5), 6) for _ in range(50)}
    assert len(delays) > 40 and min(delays) >= 4.0 and max(delays) <= 8.0


def test_retry_after_is_a_floor_with_a_sane_ceiling() -> None:
    backoff = Backoff(base=0.5, cap=30.0, random=lambda: 0.0)
    assert backoff.delay(1, retry_after=7) == 7
    assert backoff.delay(8, retry_after=2) == 15  # the backoff is longer: keep it
    assert backoff.delay(1, retry_after=86_400) == MAX_RETRY_AFTER == 120
    for nonsense in (math.nan, math.inf, -5.0, 0.0):
        assert backoff.delay(1, retry_after=nonsense) == 0.25


def test_a_bad_random_source_cannot_break_the_bounds() -> None:
    assert Backoff(random=lambda: 7.0).delay(1) == 0.5
    assert Backoff(random=lambda: -3.0).delay(1) == 0.25


@pytest.mark.parametrize("kwargs", [{"base": 0}, {"base": -1}, {"cap": 0.1},
                                    {"base": math.nan}, {"jitter": "none"},
                                    {"max_retry_after": -1}])
def test_nonsense_settings_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        Backoff(**kwargs)  # type: ignore[arg-type]


@given(attempt=st.integers(-5, 10_000), roll=st.floats(0, 1),
       retry_after=st.none() | st.floats(allow_nan=True, allow_infinity=True))
def test_any_delay_is_finite_positive_and_bounded(attempt: int, roll: float,
                                                  retry_after: float | None) -> None:
    delay = Backoff(base=0.5, cap=30.0, random=lambda: roll).delay(attempt, retry_after)
    assert math.isfinite(delay) and 0.25 <= delay <= max(30.0, MAX_RETRY_AFTER)


def test_retry_after_in_seconds_or_as_a_date() -> None:
    now = datetime(2022, 4, 11, 22, 0, 0, tzinfo=timezone.utc)
    assert parse_retry_after("2", now) == 2.0
    assert parse_retry_after(" 1.5 ", now) == 1.5
    assert parse_retry_after("Mon, 11 Apr 2022 22:00:30 GMT", now) == 30.0
    assert parse_retry_after("Mon, 11 Apr 2022 21:00:00 GMT", now) == 0.0  # in the past
    later = datetime.now(timezone.utc) + timedelta(seconds=60)
    assert 55 < parse_retry_after(later.strftime("%a, %d %b %Y %H:%M:%S GMT")) <= 60
    for junk in (None, "", "soon", "-3", "1e9999x", "٣"):
        assert parse_retry_after(junk, now) is None


def test_http_dates_are_aware_utc_or_none() -> None:
    assert parse_http_date("Mon, 11 Apr 2022 22:26:58 GMT") == datetime(
        2022, 4, 11, 22, 26, 58, tzinfo=timezone.utc)
    assert parse_http_date("Mon, 11 Apr 2022 23:26:58 +0100") == datetime(
        2022, 4, 11, 22, 26, 58, tzinfo=timezone.utc)
    for junk in (None, "", "yesterday", "Mon, 99 Foo 2022 99:99:99 GMT"):
        assert parse_http_date(junk) is None


def test_the_bucket_allows_a_burst_then_the_rate() -> None:
    t = FakeTime()
    bucket = TokenBucket(4.0, 3, mono=t.mono)
    assert [bucket.try_acquire() for _ in range(4)] == [True, True, True, False]
    assert bucket.wait_time() == pytest.approx(0.25)
    t.now += 0.25
    assert bucket.try_acquire() and not bucket.try_acquire()
    t.now += 100  # a long pause refills to the burst, not beyond
    assert bucket.tokens == 3.0


def test_take_takes_a_token_or_says_how_long_to_wait() -> None:
    """The quiet polls' thread waits on its own, for as long as take() says."""
    t = FakeTime()
    bucket = TokenBucket(4.0, 3, mono=t.mono)
    assert [bucket.take() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.take() == pytest.approx(0.25)  # none taken: the wait is the caller's
    assert bucket.take() == pytest.approx(0.25)
    t.now += 0.25
    assert bucket.take() == 0.0


def test_polling_once_a_second_leaves_room_for_an_approval_at_once() -> None:
    t = FakeTime()
    bucket = TokenBucket(4.0, 3, mono=t.mono)
    for _ in range(60):  # a minute of polls
        assert bucket.try_acquire()
        t.now += 1.0
    assert bucket.tokens == 3.0
    # an approval right after a poll, and two retries of it, none waits
    assert bucket.try_acquire()
    assert bucket.try_acquire() and bucket.try_acquire()


async def test_acquire_waits_exactly_as_long_as_needed() -> None:
    t = FakeTime()
    bucket = TokenBucket(4.0, 3, mono=t.mono, sleep=t.sleep)
    waits = [await bucket.acquire() for _ in range(7)]
    assert waits[:3] == [0.0, 0.0, 0.0]
    assert waits[3:] == pytest.approx([0.25, 0.25, 0.25, 0.25])
    assert t.now == pytest.approx(1.0)  # 7 requests: 3 at once, then 4 a second


async def test_the_bucket_is_shared_fairly_between_tasks() -> None:
    t = FakeTime()
    bucket = TokenBucket(4.0, 3, mono=t.mono, sleep=t.sleep)
    taken: list[float] = []

    async def worker() -> None:
        for _ in range(5):
            await bucket.acquire()
            taken.append(t.now)
            await asyncio.sleep(0)

    await asyncio.gather(worker(), worker())
    assert len(taken) == 10
    for i in range(len(taken)):  # never more than 3 + 4/s in any window
        for j in range(i + 1, len(taken)):
            assert j - i + 1 <= 3 + 4 * (taken[j] - taken[i]) + 1e-9


def test_a_clock_going_back_adds_no_tokens() -> None:
    t = FakeTime()
    t.now = 100.0
    bucket = TokenBucket(4.0, 1, mono=t.mono)
    assert bucket.try_acquire()
    t.now = 50.0
    assert not bucket.try_acquire()


@pytest.mark.parametrize(("rate", "burst"), [(0, 3), (-1, 3), (math.inf, 3), (4, 0)])
def test_a_bucket_that_allows_nothing_is_refused(rate: float, burst: int) -> None:
    with pytest.raises(ValueError):
        TokenBucket(rate, burst)
