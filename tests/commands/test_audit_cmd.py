"""`setui audit`, `audit verify` and `audit export` in real processes."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from setui.store import AuditEntry, Store
from tests.support.permissions import lock_up

pytestmark = pytest.mark.slow  # starts processes: the slow tier (docs/testing.md)

T0 = datetime(2024, 5, 14, 9, 30, tzinfo=timezone.utc)
SNAPSHOT = {"EventId": "A-1", "EventType": "Reboot", "EventStatus": "Scheduled",
            "NotBefore": "Tue, 14 May 2024 10:00:00 GMT", "Resources": ["vm-web-0"]}


def setui(*args: str, data_dir: Path, cwd: Path | None = None,
          preexec_fn: Callable[[], Any] | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SETUI_DATA_DIR=str(data_dir))
    return subprocess.run([sys.executable, "-m", "setui.cli", *args], capture_output=True,
                          text=True, env=env, timeout=60, stdin=subprocess.DEVNULL, cwd=cwd,
                          preexec_fn=preexec_fn)


def log(store: Store, minute: float, action: str, **fields: object) -> int:
    values: dict[str, object] = {"user": "alice", "ssh_client": "10.1.2.3", "host": "vm-web-0",
                                 "endpoint": "http://169.254.169.254", "event_id": "A-1",
                                 "event": SNAPSHOT, "incarnation": 2}
    values.update(fields)
    entry = AuditEntry(action=action, time=T0 + timedelta(minutes=minute), **values)  # type: ignore[arg-type]
    return store.audit_log.append(entry).seq


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    with Store.open_dir(path) as store:
        attempt = log(store, 1, "approve-attempt")
        log(store, 1.01, "approve-outcome", status=200, latency=0.042, attempt_seq=attempt)
        log(store, 2, "cancelled", event_id="B-2")
        log(store, 3, "refused", event_id="C-3", error="event C-3 has already started")
        log(store, 4, "approve-attempt", event_id="D-4")  # setui died before the outcome
    return path


def test_list_in_words(data_dir: Path) -> None:
    done = setui("audit", data_dir=data_dir)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines[:5]] == ["#5", "#4", "#3", "#2", "#1"]
    assert "approve-attempt" in lines[0] and "outcome unknown" in lines[0]
    assert "refused by setui: event C-3 has already started" in lines[1]
    # A record from before "dismissed" keeps its word and reads as what it was.
    assert "dismissed by the operator: nothing was sent" in lines[2]
    assert " cancelled " not in lines[2]
    assert "approved, HTTP 200 in 42 ms (attempt #1)" in lines[3]
    assert "by alice from 10.1.2.3 on vm-web-0" in lines[4]
    assert "2024-05-14 09:31:00 UTC" in lines[4] and "Reboot A-1 #2" in lines[4]
    assert "outcome unknown" not in lines[4]
    assert lines[-1] == "chain: ok, 5 records"
    limited = setui("audit", "--limit", "2", data_dir=data_dir).stdout.splitlines()
    assert [line.split()[0] for line in limited[:-1]] == ["#5", "#4"]


def test_list_json_has_stable_keys(data_dir: Path) -> None:
    done = setui("audit", "--json", data_dir=data_dir)
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["seq"] for r in records] == [5, 4, 3, 2, 1]
    assert set(records[0]) == {"seq", "time", "action", "user", "ssh_client", "host",
                               "endpoint", "event_id", "event", "incarnation", "attempt_seq",
                               "status", "error", "latency_ms", "details", "prev_hash",
                               "hash", "outcome_unknown", "not_forwarded"}
    assert records[0]["outcome_unknown"] is True and records[4]["outcome_unknown"] is False
    assert records[3]["latency_ms"] == 42.0 and records[3]["time"] == "2024-05-14T09:31:00.600000Z"
    assert records[4]["event"] == SNAPSHOT


def test_verify_ok(data_dir: Path) -> None:
    done = setui("audit", "verify", data_dir=data_dir)
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert lines[0] == "ok, 5 records"
    assert lines[1].startswith("head: record 5, sha256 ") and len(lines[1].split()[-1]) == 64
    as_json = json.loads(setui("audit", "verify", "--json", data_dir=data_dir).stdout)
    assert as_json["ok"] is True and as_json["count"] == 5 and as_json["first_bad"] is None


def tamper(data_dir: Path, *statements: str) -> None:
    conn = sqlite3.connect(data_dir / "setui.db", isolation_level=None)
    conn.execute("DROP TRIGGER audit_no_update")
    conn.execute("DROP TRIGGER audit_no_delete")
    for statement in statements:
        conn.execute(statement)
    conn.close()


@pytest.mark.parametrize("statements, first_bad, words", [
    (["UPDATE audit SET status = 500 WHERE seq = 2"], 2, "record 2 was altered"),
    (["DELETE FROM audit WHERE seq = 3"], 3, "record 3 was removed"),
    (["INSERT INTO audit SELECT 6, time, action, 'mallory', ssh_client, host, endpoint, "
      "event_id, event_json, incarnation, attempt_seq, status, error, latency_ms, "
      "details_json, hash, hash FROM audit WHERE seq = 5"], 6, "record 6 was inserted"),
])
def test_verify_finds_tampering(data_dir: Path, statements: list[str], first_bad: int,
                                words: str) -> None:
    """Change, delete, insert a row with sqlite3: each is found (the store's own tests
    cover every other way)."""
    tamper(data_dir, *statements)
    done = setui("audit", "verify", data_dir=data_dir)
    assert done.returncode == 1
    assert done.stdout.splitlines()[0].startswith(f"TAMPERED: {words}")
    assert f"Records from {first_bad} on cannot be trusted." in done.stdout


def test_a_broken_chain_in_json_and_in_the_listing(data_dir: Path) -> None:
    tamper(data_dir, "DELETE FROM audit WHERE seq = 5")
    as_json = json.loads(setui("audit", "verify", "--json", data_dir=data_dir).stdout)
    assert as_json["ok"] is False and as_json["first_bad"] == 5
    assert as_json["problem"] == "record 5 was removed from the end of the log"
    listing = setui("audit", data_dir=data_dir)
    assert listing.returncode == 1
    assert listing.stdout.splitlines()[-1].startswith("chain: BROKEN: record 5 was removed")


def test_export_writes_json_lines_an_auditor_can_check(data_dir: Path,
                                                       tmp_path: Path) -> None:
    target = tmp_path / "out" / "audit.jsonl"
    target.parent.mkdir()
    done = setui("audit", "export", str(target), data_dir=data_dir)
    assert done.returncode == 0, done.stderr
    assert f"exported 5 records to {target}" in done.stderr
    if os.name == "posix":
        assert stat.S_IMODE(target.stat().st_mode) == 0o600
    records = [json.loads(line) for line in target.read_text().splitlines()]
    assert [r["seq"] for r in records] == [1, 2, 3, 4, 5]
    # The chain, recomputed from the export alone, as documented in setui.store.audit.
    prev = "0" * 64
    for record in records:
        content = {k: v for k, v in record.items() if k not in ("hash", "prev_hash")}
        text = prev + "\n" + json.dumps(content, sort_keys=True, separators=(",", ":"))
        assert record["prev_hash"] == prev
        assert hashlib.sha256(text.encode()).hexdigest() == record["hash"]
        prev = record["hash"]
    again = setui("audit", "export", str(target), "--force", data_dir=data_dir)
    assert again.returncode == 0 and len(target.read_text().splitlines()) == 5
    assert list(target.parent.iterdir()) == [target]  # no temporary files left
    to_stdout = setui("audit", "export", "-", data_dir=data_dir)
    assert to_stdout.stdout.splitlines() == target.read_text().splitlines()


def test_export_says_its_json_flag_changes_nothing(data_dir: Path) -> None:
    """Export is JSON lines with or without --json: the flag is accepted (a script may
    pass it to every command and asks for what it gets) and its help says so."""
    plain = setui("audit", "export", "-", data_dir=data_dir)
    for asked in (("audit", "export", "-", "--json"), ("audit", "--json", "export", "-")):
        done = setui(*asked, data_dir=data_dir)
        assert done.returncode == 0, done.stderr
        assert done.stdout == plain.stdout
    helped = setui("audit", "export", "--help", data_dir=data_dir)
    assert "--json" in helped.stdout
    assert "changes nothing" in " ".join(helped.stdout.split()), helped.stdout


def test_export_never_overwrites_without_force(data_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "audit.jsonl"
    target.write_text("an earlier export\n")
    refused = setui("audit", "export", str(target), data_dir=data_dir)
    assert refused.returncode == 1
    assert refused.stderr == (f"setui audit export: {target} already exists; nothing was "
                              "written (--force replaces it)\n")
    assert target.read_text() == "an earlier export\n"
    empty = setui("audit", "export", str(target), data_dir=tmp_path / "none")
    assert empty.returncode == 1 and target.read_text() == "an earlier export\n"
    forced = setui("audit", "export", str(target), "--force", data_dir=data_dir)
    assert forced.returncode == 0, forced.stderr
    assert len(target.read_text().splitlines()) == 5


def test_export_of_a_broken_chain_warns(data_dir: Path, tmp_path: Path) -> None:
    tamper(data_dir, "DELETE FROM audit WHERE seq = 2")
    done = setui("audit", "export", str(tmp_path / "x.jsonl"), data_dir=data_dir)
    assert done.returncode == 1 and "WARNING: the chain is broken" in done.stderr
    assert len((tmp_path / "x.jsonl").read_text().splitlines()) == 4


def test_export_to_an_unwritable_place(data_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    done = setui("audit", "export", str(tmp_path / "file" / "x.jsonl"), data_dir=data_dir)
    assert done.returncode == 1 and "cannot write" in done.stderr


def test_empty_log(tmp_path: Path) -> None:
    empty = tmp_path / "none"
    assert setui("audit", "verify", data_dir=empty).stdout.splitlines()[0] == "ok, 0 records"
    assert "audit log is empty" in setui("audit", data_dir=empty).stdout
    assert setui("audit", "export", "-", data_dir=empty).stdout == ""
    assert not empty.exists()


def test_a_damaged_database_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "setui.db").write_bytes(b"this is not sqlite" * 300)
    for args in (["audit"], ["audit", "verify"], ["history"]):
        done = setui(*args, data_dir=data)
        assert done.returncode == 1
        assert "damaged or is not a setui database" in done.stderr
        assert "Traceback" not in done.stderr


def test_hostile_records_are_printed_safely(tmp_path: Path) -> None:
    hostile = "\x1b]0;owned\x07\u202e\x1b[2J"
    with Store.open_dir(tmp_path / "data") as store:
        log(store, 1, "refused", user=hostile, host=hostile, ssh_client=hostile,
            event_id=hostile, error=hostile, event={"EventType": hostile})
    done = setui("audit", data_dir=tmp_path / "data")
    assert not any(c in done.stdout for c in "\x1b\x07\u202e")
    assert "\\x1b]0;owned\\x07\\u202e" in done.stdout


def test_truncation_with_the_head_rewritten_is_tampering(data_dir: Path) -> None:
    """Records cut off the end, and audit_head set to the new last record: the chain in
    the database is consistent, but the witness beside it still says 5."""
    with Store.open_dir(data_dir, readonly=True) as store:
        records = store.audit_log.records(oldest_first=True)
    tamper(data_dir, "DELETE FROM audit WHERE seq >= 4",
           f"UPDATE audit_head SET seq = 3, hash = '{records[2].hash}'")
    done = setui("audit", "verify", data_dir=data_dir)
    assert done.returncode == 1
    assert done.stdout.splitlines()[0] == (
        "TAMPERED: records were removed from the end: the witness says 5 records ending in "
        f"hash {records[4].hash}, the log has 3")
    assert "Records from 4 on cannot be trusted." in done.stdout
    export = setui("audit", "export", "-", data_dir=data_dir)
    assert export.returncode == 1 and "the chain is broken" in export.stderr


def test_no_witness_is_a_warning(data_dir: Path) -> None:
    """A store written by an older setui has no witness: said, but not called tampering."""
    (data_dir / "setui.db.audit-head").unlink()
    done = setui("audit", "verify", data_dir=data_dir)
    assert done.returncode == 0, done.stdout
    lines = done.stdout.splitlines()
    assert lines[0] == "ok, 5 records" and lines[2].startswith(
        "WARNING: there is no audit head witness")
    as_json = json.loads(setui("audit", "verify", "--json", data_dir=data_dir).stdout)
    assert as_json["ok"] is True and "no audit head witness" in as_json["warning"]
    listing = setui("audit", data_dir=data_dir)
    assert listing.returncode == 0
    assert listing.stdout.splitlines()[-1].startswith("chain: ok, 5 records (warning: ")


def forged(seq: int, prev_hash: str) -> str:
    """An INSERT of a record whose hash is right and chains on ``prev_hash``, as someone
    who read how the hash is made (setui.store.audit) could make it."""
    values = {"seq": seq, "time": "2024-05-14T09:34:00.000000Z", "action": "approve-outcome",
              "user": "mallory", "ssh_client": None, "host": "vm-web-0",
              "endpoint": "http://169.254.169.254", "event_id": "D-4", "event": None,
              "incarnation": 2, "attempt_seq": 5, "status": 200, "error": None,
              "latency_ms": 42.0, "details": {}}
    digest = hashlib.sha256((prev_hash + "\n" + json.dumps(
        values, sort_keys=True, separators=(",", ":"))).encode()).hexdigest()
    return ("INSERT INTO audit (seq, time, action, os_user, ssh_client, host, endpoint, "
            "event_id, event_json, incarnation, attempt_seq, status, error, latency_ms, "
            f"details_json, prev_hash, hash) VALUES ({seq}, '{values['time']}', "
            f"'approve-outcome', 'mallory', NULL, 'vm-web-0', '{values['endpoint']}', "
            f"'D-4', NULL, 2, 5, 200, NULL, 42.0, '{{}}', '{prev_hash}', '{digest}')")


@pytest.mark.parametrize("witness", ["none", "behind"])
def test_a_forged_newest_record_the_witness_does_not_name_is_tampering(
        data_dir: Path, witness: str) -> None:
    """The newest record replaced by a forgery that chains on the record before it, the
    log's head left as it was, and no witness to compare it with: none at all (a store of
    an older setui), or one still naming the record before (written after each commit, it
    may trail). Only the log's own head shows the forgery."""
    with Store.open_dir(data_dir, readonly=True) as store:
        records = store.audit_log.records(oldest_first=True)
    path = data_dir / "setui.db.audit-head"
    if witness == "none":
        path.unlink()
    else:
        path.write_text(json.dumps({"seq": 4, "hash": records[3].hash}))
    tamper(data_dir, "DELETE FROM audit WHERE seq = 5", forged(5, records[3].hash))
    done = setui("audit", "verify", data_dir=data_dir)
    assert done.returncode == 1, done.stdout
    assert done.stdout.splitlines()[0] == (
        "TAMPERED: record 5 was replaced (it does not match the log's head)")
    assert "Records from 5 on cannot be trusted." in done.stdout


def test_a_dropped_head_table_is_tampering(data_dir: Path) -> None:
    tamper(data_dir, "DROP TABLE audit_head")
    done = setui("audit", "verify", data_dir=data_dir)
    assert done.returncode == 1, done.stderr
    assert done.stdout.startswith("TAMPERED: the audit_head table was removed")
    assert "cannot verify" not in done.stdout + done.stderr


def test_an_empty_database_file_verifies_as_an_empty_log(tmp_path: Path) -> None:
    """A setui killed between creating the file and writing the schema leaves 0 bytes."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "setui.db").write_bytes(b"")
    done = setui("audit", "verify", data_dir=data)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0] == "ok, 0 records"
    assert "audit log is empty" in setui("audit", data_dir=data).stdout


def test_a_directory_named_like_the_database(tmp_path: Path) -> None:
    (tmp_path / "data" / "setui.db").mkdir(parents=True)
    for args in (["audit"], ["audit", "verify"], ["audit", "export", "-"]):
        done = setui(*args, data_dir=tmp_path / "data")
        assert done.returncode == 1
        assert "it is a directory, not a setui database" in done.stderr
        assert "disk" not in done.stderr and "Traceback" not in done.stderr


# -- a data directory the reader cannot write ---------------------------------------------------
def record_some(data_dir: Path) -> Store:
    from setui.core.model import parse_document

    store = Store.open_dir(data_dir)
    for minute in range(3):
        log(store, minute, "refused", error="for the test")
    store.history.record(parse_document({"DocumentIncarnation": 7, "Events": []}),
                         seen_at=T0, endpoint="http://e")
    return store


@pytest.mark.parametrize("state", ["closed", "snapshot-with-wal"])
def test_reading_a_store_in_a_directory_that_cannot_be_written(
        unwritable: tuple[Path, Callable[[], Any] | None], tmp_path: Path, state: str) -> None:
    """history, audit, verify and export all read it: "closed" has no -wal (read as
    immutable), "snapshot-with-wal" is a copy taken while setui was writing, whose newest
    records are only in the -wal (read from a private copy)."""
    data, how = unwritable
    if state == "closed":
        record_some(data).close()
        assert not (data / "setui.db-wal").exists()
    else:
        writer = record_some(tmp_path / "live")
        data.mkdir(mode=0o700)
        for name in ("setui.db", "setui.db-wal", "setui.db.audit-head"):
            shutil.copyfile(tmp_path / "live" / name, data / name)
        writer.close()
        assert (data / "setui.db-wal").stat().st_size > 0
    lock_up(data, how)
    before = sorted(p.name for p in data.iterdir())
    verify = setui("audit", "verify", data_dir=data, preexec_fn=how)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert verify.stdout.splitlines()[0] == "ok, 3 records"
    assert "WARNING" not in verify.stdout  # the witness was found and agrees
    listing = setui("audit", data_dir=data, preexec_fn=how)
    assert listing.returncode == 0 and listing.stdout.count("refused by setui") == 3
    export = setui("audit", "export", "-", data_dir=data, preexec_fn=how)
    assert export.returncode == 0 and len(export.stdout.splitlines()) == 3
    history = setui("history", "--json", data_dir=data, preexec_fn=how)
    assert history.returncode == 0, history.stderr
    assert [json.loads(line)["incarnation"] for line in history.stdout.splitlines()] == [7]
    assert sorted(p.name for p in data.iterdir()) == before  # nothing written beside it
