"""The notice an event gave, against the documented minimum for its type (core.notice)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from setui.core.notice import (
    SLACK,
    measure_notice,
    minimum_notice,
    notice_words,
    unwatched,
)

SEEN = datetime(2026, 11, 25, 19, 0, tzinfo=timezone.utc)


def at(seconds: float) -> datetime:
    return SEEN + timedelta(seconds=seconds)


@pytest.mark.parametrize(("kind", "minimum"), [
    ("Freeze", 900), ("Reboot", 900), ("Redeploy", 600), ("Preempt", 30), ("Terminate", 300)])
def test_each_type_has_the_documented_minimum(kind: str, minimum: float) -> None:
    assert minimum_notice(kind) == minimum


def test_a_terminate_is_held_against_the_configured_notice() -> None:
    notice = measure_notice("Terminate", first_seen=SEEN, announced=at(600),
                            appeared_started=False, unseen=None, terminate=900)
    assert (notice.minimum, notice.short) == (900, True)
    assert "LESS than the 15m 00s documented for a Terminate" in notice_words(notice)


def test_a_type_setui_does_not_know_has_a_figure_but_no_verdict() -> None:
    notice = measure_notice("Hibernate", first_seen=SEEN, announced=at(60),
                            appeared_started=False, unseen=None)
    assert (notice.seconds, notice.minimum, notice.short) == (60, None, None)
    assert notice_words(notice) == "1m 00s (no documented minimum for a Hibernate)"


def test_a_freeze_seen_five_minutes_ahead_is_short_and_started_is_measured() -> None:
    notice = measure_notice("Freeze", first_seen=SEEN, announced=at(300),
                            appeared_started=False, unseen=None, started_at=at(290),
                            started_exact=True)
    assert (notice.seconds, notice.to_start, notice.short) == (300, 290, True)
    assert notice_words(notice) == ("5m 00s: LESS than the 15m 00s documented for a Freeze; "
                                    "started 4m 50s after it was first seen")


def test_the_first_poll_and_the_whole_second_are_not_called_short() -> None:
    # Announced exactly 15 min ahead, seen a poll later, NotBefore rounded to the second.
    notice = measure_notice("Reboot", first_seen=SEEN, announced=at(900 - SLACK + 0.1),
                            appeared_started=False, unseen=None)
    assert notice.short is False
    assert measure_notice("Reboot", first_seen=SEEN, announced=at(900 - SLACK - 0.1),
                          appeared_started=False, unseen=None).short is True


def test_a_start_seen_across_a_gap_gives_no_time_to_start() -> None:
    notice = measure_notice("Reboot", first_seen=SEEN, announced=at(1000),
                            appeared_started=False, unseen=None, started_at=at(990),
                            started_exact=False)
    assert notice.to_start is None and "started" not in notice_words(notice)


def test_an_event_already_there_has_an_unknown_notice_never_a_figure() -> None:
    why = unwatched(initial=True, certain=True)
    notice = measure_notice("Freeze", first_seen=SEEN, announced=at(60),
                            appeared_started=False, unseen=why)
    assert (notice.seconds, notice.to_start, notice.short) == (None, None, None)
    assert notice_words(notice) == ("not known: it was already in the document when "
                                    "recording began")


def test_an_event_first_seen_across_a_gap_has_an_unknown_notice() -> None:
    why = unwatched(initial=False, certain=False)
    assert why is not None and "gap" in why
    assert unwatched(initial=False, certain=True) is None
    assert measure_notice("Freeze", first_seen=SEEN, announced=at(60),
                          appeared_started=False, unseen=why).seconds is None


def test_an_event_that_appeared_started_had_none() -> None:
    notice = measure_notice("Reboot", first_seen=SEEN, announced=None, appeared_started=True,
                            unseen=None)
    assert (notice.seconds, notice.short) == (0, True)
    assert notice_words(notice).startswith("none: it appeared already Started")


def test_an_event_first_seen_after_its_not_before_is_told_so() -> None:
    notice = measure_notice("Preempt", first_seen=SEEN, announced=at(-5),
                            appeared_started=False, unseen=None)
    assert notice.short is True
    assert notice_words(notice) == "none: first seen 5s after its NotBefore"
