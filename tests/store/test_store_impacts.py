"""What events did to the VM, in the store: stalls and boots kept, a boot found by the
recording sessions of another boot id and told once (store.impacts, schema 6)."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

from setui.core.impact import BOOT, IMPACT_SOURCE, STALL, STARTED, Impact
from setui.store import DB_NAME, Store
from tests.support.oldstores import back_to
from tests.support.store_helpers import ENDPOINT, STORY, T0, play

MINUTE = timedelta(minutes=1)


def session(store: Store, boot_id: str | None, start: timedelta, stop: timedelta | None,
            beat: timedelta | None = None) -> int:
    """A recording session of ``boot_id`` from T0+start; stopped cleanly at T0+stop, or
    (stop None) dead after its last beat at T0+beat."""
    sid = store.sessions.start(endpoint=ENDPOINT, pid=1, host="vm", command="setui agent",
                               at=T0 + start, boot_id=boot_id)
    if stop is not None:
        store.sessions.beat(sid, T0 + stop, stopped=True)
    elif beat is not None:
        store.sessions.beat(sid, T0 + beat)
    return sid


def test_stalls_and_boots_are_kept_and_read_back(store: Store) -> None:
    stall = Impact(STALL, T0 + MINUTE, 4.8, ENDPOINT, wall_seconds=4.9, boottime_seconds=4.8,
                   event_id="A-1", event_type="Freeze", announced=5, tie=STARTED)
    kept = store.sessions.record_impact(stall)
    assert kept is not None and kept.id > 0
    alone = store.sessions.record_impact(Impact(STALL, T0 + 2 * MINUTE, 3.1, ENDPOINT))
    assert alone is not None
    assert [(i.kind, i.seconds, i.event_id) for i in store.sessions.impacts(endpoint=ENDPOINT)] == [
        (STALL, 4.8, "A-1"), (STALL, 3.1, None)]
    assert store.sessions.impacts(endpoint=ENDPOINT, newest=1) == [alone]
    assert store.sessions.impacts(endpoint=ENDPOINT,
                                  since=T0 + 90 * timedelta(seconds=1)) == [alone]
    assert store.sessions.impacts(endpoint="http://127.0.0.1:1") == []


def test_a_boot_is_told_once_whoever_tells_it(store: Store) -> None:
    boot = Impact(BOOT, T0, 60.0, ENDPOINT, first_poll=T0 + MINUTE, boot_id="boot-b")
    assert store.sessions.record_impact(boot) is not None
    assert store.sessions.record_impact(boot) is None  # a second agent after the same boot
    assert len(store.sessions.impacts(endpoint=ENDPOINT)) == 1


def test_a_boot_is_found_between_the_sessions_of_two_boot_ids(store: Store) -> None:
    play(store, STORY[:3])  # 09:30 empty, 09:31 A-1 Scheduled, 09:32 A-1 Started
    session(store, "boot-a", timedelta(0), stop=3 * MINUTE)  # stopped cleanly at 09:33
    # No other boot yet: nothing to tell.
    assert store.sessions.boot_gap(endpoint=ENDPOINT, boot_id="boot-a", booted_at=None) is None
    session(store, "boot-b", 5 * MINUTE, stop=None)
    gap = store.sessions.boot_gap(endpoint=ENDPOINT, boot_id="boot-b", booted_at=T0 + 4 * MINUTE)
    assert gap is not None
    assert (gap.last_poll, gap.exact, gap.first_poll) == (T0 + 3 * MINUTE, True,
                                                          T0 + 5 * MINUTE)
    assert gap.before is not None and gap.before.incarnation == 3  # the last one seen before
    store.sessions.record_impact(Impact(BOOT, gap.last_poll, 120.0, ENDPOINT, boot_id="boot-b"))
    assert store.sessions.boot_gap(endpoint=ENDPOINT, boot_id="boot-b", booted_at=None) is None


def test_a_session_that_died_gives_its_last_beat_as_not_exact(store: Store) -> None:
    session(store, "boot-a", timedelta(0), stop=None, beat=2 * MINUTE)
    session(store, "boot-b", 5 * MINUTE, stop=None)
    gap = store.sessions.boot_gap(endpoint=ENDPOINT, boot_id="boot-b", booted_at=None)
    assert gap is not None and (gap.last_poll, gap.exact) == (T0 + 2 * MINUTE, False)


def test_a_session_from_before_boot_ids_counts_when_it_ended_before_the_boot(
        store: Store) -> None:
    session(store, None, timedelta(0), stop=2 * MINUTE)
    session(store, "boot-b", 5 * MINUTE, stop=None)
    assert store.sessions.boot_gap(endpoint=ENDPOINT, boot_id="boot-b", booted_at=None) is None
    gap = store.sessions.boot_gap(endpoint=ENDPOINT, boot_id="boot-b", booted_at=T0 + 4 * MINUTE)
    assert gap is not None and gap.last_poll == T0 + 2 * MINUTE
    # One that ran on past the boot's time was this boot's, as far as anyone can tell.
    assert store.sessions.boot_gap(endpoint=ENDPOINT, boot_id="boot-b",
                                   booted_at=T0 + MINUTE) is None


def test_the_sessions_keep_their_boot_and_whether_they_measured(store: Store) -> None:
    sid = session(store, "boot-a", timedelta(0), stop=None)
    store.sessions.measures(sid)
    session(store, None, MINUTE, stop=None)
    assert [(s.boot_id, s.measures) for s in store.sessions.spans(endpoint=ENDPOINT)] == [
        ("boot-a", True), (None, False)]


def test_the_events_story_tells_what_was_measured_of_it(store: Store) -> None:
    play(store, STORY)
    store.sessions.record_impact(Impact(STALL, T0 + 2 * MINUTE + timedelta(seconds=5), 4.8,
                                        ENDPOINT, event_id="a-1", event_type="Reboot",
                                        announced=15, tie=STARTED))
    story = store.record.event_story("A-1")
    measured = [e for e in story if e.source == IMPACT_SOURCE]
    assert [(e.kind, e.detail) for e in measured] == [
        (STALL, "Reboot, announced 15s: the VM was paused 4.8s at 09:32:05.0 UTC")]
    assert [e.kind for e in story] == ["appeared", "started", STALL, "completed"]


def test_an_older_store_reads_as_having_measured_nothing(data_dir: Path,
                                                          store: Store) -> None:
    play(store, STORY[:2])
    session(store, "boot-a", timedelta(0), stop=None)
    store.close()
    conn = sqlite3.connect(data_dir / DB_NAME)
    back_to(conn, 5)
    conn.commit()
    conn.close()
    with Store.open_dir(data_dir, readonly=True) as old:
        assert old.sessions.impacts(endpoint=ENDPOINT) == []
        assert [(s.boot_id, s.measures) for s in old.sessions.spans()] == [(None, False)]
    with Store.open_dir(data_dir) as upgraded:  # a writer upgrades it to schema 6
        assert upgraded.sessions.record_impact(Impact(STALL, T0, 1.0, ENDPOINT)) is not None
