"""Two spellings of one endpoint are one endpoint, wherever the store keys by it.

``http://localhost:P/`` and ``HTTP://127.0.0.1:P`` are the same service: a claim made
under one holds under the other, and the history, the recording sessions and the agent's
steps, holds and notifications are one record. A store written before endpoints were
keyed this way is rewritten once, when opened for writing (rows that then name the same
thing are merged), and read as keyed when only read.
"""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

from setui.store import AuditEntry, Store
from setui.store.agent import AgentLog
from setui.store.schema import SCHEMA_VERSION
from tests.support.oldstores import back_to
from tests.support.store_helpers import STORY, T0, doc, entry, event, play

PORT = 48123
SPELLINGS = (f"HTTP://127.0.0.1:{PORT}", f"http://localhost:{PORT}/", f"http://[::1]:{PORT}")
KEY = f"http://127.0.0.1:{PORT}"


def test_a_claim_under_one_spelling_holds_under_every_other(tmp_path: Path) -> None:
    with Store.open_dir(tmp_path) as store:
        store.audit_log.append(entry("approve-attempt", endpoint=SPELLINGS[0], event_id="A-1"))
        for spelling in SPELLINGS:
            claim = store.audit_log.claim("A-1", spelling)
            assert claim is not None and claim.attempt_seq == 1, spelling
        assert store.audit_log.claim("A-1", f"http://127.0.0.1:{PORT + 1}") is None
        # The record keeps the endpoint as it was written: it is evidence.
        assert store.audit_log.records()[0].endpoint == SPELLINGS[0]


def test_the_history_and_its_recording_sessions_are_one_endpoint(tmp_path: Path) -> None:
    with Store.open_dir(tmp_path) as store:
        session = store.sessions.start(endpoint=SPELLINGS[1], pid=1, host="h",
                                       command="setui watch", at=T0)
        play(store, STORY[:2], endpoint=SPELLINGS[0])
        play(store, STORY[2:], start=T0 + timedelta(minutes=2), endpoint=SPELLINGS[1])
        store.sessions.beat(session, T0 + timedelta(minutes=4), stopped=True)
        for spelling in SPELLINGS:
            rows = store.history.incarnations(limit=None, endpoint=spelling)
            assert [r.incarnation for r in rows] == [4, 3, 2, 1], spelling
            assert {r.endpoint for r in rows} == {KEY}
            assert [s.id for s in store.sessions.spans(endpoint=spelling)] == [session]
            assert store.sessions.holes(endpoint=spelling, now=T0 + timedelta(minutes=4)) == []
            newest = store.history.newest_document(spelling)
            assert newest is not None and newest[0].incarnation == 4
        # The document seen again under another spelling is the same row, not a new one.
        assert not store.history.record(STORY[3], seen_at=T0 + timedelta(minutes=9),
                                        endpoint=SPELLINGS[2])


def test_the_agents_steps_holds_and_notifications_are_one_endpoint(tmp_path: Path) -> None:
    with Store.open_dir(tmp_path) as store:
        first, second = (AgentLog(store, s) for s in SPELLINGS[:2])
        first.set_step("A-1", "prepare", rule="r", state="done", at=T0)
        first.set_hold("A-2", held=True, entry=AuditEntry(
            action="hold", time=T0, user="alice", host="vm", endpoint=SPELLINGS[0],
            event_id="A-2"))
        assert first.queue_notification(f"{KEY}|A-1|appeared|", event_id="A-1",
                                        change="appeared", title="t", body="b", at=T0)
        # A restart that names the endpoint otherwise finds all of it.
        assert [s.step for s in second.steps(["A-1"])] == ["prepare"]
        assert second.held(["A-2", "A-3"]) == {"A-2"}
        assert [n.key for n in second.notifications()] == [f"{KEY}|A-1|appeared|"]


# -- a store from before ------------------------------------------------------------------------
def older_store(path: Path) -> None:
    """A schema-3 store (the tables are the same) whose rows name one endpoint three ways,
    some of them twice over: what setui wrote before endpoints were keyed."""
    Store(path).close()
    conn = sqlite3.connect(path, isolation_level=None)
    back_to(conn, 3)
    raw = '{"DocumentIncarnation": 2, "Events": []}'
    rows = [  # (endpoint, incarnation, hash, first_seen, last_seen)
        (SPELLINGS[0], 1, "h1", "2024-05-14T09:30:00.000000Z", "2024-05-14T09:31:00.000000Z"),
        (SPELLINGS[1], 1, "h1", "2024-05-14T09:29:00.000000Z", "2024-05-14T09:30:30.000000Z"),
        (SPELLINGS[1], 2, "h2", "2024-05-14T09:32:00.000000Z", "2024-05-14T09:40:00.000000Z"),
        (SPELLINGS[2], 2, "h2", "2024-05-14T09:33:00.000000Z", "2024-05-14T09:45:00.000000Z"),
        (SPELLINGS[2], 3, "h3", "2024-05-14T09:46:00.000000Z", "2024-05-14T09:47:00.000000Z"),
    ]
    for number, (endpoint, incarnation, digest, first, last) in enumerate(rows, start=1):
        conn.execute("INSERT INTO incarnations (id, endpoint, incarnation, content_hash, "
                     "first_seen, last_seen, raw_json) VALUES (?, ?, ?, ?, ?, ?, ?)",
                     (number, endpoint, incarnation, digest, first, last, raw))
        conn.execute("INSERT INTO event_changes VALUES (?, 0, ?, 'appeared')",
                     (number, f"E-{number}"))
    conn.execute("INSERT INTO recorders (endpoint, pid, host, command, started, last_beat) "
                 "VALUES (?, 1, 'h', 'watch', '2024-05-14T09:29:00.000000Z', "
                 "'2024-05-14T09:47:00.000000Z')", (SPELLINGS[2],))
    for endpoint, state, updated in ((SPELLINGS[0], "done", "2024-05-14T09:40:00.000000Z"),
                                     (SPELLINGS[1], "running", "2024-05-14T09:35:00.000000Z")):
        conn.execute("INSERT INTO agent_steps (endpoint, event_id, step, rule, state, "
                     "updated) VALUES (?, 'A-1', 'prepare', 'r', ?, ?)",
                     (endpoint, state, updated))
    for endpoint, held, time in ((SPELLINGS[0], 1, "2024-05-14T09:50:00.000000Z"),
                                 (SPELLINGS[1], 0, "2024-05-14T09:40:00.000000Z")):
        conn.execute("INSERT INTO agent_holds VALUES (?, 'a-2', ?, 'alice', ?)",
                     (endpoint, held, time))
    for endpoint, state in ((SPELLINGS[0], "pending"), (SPELLINGS[1], "sent")):
        conn.execute("INSERT INTO agent_notifications (key, endpoint, event_id, change, "
                     "title, body, state, created) VALUES (?, ?, 'A-1', 'appeared', 't', "
                     "'b', ?, '2024-05-14T09:30:00.000000Z')",
                     (f"{endpoint}|A-1|appeared|", endpoint, state))
    conn.execute("INSERT INTO agent_hook_runs (endpoint, event_id, step, rule, command, "
                 "started) VALUES (?, 'A-1', 'prepare', 'r', 'true', "
                 "'2024-05-14T09:35:00.000000Z')", (SPELLINGS[2],))
    conn.close()


def test_a_store_from_before_is_read_keyed_and_rewritten_once_when_written(
        tmp_path: Path) -> None:
    path = tmp_path / "setui.db"
    older_store(path)
    # Read only: nothing rewritten, everything found under the one key.
    with Store(path, readonly=True) as reader:
        assert {r.endpoint for r in reader.history.incarnations(limit=None)} == {KEY}
        assert len(reader.sessions.spans(endpoint=SPELLINGS[1])) == 1
        assert AgentLog(reader, SPELLINGS[2]).held(["A-2"]) == {"A-2"}
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 3
    conn.close()

    with Store(path) as store:
        rows = store.history.incarnations(limit=None, endpoint=KEY)
        # The same document under two spellings is one row: the first sighting's, seen
        # until the last sighting of either.
        assert [(r.incarnation, r.first_seen.minute, r.last_seen.minute) for r in rows] == \
            [(3, 46, 47), (2, 32, 45), (1, 29, 31)]
        assert [s.endpoint for s in store.sessions.spans()] == [KEY]
        log = AgentLog(store, KEY)
        assert [(s.step, s.state) for s in log.steps()] == [("prepare", "done")]  # newest
        assert log.held(["A-2"]) == {"A-2"}  # the newest hold
        assert [(n.key, n.state) for n in log.notifications()] == \
            [(f"{KEY}|A-1|appeared|", "sent")]  # sent once: never again
        assert len(log.hook_runs()) == 1
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    # The merged rows' changes went with them; the kept rows' stayed.
    assert sorted(r[0] for r in conn.execute("SELECT event_id FROM event_changes")) == \
        ["E-2", "E-3", "E-5"]
    tables = ("incarnations", "recorders", "agent_steps", "agent_holds",
              "agent_notifications", "agent_hook_runs")
    assert {t: {r[0] for r in conn.execute(f"SELECT DISTINCT endpoint FROM {t}")}
            for t in tables} == {t: {KEY} for t in tables}
    conn.close()


def test_events_under_two_spellings_make_one_story(tmp_path: Path) -> None:
    with Store.open_dir(tmp_path) as store:
        play(store, [doc(1), doc(2, event("A-1"))], endpoint=SPELLINGS[0])
        play(store, [doc(2, event("A-1")), doc(3)], start=T0 + timedelta(minutes=5),
             endpoint=SPELLINGS[1])
        kinds = [e.kind for e in store.record.event_story("A-1") if e.kind != "last-seen"]
        assert kinds.count("appeared") == 1, kinds


def test_a_replay_shows_approvals_made_under_another_spelling(tmp_path: Path) -> None:
    from setui.monitor.replay import load_recording

    with Store.open_dir(tmp_path) as store:
        play(store, STORY[:2], endpoint=SPELLINGS[1])
        store.audit_log.append(entry("approve-attempt", minute=1, endpoint=SPELLINGS[0]))
        recording = load_recording(store.record)
        assert recording is not None and [r.seq for r in recording.audit] == [1]
