"""The audit log: append-only records in a hash chain, and tampering found by verify.

Every tamper test edits the file with plain ``sqlite3``, as someone with write access
would, after dropping the append-only triggers (which only guard against mistakes).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

from setui.store import AuditEntry, Store, StoreError
from tests.support.store_helpers import ENDPOINT, T0, entry, raw

GENESIS = "0" * 64


def fill(store: Store, count: int = 5) -> None:
    for minute in range(count):
        store.audit_log.append(entry(minute=minute, event_id=f"E-{minute}"))


def test_records_hold_every_field(store: Store) -> None:
    snapshot = {"EventId": "A-1", "EventType": "Freeze", "EventStatus": "Scheduled",
                "NotBefore": "Tue, 14 May 2024 10:00:00 GMT", "Resources": ["a", "b"],
                "EventSource": "Platform", "DurationInSeconds": 5, "Description": "d"}
    attempt = store.audit_log.append(entry("approve-attempt", event=snapshot,
                                           details={"api_version": "2020-07-01"}))
    outcome = store.audit_log.append(entry("approve-outcome", minute=0.01, status=200,
                                           latency=0.0421, attempt_seq=attempt.seq))
    assert (attempt.seq, outcome.seq) == (1, 2)
    newest, oldest = store.audit_log.records()
    assert newest == outcome.__class__(**{**outcome.__dict__, "has_outcome": None})
    assert oldest.action == "approve-attempt" and oldest.has_outcome is True
    assert oldest.event == snapshot and oldest.details == {"api_version": "2020-07-01"}
    assert (oldest.user, oldest.ssh_client, oldest.host) == ("alice", "10.1.2.3", "vm-web-0")
    assert oldest.time == T0 and oldest.incarnation == 2 and oldest.endpoint == ENDPOINT
    assert newest.latency_ms == 42.1 and newest.latency == pytest.approx(0.0421)
    assert newest.attempt_seq == 1 and newest.status == 200
    assert oldest.prev_hash == GENESIS and newest.prev_hash == oldest.hash
    assert [r.seq for r in store.audit_log.records(limit=1)] == [2]
    assert [r.seq for r in store.audit_log.records(oldest_first=True)] == [1, 2]


def test_an_attempt_without_outcome_is_unknown_not_tampering(store: Store) -> None:
    store.audit_log.append(entry("approve-attempt"))
    record = store.audit_log.records()[0]
    assert record.outcome_unknown and record.has_outcome is False
    assert store.audit_log.verify().ok


def test_hash_is_the_documented_one(store: Store) -> None:
    """An auditor can recompute the chain from the export without setui."""
    fill(store, 3)
    prev = GENESIS
    for record in store.audit_log.records(oldest_first=True):
        data = record.to_json()
        content = {k: v for k, v in data.items() if k not in ("hash", "prev_hash")}
        text = prev + "\n" + json.dumps(content, sort_keys=True, separators=(",", ":"))
        assert hashlib.sha256(text.encode()).hexdigest() == record.hash
        prev = record.hash
    result = store.audit_log.verify()
    assert result.ok and result.count == 3 and str(result) == "ok, 3 records"
    assert result.head_seq == 3 and result.head_hash == prev


def test_extend_is_all_or_nothing(store: Store) -> None:
    fill(store, 1)
    bad = AuditEntry(action="cancelled", time=T0, user="u", host="h", endpoint="e",
                     details={"x": object()})  # cannot be written as JSON
    with pytest.raises(TypeError):
        store.audit_log.extend([entry(), bad])
    assert [r.seq for r in store.audit_log.records()] == [1]
    assert store.audit_log.append(entry()).seq == 2
    assert store.audit_log.verify().ok


def test_hostile_text_is_kept_literally(store: Store) -> None:
    hostile = "\x1b[2J\u202e\ud800\x00"
    store.audit_log.append(entry(user=hostile, error=hostile, event={"Description": hostile}))
    record = store.audit_log.records()[0]
    assert record.user.startswith("\x1b[2J\u202e") and "\\ud800" in record.user
    assert record.event == {"Description": hostile}
    assert store.audit_log.verify().ok


def test_triggers_stop_casual_edits(store: Store) -> None:
    fill(store, 1)
    conn = sqlite3.connect(store.path)
    for sql in ("UPDATE audit SET os_user = 'x'", "DELETE FROM audit"):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute(sql)
    conn.close()


# -- tampering ---------------------------------------------------------------------------------
def tampered(store: Store, *statements: str | tuple[str, tuple[object, ...]]) -> None:
    conn = raw(store.path)
    for statement in statements:
        if isinstance(statement, tuple):
            conn.execute(*statement)
        else:
            conn.execute(statement)
    conn.close()


def check(store: Store, first_bad: int | None, words: str) -> None:
    result = store.audit_log.verify()
    assert not result.ok
    assert result.first_bad == first_bad, result
    assert words in result.problem, result.problem
    assert str(result) == result.problem


@pytest.mark.parametrize("column, value", [
    ("os_user", "mallory"), ("time", "2024-05-14T09:31:00.000000Z"), ("status", 500),
    ("event_json", '{"EventId":"A-1","EventType":"Freeze"}'), ("event_json", "{not json"),
    ("details_json", '{"x":1}'), ("ssh_client", None), ("hash", "f" * 64),
])
def test_an_altered_record_is_found(store: Store, column: str, value: object) -> None:
    fill(store)
    assert store.audit_log.verify().ok
    tampered(store, (f"UPDATE audit SET {column} = ? WHERE seq = 3", (value,)))
    check(store, 3, "record 3 was altered")


def test_a_removed_record_is_found(store: Store) -> None:
    fill(store)
    tampered(store, "DELETE FROM audit WHERE seq = 2")
    check(store, 2, "record 2 was removed")


def test_removed_records_are_found(store: Store) -> None:
    fill(store)
    tampered(store, "DELETE FROM audit WHERE seq IN (2, 3)")
    check(store, 2, "records 2 to 3 were removed")


def test_removing_the_newest_records_is_found(store: Store) -> None:
    fill(store)
    tampered(store, "DELETE FROM audit WHERE seq >= 4")
    check(store, 4, "records 4 to 5 were removed from the end")


def test_removing_the_newest_record_and_the_head_is_found(store: Store) -> None:
    fill(store)
    tampered(store, "DELETE FROM audit WHERE seq = 5", "DELETE FROM audit_head")
    check(store, 4, "head is missing")
    with pytest.raises(StoreError, match="no head record"):
        store.audit_log.append(entry())  # nothing is written over the evidence


def test_removing_everything_but_the_head_is_found(store: Store) -> None:
    fill(store)
    tampered(store, "DELETE FROM audit")
    check(store, 1, "records 1 to 5 were removed")


def forge(store: Store, seq: int, prev_hash: str, user: str = "mallory") -> tuple[object, ...]:
    """A record whose own hash is right, as someone who read this code could make."""
    values = {"seq": seq, "time": "2024-05-14T09:40:00.000000Z", "action": "approve-attempt",
              "user": user, "ssh_client": None, "host": "vm-web-0", "endpoint": ENDPOINT,
              "event_id": "A-1", "event": None, "incarnation": 2, "attempt_seq": None,
              "status": None, "error": None, "latency_ms": None, "details": {}}
    digest = hashlib.sha256((prev_hash + "\n" + json.dumps(
        values, sort_keys=True, separators=(",", ":"))).encode()).hexdigest()
    return (seq, values["time"], values["action"], user, None, "vm-web-0", ENDPOINT, "A-1",
            None, 2, None, None, None, None, "{}", prev_hash, digest)


INSERT = ("INSERT INTO audit (seq, time, action, os_user, ssh_client, host, endpoint, "
          "event_id, event_json, incarnation, attempt_seq, status, error, latency_ms, "
          "details_json, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
          "?, ?, ?)")


def test_a_record_inserted_at_the_end_is_found(store: Store) -> None:
    fill(store)
    head = store.audit_log.records(limit=1)[0].hash
    tampered(store, (INSERT, forge(store, 6, head)))
    check(store, 6, "record 6 was inserted")
    with pytest.raises(StoreError, match="after its head"):
        store.audit_log.append(entry())


def test_a_record_inserted_before_the_first_is_found(store: Store) -> None:
    fill(store)
    tampered(store, (INSERT, forge(store, 0, GENESIS)))
    check(store, 0, "record 0 was inserted")


def test_a_record_inserted_in_the_middle_is_found(store: Store) -> None:
    fill(store)
    second = store.audit_log.records(oldest_first=True)[1].hash
    tampered(store, "UPDATE audit SET seq = seq + 100 WHERE seq >= 3",
             "UPDATE audit SET seq = seq - 99 WHERE seq >= 100",
             (INSERT, forge(store, 3, second)),
             "UPDATE audit_head SET seq = 6")
    check(store, 3, "record 3 was inserted")


def test_a_record_removed_and_the_rest_renumbered_is_found(store: Store) -> None:
    fill(store)
    tampered(store, "DELETE FROM audit WHERE seq = 2",
             "UPDATE audit SET seq = seq - 1 WHERE seq > 2", "UPDATE audit_head SET seq = 4")
    check(store, 2, "a record was removed before record 2")


def test_a_record_replaced_by_a_forgery_is_found(store: Store) -> None:
    fill(store)
    second = store.audit_log.records(oldest_first=True)[1].hash
    tampered(store, "DELETE FROM audit WHERE seq = 3", (INSERT, forge(store, 3, second)))
    check(store, 3, "chain breaks between records 3 and 4")


def test_a_forged_first_record_is_found(store: Store) -> None:
    fill(store, 1)
    tampered(store, "DELETE FROM audit WHERE seq = 1", (INSERT, forge(store, 1, "1" * 64)))
    check(store, 1, "record 1 was replaced")


def test_appending_after_a_truncation_keeps_the_evidence(store: Store) -> None:
    fill(store)
    tampered(store, "DELETE FROM audit WHERE seq = 5")
    assert store.audit_log.append(entry()).seq == 6  # the head still says 5 came before
    check(store, 5, "record 5 was removed")


def test_verify_of_an_empty_log(store: Store) -> None:
    result = store.audit_log.verify()
    assert result.ok and result.count == 0 and str(result) == "ok, 0 records"


def test_many_records_verify_quickly(data_dir: Path) -> None:
    with Store.open_dir(data_dir) as store:
        store.audit_log.extend([entry(minute=i) for i in range(5000)])
        assert store.audit_log.verify().count == 5000
        assert store.audit_log.records(limit=1)[0].time == T0 + timedelta(minutes=4999)


# -- the head witness beside the database ---------------------------------------------------
def witness(store: Store) -> Path:
    return store.path.with_name(store.path.name + ".audit-head")


def test_every_append_updates_the_witness_owner_only(store: Store) -> None:
    import os
    import stat

    fill(store, 3)
    newest = store.audit_log.records(limit=1)[0]
    assert json.loads(witness(store).read_text()) == {"seq": 3, "hash": newest.hash}
    if os.name == "posix":
        assert stat.S_IMODE(witness(store).stat().st_mode) == 0o600
    assert sorted(p.name for p in store.path.parent.iterdir() if "audit-head" in p.name) == [
        witness(store).name]  # no temporary file left behind
    result = store.audit_log.verify()
    assert result.ok and not result.warning and store.audit_log.witness_problem is None


def test_truncation_with_the_head_rewritten_is_found(store: Store) -> None:
    """Before the witness this verified as "ok, 3 records"."""
    fill(store)
    third = store.audit_log.records(oldest_first=True)[2].hash
    fifth = store.audit_log.records(limit=1)[0].hash
    tampered(store, "DELETE FROM audit WHERE seq >= 4",
             ("UPDATE audit_head SET seq = 3, hash = ?", (third,)))
    check(store, 4, "records were removed from the end: the witness says 5 records ending "
                    f"in hash {fifth}, the log has 3")


def test_removing_the_whole_log_and_its_head_is_found(store: Store) -> None:
    fill(store)
    tampered(store, "DELETE FROM audit", "DELETE FROM audit_head")
    check(store, 1, "the witness says 5 records")


def test_an_older_copy_of_the_database_put_back_is_found(store: Store) -> None:
    import shutil

    fill(store, 3)
    store.close()
    backup = store.path.with_name("backup.db")
    shutil.copyfile(store.path, backup)
    with Store(store.path) as later:
        later.audit_log.append(entry(minute=10))  # record 4, then the old copy is put back
    shutil.copyfile(backup, store.path)
    with Store(store.path) as restored:
        check(restored, 4, "records were removed from the end: the witness says 4 records")
        # New records do not wipe out the evidence: the witness is left as it was.
        restored.audit_log.append(entry(minute=20))
        assert restored.audit_log.witness_problem is not None
        assert "kept as evidence" in restored.audit_log.witness_problem
        check(restored, 4, "record 4 was replaced: the witness says it has hash")


def test_no_witness_is_a_warning_not_tampering(store: Store) -> None:
    """Stores written before the witness existed have none."""
    fill(store, 2)
    witness(store).unlink()
    result = store.audit_log.verify()
    assert result.ok and result.count == 2 and str(result) == "ok, 2 records"
    assert "there is no audit head witness" in result.warning
    store.audit_log.append(entry())  # the next record writes it
    assert store.audit_log.verify().warning == ""


def test_a_witness_that_cannot_be_written_never_blocks_the_log(store: Store) -> None:
    fill(store, 1)
    witness(store).unlink()
    witness(store).mkdir()  # not a file: reading and replacing it both fail
    record = store.audit_log.append(entry())
    assert record.seq == 2 and [r.seq for r in store.audit_log.records()] == [2, 1]
    assert store.audit_log.witness_problem is not None
    assert "cannot write the audit head witness" in store.audit_log.witness_problem
    result = store.audit_log.verify()
    assert result.ok and "cannot be read" in result.warning


def test_a_witness_behind_the_log_is_a_warning(store: Store) -> None:
    """A crash between the commit and the witness, or a failed write, leaves it behind."""
    fill(store, 2)
    behind = witness(store).read_text()
    store.audit_log.append(entry())
    witness(store).write_text(behind)
    result = store.audit_log.verify()
    assert result.ok and "names record 2, the log has 3" in result.warning
    store.audit_log.append(entry())
    assert json.loads(witness(store).read_text())["seq"] == 4


def test_a_dropped_head_table_is_tampering_not_an_error(store: Store) -> None:
    fill(store)
    tampered(store, "DROP TABLE audit_head")
    check(store, 5, "the audit_head table was removed")
    with pytest.raises(StoreError, match="lost its head table"):
        store.audit_log.append(entry())  # nothing is written over the evidence


def test_a_dropped_audit_table_is_tampering_not_an_error(store: Store) -> None:
    fill(store)
    tampered(store, "DROP TABLE audit")
    check(store, 1, "the audit table was removed")
