"""The incarnation history: once per distinct document, derived changes, queries, retention."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from setui.core.tracker import Tracker
from setui.store import DB_NAME, Store
from setui.store.schema import SCHEMA_VERSION
from tests.support.oldstores import back_to
from tests.support.store_helpers import ENDPOINT, STORY, T0, doc, entry, event, play, raw


def test_each_distinct_document_once_newest_first(store: Store) -> None:
    play(store, STORY)
    play(store, STORY)  # a second writer seeing the same documents adds nothing
    records = store.history.incarnations()
    assert [r.incarnation for r in records] == [4, 3, 2, 1]
    assert [r.summary for r in records] == [
        "completed Reboot A-1", "started Reboot A-1", "appeared Reboot A-1",
        "recording began: no events"]
    started = records[1]
    assert started.first_seen == T0 + timedelta(minutes=2)
    assert started.endpoint == ENDPOINT
    assert [(c.kind, c.event_id, c.event_type, c.status) for c in started.changes] == [
        ("started", "A-1", "Reboot", "Started")]
    assert started.document() == STORY[2]
    assert json.loads(started.raw_json) == dict(STORY[2].raw)


def test_an_hour_of_unchanged_polling_adds_no_row_and_few_writes(store: Store) -> None:
    # An hour polled once a second is the day's rate (at most one write a minute, so at
    # most 1,442 in a day) at a 24th of the cost.
    document = STORY[1]
    statements: list[str] = []
    assert store.database._conn is not None
    store.database._conn.set_trace_callback(statements.append)
    seconds = 3600
    for second in range(seconds):
        store.history.record(document, seen_at=T0 + timedelta(seconds=second),
                             endpoint=ENDPOINT, changes=())
    store.database._conn.set_trace_callback(None)
    records = store.history.incarnations()
    assert len(records) == 1
    assert records[0].first_seen == T0
    assert records[0].last_seen >= T0 + timedelta(seconds=seconds - 61)
    writes = [s for s in statements if s.startswith(("UPDATE", "INSERT"))]
    assert 1 <= len(writes) <= seconds // 60 + 2  # at most about one a minute


def test_same_incarnation_with_other_content_is_kept_and_flagged(store: Store) -> None:
    play(store, [doc(5, event("A-1")), doc(5, event("A-1", not_before="Tue, 14 May 2024 "
                                                                      "11:00:00 GMT"))])
    records = store.history.incarnations()
    assert [r.incarnation for r in records] == [5, 5]
    kinds = [c.kind for c in records[0].changes]
    assert kinds == ["anomaly", "rescheduled"]
    assert "arrived again with different content" in records[0].changes[0].detail
    assert store.history.incarnation(5) == records[0]  # the most recently seen one


def test_a_restarted_writer_continues_the_story(data_dir: Path) -> None:
    with Store.open_dir(data_dir) as first:
        play(first, STORY[:2])
    # A new process: fresh tracker (every event looks new to it) and a fresh store object.
    with Store.open_dir(data_dir) as second:
        tracker = Tracker()
        changes = tracker.update(STORY[2], T0 + timedelta(minutes=5))
        assert [c.kind.value for c in changes] == ["appeared"] and changes[0].initial
        second.history.record(STORY[2], seen_at=T0 + timedelta(minutes=5),
                              endpoint=ENDPOINT, changes=changes)
        newest = second.history.incarnations(limit=1)[0]
    assert [c.kind for c in newest.changes] == ["started"]
    assert newest.summary == "started Reboot A-1"


def test_caller_changes_are_used_when_the_store_knows_nothing_earlier(store: Store) -> None:
    tracker = Tracker()
    tracker.update(STORY[1], T0)  # this caller saw incarnation 2; the store did not
    changes = tracker.update(STORY[2], T0 + timedelta(minutes=1))
    store.history.record(STORY[2], seen_at=T0 + timedelta(minutes=1), endpoint=ENDPOINT,
                         changes=changes)
    assert [c.kind for c in store.history.incarnations()[0].changes] == ["started"]


def test_filters_and_paging(store: Store) -> None:
    play(store, STORY)
    play(store, [doc(1), doc(2, event("B-2", kind="Freeze"))], endpoint="http://other",
         start=T0 + timedelta(hours=1))
    assert [r.incarnation for r in store.history.incarnations(limit=2)] == [2, 1]
    assert {r.endpoint for r in store.history.incarnations(limit=2)} == {"http://other"}
    assert [r.incarnation for r in store.history.incarnations(endpoint=ENDPOINT)] == [4, 3, 2, 1]
    since = store.history.incarnations(since=T0 + timedelta(minutes=2))
    assert [(r.endpoint, r.incarnation) for r in since] == [
        ("http://other", 2), ("http://other", 1), (ENDPOINT, 4), (ENDPOINT, 3)]
    assert [r.incarnation for r in store.history.incarnations(event_id="a-1")] == [4, 3, 2]
    page1 = store.history.incarnations(limit=3)
    page2 = store.history.incarnations(limit=3, before=page1[-1])
    assert [r.incarnation for r in page1 + page2] == [2, 1, 4, 3, 2, 1]
    assert store.history.incarnations(limit=3, before=page2[-1]) == []


def test_incarnation_and_previous(store: Store) -> None:
    play(store, STORY)
    third = store.history.incarnation(3)
    assert third is not None and third.incarnation == 3
    before = store.history.previous(third)
    assert before is not None and before.incarnation == 2
    first = store.history.incarnation(1)
    assert first is not None and store.history.previous(first) is None
    assert store.history.incarnation(99) is None


def test_event_story_tells_the_whole_life(store: Store) -> None:
    play(store, STORY)
    store.audit_log.append(entry("approve-attempt", minute=1.5))
    story = store.record.event_story("a-1")  # EventIds compare without case
    assert [(s.kind, s.incarnation, s.source) for s in story] == [
        ("appeared", 2, "history"), ("approve-attempt", 2, "audit"),
        ("started", 3, "history"), ("completed", 4, "history")]
    assert story[0].status == "Scheduled" and story[0].not_before
    assert story[0].time == T0 + timedelta(minutes=1)
    assert "outcome unknown" in story[1].detail


def test_event_story_of_a_cancelled_and_of_a_current_event(store: Store) -> None:
    play(store, [doc(1, event("C-3")), doc(2), doc(3, event("D-4", "Started"))])
    assert [s.kind for s in store.record.event_story("C-3")] == ["appeared", "cancelled"]
    current = store.record.event_story("D-4")
    assert [s.kind for s in current] == ["appeared", "last-seen"]
    assert current[0].status == "Started"
    assert store.record.event_story("nope") == []


def test_prune_keeps_recent_history_and_the_whole_audit_log(data_dir: Path) -> None:
    with Store.open_dir(data_dir, history_days=None) as writer:
        play(writer, STORY, step=timedelta(days=40))  # seen at day 0, 40, 80, 120
        writer.audit_log.append(entry())
        assert len(writer.history.incarnations()) == 4
    with Store.open_dir(data_dir, history_days=90) as store:
        deleted = store.history.prune(now=T0 + timedelta(days=125))
        assert deleted == 1  # day 0 only: everything else was seen within 90 days
        assert [r.incarnation for r in store.history.incarnations()] == [4, 3, 2]
        story = store.record.event_story("A-1")
        assert [s.kind for s in story if s.source == "history"] == [
            "appeared", "started", "completed"]
        assert store.audit_log.verify().count == 1
    with Store.open_dir(data_dir, history_days=None) as keep_all:
        assert keep_all.history.prune(now=T0 + timedelta(days=10_000)) == 0
        assert len(keep_all.history.incarnations()) == 3


def test_retention_runs_by_itself_when_recording(data_dir: Path) -> None:
    with Store.open_dir(data_dir, history_days=1) as store:
        play(store, STORY[:2])
        play(store, STORY[2:], start=T0 + timedelta(days=3))
        assert [r.incarnation for r in store.history.incarnations()] == [4, 3]


def test_hostile_text_is_stored_and_read_back(store: Store) -> None:
    hostile = "\x1b]0;pwn\x07\u202e\ud800\x00 ok"
    document = doc(7, event("E\x1b[2J", Description=hostile))
    store.history.record(document, seen_at=T0, endpoint=ENDPOINT, changes=())
    record = store.history.incarnations()[0]
    assert record.document().events[0].description == hostile
    assert record.changes[0].event_id == "E\x1b[2J"


def test_history_queries_use_indexes_with_100k_incarnations(store: Store) -> None:
    """The history screen and command must open instantly on a years-old VM: every query
    they make reads through an index, never a scan of the table. (How fast that is gets
    measured in bench/store.py; a test on a shared machine can only check the plan.)"""
    conn = raw(store.path)
    base = T0.timestamp()
    rows = []
    for number in range(100_000):
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(base + number))
        changes = (f'[{{"kind":"appeared","event_id":"E-{number}","event_type":"Freeze",'
                   '"status":"Scheduled"}]')
        rows.append((ENDPOINT, number, f"h{number}", stamp, stamp,
                     f'{{"DocumentIncarnation":{number},"Events":[]}}', changes,
                     f"appeared Freeze E-{number}"))
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO incarnations (endpoint, incarnation, content_hash, "
                     "first_seen, last_seen, raw_json, changes_json, summary) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
    conn.executemany("INSERT INTO event_changes VALUES (?, 0, ?, 'appeared')",
                     [(i + 1, f"E-{i}") for i in range(100_000)])
    conn.execute("COMMIT")
    conn.close()
    queries: dict[str, Callable[[], object]] = {
        "newest": lambda: store.history.incarnations(limit=50),
        "since": lambda: store.history.incarnations(limit=50, since=T0 + timedelta(seconds=50_000)),
        "endpoint": lambda: store.history.incarnations(limit=50, endpoint=ENDPOINT),
        "event": lambda: store.history.incarnations(limit=50, event_id="E-77777"),
        "show": lambda: store.history.incarnation(12_345),
        "story": lambda: store.record.event_story("E-99999"),
    }
    conn = store.database._conn
    assert conn is not None
    for name, query in queries.items():
        statements: list[str] = []
        conn.set_trace_callback(statements.append)
        try:
            result = query()
        finally:
            conn.set_trace_callback(None)
        assert result, name
        selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
        assert selects, name
        for sql in selects:
            plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql)]
            scans = [step for step in plan if step.startswith("SCAN")
                     and "USING" not in step and "CONSTANT ROW" not in step]
            assert not scans, f"{name}: {sql!r} scans: {plan}"
    newest = store.history.incarnations(limit=50)
    assert newest[0].incarnation == 99_999 and len(newest) == 50
    page = store.history.incarnations(limit=50, before=newest[-1])
    assert page[0].incarnation == 99_949


@pytest.mark.parametrize("bad", ["[", "{}", "null"])
def test_a_damaged_changes_column_does_not_break_listing(store: Store, bad: str) -> None:
    play(store, STORY[:2])
    conn = raw(store.path)
    conn.execute("UPDATE incarnations SET changes_json = ?", (bad,))
    conn.close()
    assert [r.changes for r in store.history.incarnations()] == [(), ()]


def _without_vm_names(path: Path, version: int) -> None:
    """The file as a setui from before VM names were kept (schema ``version``) left it."""
    conn = sqlite3.connect(path)
    back_to(conn, version)
    conn.commit()
    conn.close()


def test_each_incarnation_keeps_this_vms_name_once_known(store: Store) -> None:
    store.history.record(STORY[0], seen_at=T0, endpoint=ENDPOINT)  # the name not yet known
    store.history.record(STORY[1], seen_at=T0 + timedelta(minutes=1), endpoint=ENDPOINT,
                         vm_name="vm-web-0")
    later = Store(store.path)  # another writer touches #1 and knows the name
    later.history.record(STORY[0], seen_at=T0 + timedelta(seconds=30), endpoint=ENDPOINT,
                         vm_name="vm-web-0")
    later.history.record(STORY[1], seen_at=T0 + timedelta(minutes=2), endpoint=ENDPOINT,
                         vm_name="someone-else")  # the first name known stays
    later.close()
    assert [(r.incarnation, r.vm_name) for r in store.history.incarnations()] == [
        (2, "vm-web-0"), (1, "vm-web-0")]


@pytest.mark.parametrize("version", [3, 4])
def test_an_older_store_is_read_as_it_is_and_upgraded_by_a_writer(data_dir: Path,
                                                                   version: int) -> None:
    with Store.open_dir(data_dir) as store:
        play(store, STORY[:2])
    path = data_dir / DB_NAME
    _without_vm_names(path, version)
    with Store.open_dir(data_dir, readonly=True) as old:  # a reader never writes
        assert [(r.incarnation, r.vm_name) for r in old.history.incarnations()] \
            == [(2, None), (1, None)]
    with Store.open_dir(data_dir) as store:
        store.history.record(STORY[2], seen_at=T0 + timedelta(minutes=5), endpoint=ENDPOINT,
                             vm_name="vm-web-0")
        assert [(r.incarnation, r.vm_name) for r in store.history.incarnations()] == [
            (3, "vm-web-0"), (2, None), (1, None)]
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 8
    conn.close()


def test_words_an_older_setui_stored_read_the_one_way(store: Store) -> None:
    play(store, [doc(1, event("A-1")), doc(2, event("A-1", not_before="Tue, 14 May 2024 "
                                                                      "11:00:00 GMT"))])
    conn = raw(store.path)  # as an older setui wrote the reschedule's words
    conn.execute("UPDATE incarnations SET changes_json = replace(changes_json, "
                 "'2024-05-14 10:00:00 UTC -> 2024-05-14 11:00:00 UTC', "
                 "'Tue, 14 May 2024 10:00:00 GMT -> Tue, 14 May 2024 11:00:00 GMT')")
    assert conn.execute("SELECT count(*) FROM incarnations WHERE changes_json LIKE "
                        "'%10:00:00 GMT -> Tue%'").fetchone()[0] == 1
    conn.close()
    [moved] = store.history.incarnations(limit=1)[0].changes
    assert moved.detail == "NotBefore 2024-05-14 10:00:00 UTC -> 2024-05-14 11:00:00 UTC"
    assert [e.detail for e in store.record.event_story("A-1") if e.kind == "rescheduled"] == [
        moved.detail]
