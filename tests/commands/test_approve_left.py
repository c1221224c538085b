"""`setui approve` of an event that has left the document: when it left and how, as the
record knows it, not only that it is not there (``approve_command`` in this process,
against the emulator over loopback on the test's manual clock)."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import pytest

from setui.approval.snapshot import left_words
from setui.commands.approve import ApproveRequest, approve_command
from setui.emulator.clock import ManualClock
from setui.emulator.server import Emulator
from setui.store import Store, StoryEntry
from setui.system.identity import Identity

FREEZE = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"  # live-migration's, 15 min notice, 5 s long


def _approve(url: str, data: Path, event_id: str, answer: str = "") -> tuple[int, str]:
    request = ApproveRequest(event_ids=(event_id,), endpoint=url, api_version="2020-07-01",
                             data_dir=data, yes=not answer, allow_other_vms=True)
    out, err = io.StringIO(), io.StringIO()
    who = Identity(user="oncall", ssh_client=None, host="vm")
    code = asyncio.run(approve_command(request, stdin=io.StringIO(answer), out=out, err=err,
                                       identity=who))
    return code, out.getvalue() + err.getvalue()


def test_an_event_that_left_across_a_gap_is_said_gone_and_when(
        make_emulator: Callable[..., Emulator], clock: ManualClock, tmp_path: Path) -> None:
    """Seen by an earlier `approve` (declined), then nothing watched while it started and
    ended: the record saw it gone across a gap, whether it ran is not known."""
    emulator = make_emulator("live-migration")
    data = tmp_path / "data"
    clock.advance(61)
    code, said = _approve(emulator.url, data, FREEZE, answer="n\n")
    assert code == 3, said
    clock.advance(20 * 60)  # it started at its NotBefore and ended 5 s later
    code, said = _approve(emulator.url, data, FREEZE)
    assert code == 1, said
    assert (f"REFUSED: EventId {FREEZE} is not in the current document (incarnation 4): "
            "it was last recorded at 2022-04-11 22:01:01 UTC (incarnation 2, Scheduled) and "
            "left the document while nothing recorded it: gone, whether it ran is not "
            "known") in said, said
    with Store.open_dir(data, readonly=True) as store:
        [refused] = [r for r in store.audit_log.records() if r.event_id == FREEZE
                     and r.action == "refused"]
        assert "left the document while nothing recorded it" in (refused.error or ""), \
            refused


def _entry(kind: str, *, certain: bool = True, source: str = "history") -> StoryEntry:
    return StoryEntry(time=datetime(2026, 11, 24, 3, 15, 5, tzinfo=timezone.utc), kind=kind,
                      event_id=FREEZE, endpoint="http://e", incarnation=7, certain=certain,
                      status="Started", source=source)


@pytest.mark.parametrize(("story", "words"), [
    ([_entry("appeared"), _entry("completed")],
     "it completed: it left the document at 2026-11-24 03:15:05 UTC (incarnation 7) after "
     "it started"),
    ([_entry("appeared"), _entry("cancelled")],
     "Azure cancelled it: it left the document at 2026-11-24 03:15:05 UTC (incarnation 7) "
     "before it started"),
    ([_entry("gone")], "it was gone from the document at 2026-11-24 03:15:05 UTC "
                       "(incarnation 7), seen across a gap in the record: whether it ran"),
    # Seen across a gap is "gone", whatever else the record guessed.
    ([_entry("completed", certain=False)], "it was gone from the document at "),
    ([_entry("appeared"), _entry("approve-attempt", source="audit")],
     "it was last recorded at 2026-11-24 03:15:05 UTC (incarnation 7, Started) and left "),
    ([_entry("approve-attempt", source="audit")], None),
    ([], None),
])
def test_how_an_event_left_is_said_from_its_story(story: list[StoryEntry],
                                                  words: str | None) -> None:
    said = left_words(story)
    assert said == words if words is None else (said or "").startswith(words), said
