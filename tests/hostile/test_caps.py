"""Caps on hostile input: nesting depth, ids that are not valid UTF-8, ASCII-only JSON
output, and what the history keeps of a huge or endless stream of documents."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from setui.core.model import MAX_DEPTH, DocumentError, parse_document
from setui.store import AuditEntry, Store
from setui.store import history as hist

T0 = datetime(2024, 5, 14, 9, 30, tzinfo=timezone.utc)
NASTY = "EV-\x9b\u202e-\ud800"  # a C1 CSI, a bidi override, a lone surrogate


def document(incarnation: int, event_id: str = "A-1", **extra: object) -> str:
    return json.dumps({"DocumentIncarnation": incarnation, "Events": [{
        "EventId": event_id, "EventType": "Reboot", "EventStatus": "Scheduled",
        "ResourceType": "VirtualMachine", "Resources": ["vm-0"],
        "NotBefore": "Tue, 14 May 2024 10:00:00 GMT", **extra}]})


def setui(*args: str | bytes, data_dir: Path) -> subprocess.CompletedProcess[bytes]:
    env = dict(os.environ, SETUI_DATA_DIR=str(data_dir))
    return subprocess.run([sys.executable, "-m", "setui.cli", *args], capture_output=True,
                          env=env, timeout=60, stdin=subprocess.DEVNULL)


# -- nesting ----------------------------------------------------------------------------------
@pytest.mark.parametrize("depth", [MAX_DEPTH, 970, 100_000])
def test_a_deeply_nested_document_is_refused_in_words(depth: int) -> None:
    body = document(1)[:-1] + ', "Extra": ' + "[" * depth + "]" * depth + "}"
    with pytest.raises(DocumentError, match=f"more than {MAX_DEPTH} levels deep"):
        parse_document(body)
    with pytest.raises(DocumentError, match="levels deep"):
        parse_document(body.encode())


def test_nesting_inside_strings_does_not_count() -> None:
    doc = parse_document(document(1, Description="[" * 5000 + "{" * 5000))
    assert doc.events[0].description.startswith("[[[")
    shallow = document(1)[:-1] + ', "Extra": ' + "[" * 20 + "]" * 20 + "}"
    assert parse_document(shallow).incarnation == 1


# -- ids that are not valid UTF-8, and ASCII-only JSON ---------------------------------------
@pytest.fixture
def nasty_store(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    with Store.open_dir(data) as store:
        store.history.record(parse_document(document(1, NASTY, Description=NASTY)),
                             seen_at=T0, endpoint="http://x")
        store.audit_log.append(AuditEntry(action="refused", time=T0, user="u\x9b", host="h",
                                          endpoint="http://x", event_id=NASTY, error=NASTY))
    return data


@pytest.mark.slow
@pytest.mark.parametrize("args", [
    ("audit", "--json"), ("audit", "export", "-"), ("history", "--json"),
    ("history", "--event", "EV-\\x9b\\u202e-\\ud800", "--json"), ("history", "show", "1",
                                                                   "--json")])
def test_every_json_output_is_ascii(nasty_store: Path, args: tuple[str, ...]) -> None:
    done = setui(*args, data_dir=nasty_store)
    assert done.returncode == 0, done.stderr
    assert done.stdout and all(byte < 128 for byte in done.stdout)
    for line in done.stdout.decode("ascii").splitlines():
        json.loads(line)


@pytest.mark.slow
def test_undecodable_bytes_in_an_event_id_argument(nasty_store: Path) -> None:
    for args in (("history", "--event", b"EV-\xff\xfe"),
                 ("history", "--event", b"EV-\xff", "--json")):
        done = setui(*args, data_dir=nasty_store)
        assert done.returncode in (0, 1) and b"Traceback" not in done.stderr, done.stderr
    found = setui("history", "--event", "EV-\\x9b\\u202e-\\ud800", data_dir=nasty_store)
    assert found.returncode == 0 and b"EV-" in found.stdout
    assert b"\xe2\x80\xae" not in found.stdout and b"\xc2\x9b" not in found.stdout


# -- what the history keeps -----------------------------------------------------------------
def test_a_huge_document_is_kept_cut_and_says_so(tmp_path: Path) -> None:
    huge = document(7, Description="x" * (hist.MAX_DOCUMENT_BYTES + 10))
    with Store.open_dir(tmp_path / "data") as store:
        assert store.history.record(parse_document(huge), seen_at=T0, endpoint="http://x")
        [record] = store.history.incarnations()
    assert len(record.raw_json) < 4096
    assert "not kept in full" in record.summary and "KB kept per document" in record.summary
    kept = record.document()  # still a document: the events and their main fields
    assert kept.incarnation == 7 and kept.events[0].event_id == "A-1"
    assert len(kept.events[0].description) == 200


def test_the_daily_budget_keeps_only_that_an_incarnation_was_seen(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hist, "DAILY_BUDGET_BYTES", 1200)
    with Store.open_dir(tmp_path / "data") as store:
        for number in range(1, 11):
            store.history.record(parse_document(document(number, f"E-{number}")),
                                 seen_at=T0 + timedelta(minutes=number), endpoint="http://x")
        records = store.history.incarnations(limit=None)
        assert len(records) == 10  # every incarnation is still there
        cut = [r for r in records if "history budget" in r.summary]
        assert cut and len(cut) < 10
        assert all(r.document().events == () and r.changes == () for r in cut)
        assert all("incarnation" in r.summary and "2 MB" not in r.summary for r in cut)
        # The next UTC day has a budget of its own.
        store.history.record(parse_document(document(11, "E-11")),
                             seen_at=T0 + timedelta(days=1), endpoint="http://x")
        newest = store.history.incarnations(limit=1)[0]
        assert "history budget" not in newest.summary and newest.document().events
