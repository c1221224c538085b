"""Real processes: two writers at once, and a writer killed with SIGKILL mid-write."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from store_helpers import entry

from setui.store import Store

POSIX = os.name == "posix"

# A writer as `setui watch` and a dashboard are: it polls the same documents (incarnations
# 1..N, each seen several times), and appends audit records in between. It prints the seq
# of every audit record once committed, and "done" at the end.
WRITER = textwrap.dedent("""
    import json, os, sys, time
    from datetime import datetime, timedelta, timezone
    from setui.core.model import parse_document
    from setui.core.tracker import Tracker
    from setui.store import AuditEntry, Store

    data_dir, name, incarnations, repeats, forever, go = sys.argv[1:7]
    pause = 0.002 if forever != "forever" else 0.0
    T0 = datetime(2024, 5, 14, 9, 30, tzinfo=timezone.utc)
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
                seen = T0 + timedelta(minutes=number + loop * 10_000, seconds=repeat * 61)
                store.record_document(doc, seen_at=seen, endpoint="http://e",
                                      changes=tracker.update(doc, seen))
                record = store.audit_append(AuditEntry(
                    action="cancelled", time=datetime.now(timezone.utc), user=name,
                    host="h", endpoint="http://e", event_id=f"E-{number // 2}",
                    details={"pad": "y" * 300}))
                print(f"audit {record.seq} {doc.incarnation}", flush=True)
                time.sleep(pause)  # a poller, not a tight loop: the other writer gets turns
        loop += 1
        if forever != "forever":
            break
    store.close()
    print("done", flush=True)
""")


def writer(data_dir: Path, name: str, incarnations: int, repeats: int,
           forever: bool = False, go: Path | None = None) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(data_dir), name, str(incarnations), str(repeats),
         "forever" if forever else "once", str(go) if go else "-"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    return proc


def test_two_processes_share_the_history_without_duplicates(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    Store.open_dir(data_dir).close()
    incarnations, repeats = 60, 4
    go = tmp_path / "go"
    procs = [writer(data_dir, name, incarnations, repeats, go=go) for name in ("alice", "bob")]
    go.touch()
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        outputs.append(out.splitlines())
    assert all(lines[-1] == "done" for lines in outputs)
    seqs = [int(line.split()[1]) for lines in outputs for line in lines[:-1]]
    assert len(seqs) == 2 * incarnations * repeats
    # Both really wrote at the same time: their records interleave in the log.
    owners = [int(line.split()[1]) for line in outputs[0][:-1]]
    assert max(owners) - min(owners) + 1 > len(owners)
    with Store.open_dir(data_dir) as store:
        records = store.history(limit=None)
        numbers = [r.incarnation for r in records]
        assert sorted(numbers) == list(range(1, incarnations + 1))  # once each
        audit = store.audit(oldest_first=True)
        assert sorted(r.seq for r in audit) == sorted(seqs) == list(range(1, len(seqs) + 1))
        assert {r.user for r in audit} == {"alice", "bob"}
        assert store.verify_audit().ok
        # One story, whoever wrote each row first.
        assert [s.kind for s in store.event_story("E-1") if s.source == "history"] == [
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
        result = store.verify_audit()
        assert result.ok, result.problem
        seqs = {r.seq for r in store.audit()}
        assert {seq for seq, _ in committed} <= seqs  # no committed record lost
        stored = {r.incarnation for r in store.history(limit=None)}
        assert {inc for _, inc in committed} <= stored
        # And it goes on: the next record continues the chain.
        store.audit_append(entry())
        assert store.verify_audit().ok
