"""Before an approval the store checks itself; an append reads its records back before it
commits, so a planted trigger cannot make a record vanish silently."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from setui.store import AuditEntry, Store, StoreError
from tests.support.store_helpers import ENDPOINT, T0


def entry(action: str = "approve-attempt") -> AuditEntry:
    return AuditEntry(action=action, time=T0, user="alice", host="vm", endpoint=ENDPOINT,
                      event_id="A-1")


def plant(data_dir: Path, *statements: str) -> None:
    conn = sqlite3.connect(data_dir / "setui.db", isolation_level=None)
    for statement in statements:
        conn.execute(statement)
    conn.close()


def test_a_sound_store_may_take_an_approval(store: Store) -> None:
    store.audit_log.append(entry())
    assert store.audit_log.approval_integrity() is None


def test_a_record_swallowed_by_a_trigger_is_an_error_and_nothing_commits(
        store: Store, data_dir: Path) -> None:
    store.audit_log.append(entry())
    plant(data_dir, "CREATE TRIGGER swallow BEFORE INSERT ON audit BEGIN "
                    "SELECT RAISE(IGNORE); END")
    with pytest.raises(StoreError, match="did not keep the record just written"):
        store.audit_log.append(entry())
    assert [r.seq for r in store.audit_log.records()] == [1]
    head = sqlite3.connect(data_dir / "setui.db").execute(
        "SELECT seq FROM audit_head").fetchone()
    assert head == (1,)  # the head did not move either: the transaction rolled back
    assert "swallow" in (store.audit_log.approval_integrity() or "")


@pytest.mark.parametrize(("statements", "words"), [
    (["CREATE TRIGGER t AFTER INSERT ON incarnations BEGIN SELECT 1; END"],
     "trigger setui did not create ('t')"),
    (["DROP TRIGGER audit_no_update",
      "CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit BEGIN SELECT 1; END"],
     "'audit_no_update' in"),
    (["DROP TRIGGER audit_no_delete"], "'audit_no_delete'"),
    (["UPDATE audit_head SET seq = 5"], "is broken"),
])
def test_an_altered_store_refuses(store: Store, data_dir: Path, statements: list[str],
                                  words: str) -> None:
    store.audit_log.append(entry())
    plant(data_dir, *statements)
    problem = store.audit_log.approval_integrity()
    assert problem is not None and words in problem


def test_a_record_appended_by_another_setui_while_checking_is_no_alarm(
        store: Store, data_dir: Path) -> None:
    # Six `setui approve` at once: one appends between this check's reading of the log's
    # head and of its records. Both must be of one moment, or the new record looks
    # inserted behind the head's back and an honest approval is refused as tampering.
    store.audit_log.append(entry())
    other = Store.open_dir(data_dir)
    appended: list[int] = []

    def append_meanwhile(statement: str) -> None:
        if not appended and "FROM audit ORDER BY seq" in statement:
            appended.extend(r.seq for r in other.audit_log.extend([entry()]))

    conn = store.database._conn
    assert conn is not None
    conn.set_trace_callback(append_meanwhile)
    try:
        assert store.audit_log.approval_integrity() is None
    finally:
        conn.set_trace_callback(None)
        other.close()
    assert appended == [2]
    assert store.audit_log.approval_integrity() is None
    assert sorted(r.seq for r in store.audit_log.records()) == [1, 2]
