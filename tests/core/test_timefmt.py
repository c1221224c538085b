"""The one way setui writes time: countdowns, clock times, durations."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timezone

import pytest

from setui.core.timefmt import (
    age,
    clock,
    countdown,
    duration,
    iso,
    local_beside,
    restate,
    stamp,
    utc_time,
)

MOMENT = datetime(2026, 11, 24, 3, 12, 5, tzinfo=timezone.utc)


@pytest.fixture
def zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "Europe/Amsterdam")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize(("seconds", "text"), [
    (598, "T-9:58"), (597.2, "T-9:58"), (0.4, "T-0:01"), (3723, "T-1:02:03"),
    (86400 + 9 * 3600 + 59, "T-1d 09h"),
])
def test_countdowns(seconds: float, text: str) -> None:
    assert countdown(seconds) == text


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0s"), (42, "42s"), (185, "3m 05s"), (7500, "2h 05m"), (86400 + 9 * 3600, "1d 09h"),
    (-5, "0s"),
])
def test_durations(seconds: float, text: str) -> None:
    assert duration(seconds) == text


def test_an_age_does_not_flicker_under_two_seconds() -> None:
    assert (age(0.2), age(1.99), age(2), age(185)) == ("<2s", "<2s", "2s", "3m 05s")


def test_a_clock_face_for_what_counts() -> None:
    assert (clock(42), clock(872), clock(3723), clock(6 * 86400 + 23 * 3600)) == (
        "0:42", "14:32", "1:02:03", "6d 23h")


def test_clock_times_are_utc_with_local_beside_only_when_the_zone_differs(
        zone: None, monkeypatch: pytest.MonkeyPatch) -> None:
    assert stamp(MOMENT) == "2026-11-24 03:12:05 UTC (04:12:05 CET)"
    assert stamp(MOMENT, date=False) == "03:12:05 UTC (04:12:05 CET)"
    assert stamp(MOMENT, local=False) == "2026-11-24 03:12:05 UTC"
    late = datetime(2026, 11, 24, 23, 30, tzinfo=timezone.utc)
    assert local_beside(late) == " (2026-11-25 00:30:00 CET)"  # another day: the date too
    assert utc_time(MOMENT) == "03:12:05"
    assert stamp(None) == "-"
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    assert stamp(MOMENT) == "2026-11-24 03:12:05 UTC"


def test_machines_read_iso_8601_utc_with_z() -> None:
    assert iso(MOMENT) == "2026-11-24T03:12:05Z"
    assert iso(MOMENT.replace(microsecond=4780)) == "2026-11-24T03:12:05.004780Z"
    assert iso(None) is None


def test_words_an_older_setui_stored_are_read_the_one_way() -> None:
    stored = ("NotBefore Tue, 24 Nov 2026 03:12:05 GMT -> Tue, 24 Nov 2026 03:20:00 GMT; "
              "a description may say GMT or Tue, 99 Nov 2026 03:12:05 GMT")
    assert restate(stored) == ("NotBefore 2026-11-24 03:12:05 UTC -> 2026-11-24 03:20:00 UTC; "
                               "a description may say GMT or Tue, 99 Nov 2026 03:12:05 GMT")
    words = "started 3m before its NotBefore"
    assert restate(words) is words
