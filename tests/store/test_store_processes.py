"""Real processes: two writers at once, and a writer killed with SIGKILL mid-write."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from setui.store import Store
from tests.support.store_helpers import entry

pytestmark = pytest.mark.slow  # starts processes: the slow tier (docs/testing.md)

POSIX = os.name == "posix"

# A writer as `setui watch` and a dashboard are: it polls the same documents (incarnations
# 1..N, each seen several times), and appends audit records in between. It prints the seq
# of every audit record once committed, and "done" at the end. Each writer sees each
# document `offset` seconds after the first one would, as two pollers do.
#
# With a `go` file, the writers also meet at two barriers (files in a directory, polled;
# no timing): after each has committed its first audit record, and before each commits
# its last. So both first records come before both last ones, whatever the scheduler
# does, and each writer's records necessarily enclose some of the other's.
WRITER = textwrap.dedent("""
    import json, os, sys, time
    from datetime import datetime, timedelta, timezone
    from setui.core.model import parse_document
    from setui.core.tracker import Tracker
    from setui.store import AuditEntry, Store

    data_dir, name, incarnations, repeats, forever, go, offset = sys.argv[1:8]
    pause = 0.002 if forever != "forever" else 0.0
    T0 = datetime(2024, 5, 14, 9, 30, tzinfo=timezone.utc)

    def barrier(stage):
        if go == "-":
            return
        open(f"{go}.{stage}.{name}", "w").close()
        deadline = time.monotonic() + 120
        directory, prefix = os.path.dirname(go), os.path.basename(go) + f".{stage}."
        while sum(f.startswith(prefix) for f in os.listdir(directory)) < 2:
            if time.monotonic() > deadline:
                sys.exit(f"{name}: the other writer never reached barrier {stage}")
            time.sleep(0.005)

    store = Store.open_dir(data_dir, timeout=10.0)
    print("ready", flush=True)
    while go != "-" and not os.path.exists(go):  # start together with the other writer
        time.sleep(0.005)
    tracker = Tracker()
    loop = 0
    while True:
        for number in range(1, int(incarnations) + 1):
            events = [{"EventId": f"E-{number // 2}", "EventType": "Freeze",
                       "EventStatus": "Started" if number % 2 else "Scheduled",
                       "Resources": ["vm-0"], "NotBefore": "" if number % 2 else
                       "Tue, 14 May 2024 10:00:00 GMT",
                       "Description": "x" * 400}]
            doc = parse_document(json.dumps({"DocumentIncarnation": number + loop * 10_000,
                                             "Events": events}))
            for repeat in range(int(repeats)):
                seen = T0 + timedelta(minutes=number + loop * 10_000,
                                      seconds=repeat * 61 + int(offset))
                store.history.record(doc, seen_at=seen, endpoint="http://e",
                                     changes=tracker.update(doc, seen))
                last = number == int(incarnations) and repeat == int(repeats) - 1
                if last and forever != "forever":
                    barrier("last")
                record = store.audit_log.append(AuditEntry(
                    action="cancelled", time=datetime.now(timezone.utc), user=name,
                    host="h", endpoint="http://e", event_id=f"E-{number // 2}",
                    details={"pad": "y" * 300}))
                print(f"audit {record.seq} {doc.incarnation}", flush=True)
                if number == 1 and repeat == 0 and loop == 0:
                    barrier("first")
                time.sleep(pause)  # a poller, not a tight loop: the other writer gets turns
        loop += 1
        if forever != "forever":
            break
    store.close()
    print("done", flush=True)
""")


def writer(data_dir: Path, name: str, incarnations: int, repeats: int,
           forever: bool = False, go: Path | None = None,
           offset: int = 0) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(data_dir), name, str(incarnations), str(repeats),
         "forever" if forever else "once", str(go) if go else "-", str(offset)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    return proc


def test_two_processes_share_the_history_without_duplicates(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    Store.open_dir(data_dir).close()
    incarnations, repeats = 60, 4
    (tmp_path / "sync").mkdir()
    go = tmp_path / "sync" / "go"
    # bob sees every document 7 s after alice: one row each, first_seen the earlier.
    procs = [writer(data_dir, name, incarnations, repeats, go=go, offset=offset)
             for name, offset in (("alice", 0), ("bob", 7))]
    go.touch()
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        outputs.append(out.splitlines())
    assert all(lines[-1] == "done" for lines in outputs)
    seqs = [int(line.split()[1]) for lines in outputs for line in lines[:-1]]
    assert len(seqs) == 2 * incarnations * repeats
    # Both really wrote at the same time: each one's records enclose some of the other's
    # (guaranteed by the barriers, not by luck of timing).
    for lines in outputs:
        owned = [int(line.split()[1]) for line in lines[:-1]]
        assert max(owned) - min(owned) + 1 > len(owned)
    with Store.open_dir(data_dir) as store:
        records = store.history.incarnations(limit=None)
        numbers = [r.incarnation for r in records]
        assert sorted(numbers) == list(range(1, incarnations + 1))  # once each
        t0 = datetime(2024, 5, 14, 9, 30, tzinfo=timezone.utc)
        for record in records:  # whoever inserted the row, the earliest sighting counts
            assert record.first_seen == t0 + timedelta(minutes=record.incarnation)
            assert record.last_seen == t0 + timedelta(minutes=record.incarnation,
                                                      seconds=(repeats - 1) * 61 + 7)
        audit = store.audit_log.records(oldest_first=True)
        assert sorted(r.seq for r in audit) == sorted(seqs) == list(range(1, len(seqs) + 1))
        assert {r.user for r in audit} == {"alice", "bob"}
        assert store.audit_log.verify().ok
        # One story, whoever wrote each row first.
        assert [s.kind for s in store.record.event_story("E-1") if s.source == "history"] == [
            "appeared", "started", "completed"]


@pytest.mark.skipif(not POSIX, reason="SIGKILL is POSIX")
@pytest.mark.parametrize("after_lines", [3, 40, 157])
def test_sigkill_mid_write_leaves_a_sound_store(tmp_path: Path, after_lines: int) -> None:
    data_dir = tmp_path / "data"
    proc = writer(data_dir, "victim", 1000, 2, forever=True)
    assert proc.stdout is not None
    committed: list[tuple[int, int]] = []
    deadline = time.monotonic() + 30
    while len(committed) < after_lines and time.monotonic() < deadline:
        line = proc.stdout.readline()
        assert line.startswith("audit "), line + (proc.stderr.read() if proc.stderr else "")
        _, seq, incarnation = line.split()
        committed.append((int(seq), int(incarnation)))
    assert proc.poll() is None, "the writer must still be writing when it is killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    proc.stdout.close()
    assert proc.stderr is not None
    proc.stderr.close()
    with Store.open_dir(data_dir) as store:
        result = store.audit_log.verify()
        assert result.ok, result.problem
        seqs = {r.seq for r in store.audit_log.records()}
        assert {seq for seq, _ in committed} <= seqs  # no committed record lost
        stored = {r.incarnation for r in store.history.incarnations(limit=None)}
        assert {inc for _, inc in committed} <= stored
        # And it goes on: the next record continues the chain.
        store.audit_log.append(entry())
        assert store.audit_log.verify().ok
