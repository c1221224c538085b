"""`setui history show --diff`'s lines, from records alone: what the document itself went
through (an anomaly: no EventId) is told first, then each event once."""

from __future__ import annotations

import io
from datetime import datetime, timezone

from setui.commands.history import _write_diff
from setui.store import ChangeRecord, IncarnationRecord


def test_a_change_of_the_document_itself_comes_first_and_the_events_after() -> None:
    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    changes = (ChangeRecord("appeared", "ev-1", "Reboot"),
               ChangeRecord("anomaly", None, detail="incarnation went back"),
               ChangeRecord("rescheduled", "ev-1", "Reboot", detail="NotBefore moved"))
    record = IncarnationRecord("http://127.0.0.1:1/x", 7, at, at, "{}", changes, "")
    previous = IncarnationRecord("http://127.0.0.1:1/x", 6, at, at, "{}", (), "")
    out = io.StringIO()
    _write_diff(record, previous, (), out)
    lines = out.getvalue().splitlines()
    assert lines[1].startswith("Changes since incarnation 6")
    assert lines[2].split() == ["!", "anomaly", "incarnation", "went", "back"]
    assert lines[3].split() == ["appeared,", "rescheduled", "Reboot", "ev-1"]
    assert lines[4].strip() == "NotBefore moved"
    assert len(lines) == 5
