"""Parse + track one document of 1 / 100 / 1,000 events.

Reference: `json.loads` of the same bytes, in the same run, so the ratio says what
setui adds on top of merely decoding the JSON.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from common import Row, best_of

from setui.core.model import format_not_before, parse_document
from setui.core.tracker import Tracker

TARGETS_MS = {1: 0.2, 100: 2.0, 1000: 20.0}


def document(count: int, incarnation: int) -> bytes:
    start = datetime(2026, 11, 22, 10, 0, tzinfo=timezone.utc)
    events = [
        {
            "EventId": f"{i:08x}-0000-4000-8000-{incarnation:012x}",
            "EventStatus": "Scheduled" if i % 3 else "Started",
            "EventType": ["Freeze", "Reboot", "Redeploy", "Preempt", "Terminate"][i % 5],
            "ResourceType": "VirtualMachine",
            "Resources": [f"vm_{i}", f"vm_{i + 1}"],
            "NotBefore": "" if i % 3 == 0 else format_not_before(start + timedelta(minutes=i)),
            "Description": "Virtual machine is being paused because of a memory-preserving "
                           "Live Migration operation.",
            "EventSource": "Platform" if i % 2 else "User",
            "DurationInSeconds": [5, -1, 0, 30][i % 4],
        }
        for i in range(count)
    ]
    return json.dumps({"DocumentIncarnation": incarnation, "Events": events}).encode()


def run() -> list[Row]:
    rows = []
    seen = datetime(2026, 11, 22, tzinfo=timezone.utc)
    for count, target_ms in TARGETS_MS.items():
        # Two alternating incarnations: every call parses and diffs a real change.
        bodies = [document(count, 1), document(count, 2)]
        tracker = Tracker()
        state = {"i": 0}

        def parse_and_track(tracker: Tracker = tracker, bodies: list[bytes] = bodies,
                            state: dict[str, int] = state) -> None:
            state["i"] += 1
            tracker.update(parse_document(bodies[state["i"] % 2]), seen)

        def reference(bodies: list[bytes] = bodies, state: dict[str, int] = state) -> None:
            json.loads(bodies[state["i"] % 2])

        measured = best_of(parse_and_track) * 1000
        ref = best_of(reference) * 1000
        rows.append(Row(
            figure=f"parse + track, {count:,} event{'s' if count > 1 else ''}",
            measured=f"{measured:.3f} ms", reference=f"json.loads {ref:.3f} ms",
            ratio=f"{measured / ref:.1f}x", target=f"<= {target_ms} ms",
            ok=measured <= target_ms,
        ))
    return rows
