"""contrib/loganalytics's KQL, checked against lines setui really writes.

A real `setui watch` (under a journal stream, as the recorder service runs) watches the
emulator; a real `setui approve` approves one event, which then starts early. The regular
expressions are read out of the .kql files themselves and applied to those lines with
Python's `re` (the patterns use only what RE2, KQL's engine, and `re` share), and the
queries' summaries are redone in Python: a change of the line format fails here."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import pytest

from setui.emulator.scenario import load_scenario
from setui.emulator.server import Emulator
from setui.system.auditforward import rfc5424
from tests.support.children import SETUI
from tests.support.scripted import Drop, ScriptedImds, document, event

pytestmark = pytest.mark.slow  # starts processes: the slow tier (docs/testing.md)

ROOT = Path(__file__).resolve().parents[2]
KQL = ROOT / "contrib" / "loganalytics"
PATIENCE = 60.0
E1 = "11111111-1111-4111-8111-111111111111"
E2 = "22222222-2222-4222-8222-222222222222"
E3 = "33333333-3333-4333-8333-333333333333"
E4 = "44444444-4444-4444-8444-444444444444"


def patterns(name: str) -> dict[str, re.Pattern[str]]:
    """Every `let NAME = @"...";` of a .kql file (a verbatim string: "" is a quote)."""
    text = (KQL / name).read_text(encoding="utf-8")
    found = {m.group(1): re.compile(m.group(2).replace('""', '"'))
             for m in re.finditer(r'^let (\w+) = @"((?:[^"]|"")*)";$', text, re.MULTILINE)}
    assert found, f"no patterns in {name}"
    return found


def extract(pattern: re.Pattern[str], group: int, text: str) -> str:
    """KQL's extract(): the group of the first match, or an empty string."""
    match = pattern.search(text)
    return (match.group(group) or "") if match else ""


def journal_lines(tmp_path: Path) -> tuple[list[str], str, list[str]]:
    """The watch's journal lines (as SyslogMessage holds them), the approver's account,
    and the audit records the approval forwarded to a UDP syslog collector (RFC 5424)."""
    scenario = tmp_path / "scenario.json"
    # The events appear two seconds in: the emulator was seen to answer 200 to an approval
    # in a scenario's first second and never start the event (reported; not this test's).
    scenario.write_text(json.dumps({"name": "kql", "vm_name": "web-0", "tail": 3600,
                                    "events": [
        {"id": E1, "type": "Reboot", "at": 2, "notice": "10m", "duration": 30,
         "resources": ["web-0", "web-1"]},
        {"id": E2, "type": "Freeze", "at": 2, "notice": "20m", "duration": 5,
         "resources": ["web-1"]},
        {"id": E3, "type": "Redeploy", "at": 2, "notice": "30m", "duration": -1,
         "resources": [f"web-{i}" for i in range(2, 9)]},
        {"id": E4, "type": "Redeploy", "at": 2, "notice": "2d", "duration": -1,
         "resources": ["web-9"]},
    ]}))
    with Emulator(load_scenario(str(scenario))) as emulator:
        return watched_approval(tmp_path, emulator.url, E1, "--allow-other-vms",
                                shown=E4, told="approved by", approved=True)


def watched_approval(tmp_path: Path, url: str, event_id: str, *more: str, shown: str,
                     told: str, approved: bool) -> tuple[list[str], str, list[str]]:
    """``setui watch`` under a journal stream while ``setui approve EVENT --yes`` (once
    ``shown`` is in the watch's lines) forwards its records to a UDP syslog collector;
    until the watch says ``told``. The watch's lines as SyslogMessage holds them, the
    approver's account, the forwarded records (attempt and outcome, RFC 5424)."""
    out = tmp_path / "journal.txt"
    data = tmp_path / "data"
    with out.open("w") as stream:
        stat = os.fstat(stream.fileno())
        env = {**os.environ, "JOURNAL_STREAM": f"{stat.st_dev}:{stat.st_ino}"}
        common = ["--endpoint", url, "--data-dir", str(data), "--vm-name", "web-0"]
        watch = subprocess.Popen([*SETUI, "watch", *common, "--interval", "0.2"], env=env,
                                 stdout=stream, stderr=subprocess.PIPE, text=True,
                                 stdin=subprocess.DEVNULL)
        collector = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        collector.bind(("127.0.0.1", 0))
        collector.settimeout(PATIENCE)
        forward = {**os.environ,
                   "SETUI_AUDIT_FORWARD": f"udp://127.0.0.1:{collector.getsockname()[1]}"}
        try:
            wait_for_text(out, shown, "the events' appeared lines")
            approve = subprocess.run([*SETUI, "approve", event_id, "--yes", *more, *common],
                                     capture_output=True, text=True, timeout=PATIENCE,
                                     stdin=subprocess.DEVNULL, env=forward)
            assert (approve.returncode == 0) == approved, approve.stdout + approve.stderr
            wait_for_text(out, told, "the started line with its approver")
            records = [collector.recv(65536).decode() for _ in range(2)]  # attempt, outcome
        finally:
            collector.close()
            watch.terminate()
            watch.communicate(timeout=PATIENCE)
    audit = subprocess.run([*SETUI, "audit", "--json", "--data-dir", str(data)],
                           capture_output=True,
                           text=True, timeout=PATIENCE, stdin=subprocess.DEVNULL)
    user = next(record["user"] for record in map(json.loads, audit.stdout.splitlines())
                if record["action"] == "approve-outcome")
    # journald takes the "<N>" priority off: SyslogMessage is the rest of the line.
    return ([re.sub(r"^<\d>", "", line) for line in out.read_text().splitlines()], user,
            records)


def wait_for_text(path: Path, text: str, what: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while text not in path.read_text():
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {PATIENCE} s: {path.read_text()[-2000:]!r}")
        time.sleep(0.05)


def test_the_queries_read_the_lines_setui_writes(tmp_path: Path) -> None:
    lines, user, records = journal_lines(tmp_path)

    # events-per-vm.kql
    line = patterns("events-per-vm.kql")["line"]
    changes = {"appeared", "rescheduled", "changed", "started", "completed", "cancelled",
               "gone"}
    per_vm: dict[str, set[str]] = defaultdict(set)
    started: dict[str, set[str]] = defaultdict(set)
    types: dict[str, set[str]] = defaultdict(set)
    for message in lines:
        change = extract(line, 1, message)
        if change not in changes:
            continue
        event_id = extract(line, 6, message)
        for vm in extract(line, 8, message).split(", "):
            if vm and not vm.startswith("+"):
                per_vm[vm].add(event_id)
                types[vm].add(extract(line, 4, message))
                if change == "started":
                    started[vm].add(event_id)
    assert per_vm["web-0"] == {E1} and per_vm["web-1"] == {E1, E2}
    assert types["web-1"] == {"Reboot", "Freeze"}
    assert started["web-0"] == {E1}
    # A list cut at five: the first five VMs, and "+2 more" is not taken for a VM.
    assert {vm for vm, ids in per_vm.items() if E3 in ids} == {f"web-{i}" for i in range(2, 7)}
    # Connection lines are not events.
    assert any(re.fullmatch(r"connection +live", m) for m in lines)
    assert all(extract(line, 1, m) not in changes for m in lines if "connection" in m)
    appeared = next(m for m in lines if E1 in m and extract(line, 1, m) == "appeared")
    assert re.fullmatch(r"T-\d+:\d\d", extract(line, 2, appeared))
    assert extract(line, 3, appeared).isdigit() and extract(line, 5, appeared) == "Scheduled"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", extract(line, 7, appeared))
    assert extract(line, 9, appeared)  # "(this VM)"
    # A countdown in days has a space in it ("T-1d 23h"): the columns after it still parse.
    far = next(m for m in lines if E4 in m and extract(line, 1, m) == "appeared")
    assert re.fullmatch(r"T-\d+d \d\dh", extract(line, 2, far)), far
    assert extract(line, 6, far) == E4 and per_vm["web-9"] == {E4}
    started_line = next(m for m in lines if extract(line, 1, m) == "started")
    assert extract(line, 6, started_line) == E1 and extract(line, 2, started_line) == "-"

    # approvals-by-operator.kql, over the forwarded records.
    read = outcomes_forwarded(records)
    assert set(read) == {f"{form} {action}" for form in ("rfc5424", "message")
                         for action in ("approve-attempt", "approve-outcome")}, records
    found = patterns("approvals-by-operator.kql")
    record, person = found["record"], found["person"]
    for form in ("rfc5424", "message"):
        done = read[f"{form} approve-outcome"]
        assert done["event_id"] == E1 and done["outcome"] == "accepted: HTTP 200"
        assert done["host"] and re.fullmatch(r"[0-9a-f]{64}", done["hash"])
        operator = extract(person, 2, done["actor"]) or extract(person, 1, done["actor"])
        assert operator == user or done["actor"].startswith(f"{user} (login {operator}")

    # An EventId holding a whole message of its own (the structured data comes first) is
    # never read as the record: the message is read from where the structured data ends.
    fake = ("x\"] setui audit record 9: approve-outcome EventId=F by mallory on web-9: "
            f"accepted: HTTP 200 (hash {'f' * 64})")
    hostile = rfc5424({"seq": 3, "action": "approve-attempt", "event_id": fake,
                       "user": "alice", "host": "web-0", "hash": "a" * 64}).decode()
    assert extract(record, 1, hostile) in ("", "3"), hostile
    assert "mallory" not in extract(record, 4, hostile)

    # approvals-seen-starting.kql, over the watch's lines
    assert seen_starting(lines) == {(user, "Approvals"): {E1}}, lines


def outcomes_forwarded(records: list[str]) -> dict[str, dict[str, str]]:
    """approvals-by-operator.kql's `record` over the forwarded records, as the collector
    got them (RFC 5424, structured data first) and as the message alone: each form's
    records by action, their groups by name."""
    record = patterns("approvals-by-operator.kql")["record"]
    names = ("seq", "action", "event_id", "actor", "host", "outcome", "hash")
    read: dict[str, dict[str, str]] = {}
    for form, lines in (("rfc5424", records),
                        ("message", [r[r.index("setui audit record"):] for r in records])):
        for line in lines:
            groups = {name: extract(record, i, line) for i, name in enumerate(names, 1)}
            read[f"{form} {groups['action']}"] = groups
    return read


def seen_starting(lines: list[str]) -> dict[tuple[str, str], set[str]]:
    """approvals-seen-starting.kql redone: the EventIds counted under each operator, as
    Approvals or as Unknown."""
    found = patterns("approvals-seen-starting.kql")
    counted: dict[tuple[str, str], set[str]] = defaultdict(set)
    for message in lines:
        if extract(found["line"], 1, message) != "started":
            continue
        if not extract(found["approval"], 1, message):
            continue
        unsure = extract(found["approval"], 4, message)
        operator = extract(found["approval"], 2, message) or unsure or "(another VM or Azure)"
        counted[(operator, "Unknown" if unsure else "Approvals")].add(
            extract(found["line"], 6, message))
    return counted


def test_an_approval_of_unknown_outcome_is_counted_as_unknown(
        tmp_path: Path, scripted: ScriptedImds) -> None:
    """The POST is read, the event starts, and the connection is closed unanswered: the
    approval may be what started it. Both queries count it as Unknown, never as an
    approval nor as a failure."""
    scripted.serve(document(7, event(E1, ["web-0"])))
    scripted.on_posts(Drop(then=document(8, event(E1, ["web-0"], status="Started"))))
    lines, user, records = watched_approval(
        tmp_path, scripted.url, E1, shown=E1, approved=False,
        told="outcome unknown: it may be what started it")
    assert seen_starting(lines) == {(user, "Unknown"): {E1}}, lines
    read = outcomes_forwarded(records)
    for form in ("rfc5424", "message"):
        outcome = read[f"{form} approve-outcome"]
        assert outcome["event_id"] == E1, read
        assert outcome["outcome"].startswith("outcome unknown: try 1 of 1 may have reached "
                                             "the service ("), read
        assert re.fullmatch(r"[0-9a-f]{64}", outcome["hash"]), read
