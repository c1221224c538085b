"""`setui history` lists each stall and boot the agent measured where it happened, and
`--event` tells the event's own (in this process: the same parser and code as the CLI)."""

from __future__ import annotations

import io
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from setui.cli import build_parser
from setui.commands.history import history_command
from setui.core.impact import BOOT, STALL, STARTED, Impact
from setui.core.model import parse_document
from setui.core.tracker import Tracker
from setui.store import Store

ENDPOINT = "http://127.0.0.1:8099"
T0 = datetime(2026, 11, 25, 19, 20, tzinfo=timezone.utc)
FREEZE: dict[str, Any] = {"EventId": "C7061BAC-AFDC-4513-B24B-AA5F13A16123", "EventType": "Freeze",
          "ResourceType": "VirtualMachine", "Resources": ["web-0"], "EventSource": "Platform",
          "Description": "", "DurationInSeconds": 5}


def recorded(data_dir: Path) -> None:
    documents = [
        {"DocumentIncarnation": 1, "Events": []},
        {"DocumentIncarnation": 2, "Events": [{**FREEZE, "EventStatus": "Scheduled",
                                               "NotBefore": "Wed, 25 Nov 2026 19:22:00 GMT"}]},
        {"DocumentIncarnation": 3, "Events": [{**FREEZE, "EventStatus": "Started",
                                               "NotBefore": ""}]},
        {"DocumentIncarnation": 4, "Events": []},
    ]
    tracker = Tracker()
    with Store.open_dir(data_dir) as store:
        for minute, raw in enumerate(documents):
            document = parse_document(raw)
            at = T0 + timedelta(minutes=minute)
            store.history.record(document, seen_at=at, endpoint=ENDPOINT,
                                 changes=tracker.update(document, at))
        store.sessions.record_impact(Impact(STALL, T0 + timedelta(minutes=2, seconds=1.3), 4.8,
                                            ENDPOINT, wall_seconds=4.8, event_id=FREEZE["EventId"],
                                            event_type="Freeze", announced=5, tie=STARTED))
        store.sessions.record_impact(Impact(BOOT, T0 + timedelta(minutes=5), 133.0, ENDPOINT,
                                            first_poll=T0 + timedelta(minutes=7, seconds=13),
                                            boot_id="b"))


def history(data_dir: Path, *args: str) -> str:
    parsed = build_parser().parse_args(["history", *args, "--data-dir", str(data_dir)])
    out, err = io.StringIO(), io.StringIO()
    assert history_command(parsed, out=out, err=err) == 0, err.getvalue()
    return out.getvalue()


def test_the_list_shows_each_stall_and_boot_where_it_happened(tmp_path: Path) -> None:
    recorded(tmp_path)
    lines = history(tmp_path).splitlines()
    assert lines[1].startswith("2026-11-25 19:25:00 UTC") and "rebooted, no event" in lines[1]
    assert lines[2].startswith("2026-11-25 19:23:00 UTC")  # incarnation 4
    assert lines[3] == ("2026-11-25 19:22:01 UTC           -  ** measured: Freeze, announced "
                        "5s: the VM was paused 4.8s at 19:22:01.3 UTC **")
    assert lines[4].startswith("2026-11-25 19:22:00 UTC") and " 3  " in lines[4]
    records = [json.loads(line) for line in history(tmp_path, "--json").splitlines()]
    measured = [r for r in records if "impact" in r]
    assert [(r["impact"], r["seconds"], r["event_id"]) for r in measured] == [
        (BOOT, 133.0, None), (STALL, 4.8, FREEZE["EventId"])]
    assert not any("incarnation" in r for r in measured)


def test_the_events_story_tells_what_was_measured_of_it(tmp_path: Path) -> None:
    recorded(tmp_path)
    lines = history(tmp_path, "--event", "C7061BAC").splitlines()
    assert lines[3] == ("2026-11-25 19:22:01 UTC   agent  measured: Freeze, announced 5s: "
                        "the VM was paused 4.8s at 19:22:01.3 UTC")
    story = [json.loads(line) for line in
             history(tmp_path, "--event", "C7061BAC", "--json").splitlines()]
    assert [(s["kind"], s["source"]) for s in story] == [
        ("appeared", "history"), ("started", "history"), (STALL, "measured"),
        ("completed", "history")]
