"""The wire codec's cost: encode + decode of a state push and of a recording answer.

The codec makes both directions from declared shapes (setui.api.shapes); the reference is
the hand-written codec they replaced, loaded from git at REFERENCE and run in the same
process, on the same values, interleaved, so both see the same neighbours. A state push
is what the agent encodes and every attached dashboard decodes each poll that changes
something; a recording answer is the biggest answer a client decodes.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import ModuleType
from typing import Any

from common import ROOT, Row, best_of, ratio, scratch

REFERENCE = "b6ed039"  # the last commit with the hand-written codec
T0 = datetime(2026, 11, 25, 19, 0, tzinfo=timezone.utc)
LIMIT = 1.15  # at most this much the reference's time


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f} ms"


def _reference(work: Path) -> ModuleType:
    source = subprocess.run(["git", "-C", str(ROOT), "show",
                             f"{REFERENCE}:src/setui/api/codec.py"], check=True,
                            capture_output=True, text=True).stdout
    path = work / "codec_reference.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("codec_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _state(codec: ModuleType) -> Any:
    """A monitor after 20 documents of 10 events, by the real tracker and state."""
    from setui.core.health import ConnectionState, Health, PollResult
    from setui.core.model import format_not_before, parse_document
    from setui.core.tracker import Tracker
    from setui.monitor.state import MonitorState

    state, tracker = MonitorState(), Tracker()
    for number in range(1, 21):
        events = [{"EventId": f"E-{i}", "EventType": "Reboot",
                   "EventStatus": "Started" if i < number % 10 else "Scheduled",
                   "Resources": ["vm-a", "vm-b"], "Description": "maintenance",
                   "NotBefore": format_not_before(T0 + timedelta(minutes=10 + number)),
                   "DurationInSeconds": -1, "EventSource": "Platform"}
                  for i in range(10)]
        document = parse_document({"DocumentIncarnation": number, "Events": events})
        at = T0 + timedelta(seconds=number)
        state.apply(PollResult(Health(state=ConnectionState.LIVE, last_success=at,
                                      last_success_mono=100.0 + number, latency=0.01),
                               document, tuple(tracker.update(document, at)), fresh=True,
                               seen_at=at))
    return codec.AgentState(state, T0, 1.0, tuple(state.anomalies), None, {},
                            codec.RecordingStatus(True))


def _recording() -> Any:
    """A week's recording: 300 documents with changes, 40 audit records, holes, impacts."""
    from setui.core.holes import Hole
    from setui.core.impact import STALL, Impact
    from setui.store.reading import RecordingParts
    from setui.store.records import AuditRecord, ChangeRecord, HookRun, IncarnationRecord

    records = tuple(IncarnationRecord(
        "http://x", n, T0 + timedelta(minutes=n), T0 + timedelta(minutes=n + 1),
        f'{{"DocumentIncarnation": {n}, "Events": []}}',
        (ChangeRecord("appeared", f"E-{n}", "Reboot", "Scheduled",
                      "Mon, 01 Jan 2026 00:00:00 GMT", "appeared"),), "1 event",
        "c" * 64, n) for n in range(300))
    audit = tuple(AuditRecord(n, "approve-outcome", T0, "alice", "vm", "http://x", None,
                              f"E-{n}", {"EventId": f"E-{n}"}, 3, n - 1, 200, None, 12.5,
                              {"api": {"uid": 1001}}, "a" * 64, "b" * 64)
                  for n in range(1, 41))
    holes = tuple(Hole(T0 + timedelta(hours=n), T0 + timedelta(hours=n, minutes=5),
                       endpoint="http://x") for n in range(20))
    impacts = tuple(Impact(STALL, T0 + timedelta(hours=n), 4.8, "http://x", event_id="E",
                           id=n) for n in range(20))
    runs = tuple(HookRun(n, "E", "prepare", "drain", "/bin/drain", T0, T0, 0, False, "")
                 for n in range(10))
    return RecordingParts("http://x", records, audit, holes, True, T0,
                          T0 + timedelta(days=7), impacts, ((T0, T0 + timedelta(7)),), runs)


def _calls(encode: Any, decode: Any, value: Any) -> dict[str, Callable[[], object]]:
    """Encode alone (the agent's side), decode alone (a front end's) and both."""
    from setui.api.protocol import Fields

    encoded = encode(value)
    return {"encode (the agent's side)": lambda: encode(value),
            "decode (a front end's side)": lambda: decode(Fields(encoded)),
            "encode + decode": lambda: decode(Fields(encode(value)))}


def run() -> list[Row]:
    import setui.api.codec as codec

    old = _reference(scratch("wire-codec"))
    cases = [
        ("state push, 10 events after 20 documents",
         _calls(lambda v: codec.encode_state(v, 200.0),
                lambda f: codec.decode_state(f, 500.0), _state(codec)),
         _calls(lambda v: old.encode_state(v, 200.0),
                lambda f: old.decode_state(f, 500.0), _state(old))),
        ("recording answer, 300 documents, 40 audit records",
         _calls(codec.encode_recording, codec.decode_recording, _recording()),
         _calls(old.encode_recording, old.decode_recording, _recording())),
    ]
    rows = []
    for name, new, ref in cases:
        for what in new:
            new_times, ref_times = [], []
            for turn in range(6):  # interleaved, each first in turn: same neighbours
                for fn, times in ((new[what], new_times), (ref[what], ref_times))[::(-1) ** turn]:
                    times.append(best_of(fn, repeat=3))
            measured, reference = min(new_times), min(ref_times)
            rows.append(Row(f"wire codec: {name}, {what}", _ms(measured),
                            f"hand-written codec ({REFERENCE}) {_ms(reference)}",
                            ratio(measured, reference), f"<= {LIMIT}x the hand-written",
                            measured <= LIMIT * reference))
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)
