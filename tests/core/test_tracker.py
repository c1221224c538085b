"""The tracker on the documented incarnation sequence and each documented exception."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from setui.core.model import Document, parse_document
from setui.core.tracker import Change, ChangeKind, Tracker, summarize
from tests.support.examples import examples

SEED_DIR = Path(__file__).parent.parent / "data" / "seed_documents"
T0 = datetime(2026, 11, 22, 10, 0, tzinfo=timezone.utc)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def event(event_id: str = "e1", *, status: str = "Scheduled", not_before: str | None = None,
          etype: str = "Reboot", resources: tuple[str, ...] = ("vm1",), **extra: Any
          ) -> dict[str, Any]:
    if not_before is None:
        not_before = "" if status == "Started" else "Mon, 11 Apr 2022 22:26:58 GMT"
    item = {"EventId": event_id, "EventType": etype, "EventStatus": status,
            "Resources": list(resources), "NotBefore": not_before}
    item.update(extra)
    return item


def doc(incarnation: int, *events: dict[str, Any]) -> Document:
    return parse_document({"DocumentIncarnation": incarnation, "Events": list(events)})


def kinds(changes: Iterable[Change]) -> list[str]:
    return [c.kind.value for c in changes]


def test_documented_sequence_one_to_four() -> None:
    tracker = Tracker()
    story = []
    for n in range(1, 5):
        document = parse_document((SEED_DIR / f"seed000_incarnation{n}.json").read_bytes())
        story.append(tracker.update(document, at(n)))
    assert story[0] == []
    assert kinds(story[1]) == ["appeared"]
    assert kinds(story[2]) == ["started"]
    assert kinds(story[3]) == ["completed"]
    appeared, started, completed = story[1][0], story[2][0], story[3][0]
    assert appeared.incarnation == 2 and appeared.seen_at == at(2)
    assert appeared.event is not None and appeared.event.event_id.startswith("C7061BAC")
    assert started.previous is not None and started.previous.is_scheduled
    assert started.event is not None and started.event.is_started
    assert completed.incarnation == 4 and completed.event is not None
    assert completed.event.is_started  # the snapshot is the event as last seen


def test_same_incarnation_same_content_yields_nothing() -> None:
    tracker = Tracker()
    tracker.update(doc(2, event()), at(0))
    for i in range(5):
        assert tracker.update(doc(2, event()), at(i + 1)) == []


FUTURE = "Sun, 22 Nov 2026 10:15:00 GMT"  # 15 minutes after T0
PAST = "Sun, 22 Nov 2026 09:59:00 GMT"


def test_cancelled_when_removed_while_scheduled() -> None:
    tracker = Tracker()
    tracker.update(doc(1, event(not_before=FUTURE)), at(0))
    changes = tracker.update(doc(2), at(1))
    assert kinds(changes) == ["cancelled"]
    assert changes[0].event_id == "e1" and changes[0].certain


def test_removed_after_its_not_before_is_gone_not_cancelled() -> None:
    tracker = Tracker()
    tracker.update(doc(1, event(not_before=PAST)), at(0))
    [change] = tracker.update(doc(2), at(1))
    assert change.kind is ChangeKind.GONE and not change.certain
    assert change.detail == "last seen Scheduled; its NotBefore had passed: it probably ran"


@pytest.mark.parametrize("gap", ["3 polls failed", "no answer for 40 s"])
def test_removed_across_a_gap_is_gone_never_cancelled(gap: str) -> None:
    tracker = Tracker()
    tracker.update(doc(1, event(not_before=FUTURE)), at(0))
    [change] = tracker.update(doc(2), at(40), gap=gap)
    assert change.kind is ChangeKind.GONE and not change.certain
    assert change.detail == (f"last seen Scheduled; {gap}; it may have run or been cancelled")


def test_a_skipped_incarnation_is_a_gap_and_is_counted() -> None:
    """The measured case: incarnation 8 with a Freeze Scheduled, then 15 without it;
    the emulator had served it Started in 10-11. Never "cancelled, no impact"."""
    tracker = Tracker()
    tracker.update(doc(8, event(not_before=FUTURE, etype="Freeze")), at(0))
    [change] = tracker.update(doc(15), at(30))
    assert change.kind is ChangeKind.GONE and not change.certain and change.missed == 6
    assert "incarnations 9-14 never seen" in change.detail


def test_an_approved_event_that_vanished_probably_ran() -> None:
    tracker = Tracker()
    tracker.update(doc(1, event(not_before=FUTURE)), at(0))
    [change] = tracker.update(doc(3), at(2), approved=frozenset({"e1"}))
    assert change.kind is ChangeKind.GONE
    assert change.detail.endswith("it was approved: it probably ran")


def test_started_across_a_gap_is_not_certain_and_keeps_the_old_not_before() -> None:
    tracker = Tracker()
    tracker.update(doc(1, event(not_before=FUTURE)), at(0))
    [change] = tracker.update(doc(2, event(status="Started")), at(20), gap="2 polls failed")
    assert change.kind is ChangeKind.STARTED and not change.certain
    assert change.previous is not None and change.previous.not_before is not None
    assert change.detail == ("started sometime in a gap (2 polls failed); started at least "
                             "14m 40s before its NotBefore 2026-11-22 10:15:00 UTC")


def test_an_early_start_says_how_early() -> None:
    tracker = Tracker()
    tracker.update(doc(1, event(not_before=FUTURE)), at(0))
    [change] = tracker.update(doc(2, event(status="Started")), at(733))
    assert change.certain
    assert change.detail == "started 2m 47s before its NotBefore 2026-11-22 10:15:00 UTC"


def test_started_then_gone_across_a_gap_completed_but_when_is_unsure() -> None:
    tracker = Tracker()
    tracker.update(doc(1, event(status="Started")), at(0))
    [change] = tracker.update(doc(3), at(50), gap="no answer for 50 s")
    assert change.kind is ChangeKind.COMPLETED and not change.certain
    assert change.detail.startswith("it ended sometime in a gap (no answer for 50 s")


def test_a_baseline_from_before_start_reports_what_left_meanwhile() -> None:
    tracker = Tracker(baseline=doc(4, event("old", not_before=FUTURE), event("kept")))
    changes = tracker.update(doc(6, event("kept")), at(0))
    assert [(c.kind.value, c.event_id, c.initial, c.certain) for c in changes] == [
        ("appeared", "kept", True, True), ("gone", "old", False, False)]
    assert "setui was not watching" in changes[1].detail


def test_host_failure_appears_directly_as_started() -> None:
    tracker = Tracker()
    tracker.update(doc(1), at(0))
    changes = tracker.update(doc(2, event(status="Started")), at(1))
    assert kinds(changes) == ["appeared"]
    assert changes[0].event is not None and changes[0].event.is_started
    assert "started" in changes[0].detail
    assert kinds(tracker.update(doc(3), at(2))) == ["completed"]


def test_started_then_gone_then_new_event_right_after() -> None:
    tracker = Tracker()
    tracker.update(doc(1, event("a", status="Started")), at(0))
    changes = tracker.update(doc(2, event("b")), at(1))
    assert sorted(kinds(changes)) == ["appeared", "completed"]
    by_kind = {c.kind: c.event_id for c in changes}
    assert by_kind[ChangeKind.APPEARED] == "b"
    assert by_kind[ChangeKind.COMPLETED] == "a"


def test_rescheduled_when_not_before_moves() -> None:
    tracker = Tracker()
    tracker.update(doc(1, event(not_before="Mon, 11 Apr 2022 22:26:58 GMT")), at(0))
    changes = tracker.update(doc(2, event(not_before="Mon, 11 Apr 2022 23:00:00 GMT")), at(1))
    assert kinds(changes) == ["rescheduled"]
    assert "22:26:58" in changes[0].detail and "23:00:00" in changes[0].detail


def test_other_field_changes_are_changed() -> None:
    tracker = Tracker()
    tracker.update(doc(1, event(DurationInSeconds=5)), at(0))
    changes = tracker.update(doc(2, event(DurationInSeconds=30, resources=("vm1", "vm2"))), at(1))
    assert kinds(changes) == ["changed"]
    assert "DurationInSeconds 5 -> 30" in changes[0].detail
    assert "Resources changed" in changes[0].detail


def test_incarnation_going_down_is_an_anomaly_that_is_survived() -> None:
    tracker = Tracker()
    tracker.update(doc(5, event("a")), at(0))
    changes = tracker.update(doc(3, event("a"), event("b")), at(1))
    assert kinds(changes) == ["anomaly", "appeared"]
    assert "5 to 3" in changes[0].detail
    assert tracker.incarnation == 3
    assert tracker.update(doc(4, event("a"), event("b")), at(2)) == []


def test_same_incarnation_with_different_content_is_an_anomaly() -> None:
    tracker = Tracker()
    tracker.update(doc(7, event("a")), at(0))
    changes = tracker.update(doc(7, event("a"), event("b")), at(1))
    assert kinds(changes) == ["anomaly", "appeared"]
    assert "again with different content" in changes[0].detail


def test_duplicate_event_ids_are_reported_not_fatal() -> None:
    tracker = Tracker()
    changes = tracker.update(doc(1, event("a"), event("a", etype="Freeze")), at(0))
    assert kinds(changes) == ["anomaly", "appeared"]
    assert tracker.events["a"].event_type.value == "Reboot"


def test_first_document_marks_changes_initial() -> None:
    tracker = Tracker()
    assert all(c.initial for c in tracker.update(doc(3, event("a")), at(0)))
    assert not any(c.initial for c in tracker.update(doc(4, event("a"), event("b")), at(1)))


def test_summary_is_one_line() -> None:
    tracker = Tracker()
    changes = tracker.update(doc(1, event("abcdef0123")), at(0))
    assert summarize(changes) == "appeared Reboot abcdef01"
    assert summarize([]) == "no event changes"


statuses = st.sampled_from(["Scheduled", "Started"])
events_strategy = st.lists(
    st.builds(lambda i, s, d: event(f"e{i}", status=s, DurationInSeconds=d),
              st.integers(0, 4), statuses, st.integers(-1, 3)),
    max_size=5,
)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), events_strategy), min_size=1, max_size=8))
def test_tracker_never_crashes_and_ends_consistent(
        sequence: list[tuple[int, list[dict[str, Any]]]]) -> None:
    tracker = Tracker()
    for i, (incarnation, events) in enumerate(sequence):
        document = doc(incarnation, *events)
        changes = tracker.update(document, at(i))
        for change in changes:
            assert change.incarnation == incarnation
            assert change.seen_at == at(i)
        # the tracker's view is the document's, first occurrence of each id wins
        expected: dict[str, Any] = {}
        for item in document.events:
            expected.setdefault(item.event_id, item)
        assert tracker.events == expected
