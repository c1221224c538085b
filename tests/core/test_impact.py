"""A stall or a boot: the event it is tied to, and its words (core.impact)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from setui.core.impact import AROUND, BOOT, STALL, STARTED, Impact, impact_words, tie
from setui.core.model import Document, parse_document

AT = datetime(2026, 11, 25, 19, 22, 1, 300_000, tzinfo=timezone.utc)


def event(event_id: str, kind: str = "Freeze", status: str = "Scheduled",
          resources: tuple[str, ...] = ("vm-0",), duration: int = 5) -> dict[str, Any]:
    return {"EventId": event_id, "EventType": kind, "EventStatus": status,
            "ResourceType": "VirtualMachine", "Resources": list(resources),
            "NotBefore": "" if status == "Started" else "Wed, 25 Nov 2026 19:30:00 GMT",
            "Description": "", "EventSource": "Platform", "DurationInSeconds": duration}


def doc(incarnation: int, *events: dict[str, Any]) -> Document:
    return parse_document({"DocumentIncarnation": incarnation, "Events": list(events)})


def tied(kind: str, before: Document | None, after: Document | None,
         vm_name: str | None = "vm-0") -> tuple[str, str] | None:
    found = tie(kind, before, after, vm_name)
    return None if found is None else (found[0].event_id, found[1])


def test_a_stall_while_a_freeze_was_started_is_that_freeze() -> None:
    before = doc(3, event("F", status="Started"))
    assert tied(STALL, before, doc(4)) == ("F", STARTED)


def test_a_freeze_that_started_across_the_stall_is_tied_around_it() -> None:
    assert tied(STALL, doc(2, event("F")), doc(3, event("F", status="Started"))) == \
        ("F", AROUND)


def test_an_event_that_left_across_the_stall_is_tied_around_it() -> None:
    # Scheduled before, gone after: it may have run in the stall (never "cancelled").
    assert tied(STALL, doc(2, event("F")), doc(4)) == ("F", AROUND)


def test_a_neighbours_event_is_not_this_vms_stall() -> None:
    before = doc(3, event("F", status="Started", resources=("vm-1",)))
    assert tied(STALL, before, before) is None
    assert tied(STALL, before, before, vm_name=None) == ("F", STARTED)  # name not known


def test_an_event_still_scheduled_on_both_sides_is_not_tied() -> None:
    both = doc(2, event("F"))
    assert tied(STALL, both, both) is None
    assert tied(STALL, None, None) is None


def test_of_several_a_stall_is_the_freeze_and_a_boot_the_reboot() -> None:
    both = doc(5, event("R", "Reboot", "Started"), event("F", "Freeze", "Started"))
    assert tied(STALL, both, both) == ("F", STARTED)
    assert tied(BOOT, both, both) == ("R", STARTED)


def test_the_words_say_what_was_announced_and_what_was_measured() -> None:
    stall = Impact(STALL, AT, 4.83, wall_seconds=4.8, event_id="F", event_type="Freeze",
                   announced=5, tie=STARTED)
    assert impact_words(stall, local=False) == (
        "Freeze, announced 5s: the VM was paused 4.8s at 19:22:01.3 UTC")
    alone = Impact(STALL, AT, 3.1, wall_seconds=3.1)
    assert impact_words(alone, local=False) == "paused 3.1s at 19:22:01.3 UTC, no event announced"
    unknown = Impact(STALL, AT, 2.0, event_id="R", event_type="Reboot", announced=-1)
    assert impact_words(unknown, local=False).startswith("Reboot, its length not announced:")


def test_a_pause_only_the_wall_clock_counted_is_said_as_such() -> None:
    stall = Impact(STALL, AT, 0.0, wall_seconds=4.8)
    assert stall.counted_by_wall_only and stall.measured == 4.8
    assert impact_words(stall, local=False) == (
        "the wall clock jumped 4.8s ahead at 19:22:01.3 UTC (the monotonic clock did not "
        "count it), no event announced")


def test_a_reboot_says_how_long_it_was_down_between_two_polls() -> None:
    last = datetime(2026, 11, 25, 19, 22, 3, tzinfo=timezone.utc)
    first = datetime(2026, 11, 25, 19, 24, 16, tzinfo=timezone.utc)
    boot = Impact(BOOT, last, 133.0, first_poll=first, event_id="R", event_type="Reboot")
    assert impact_words(boot, local=False) == (
        "Reboot: down 2m 13s (last poll 2026-11-25 19:22:03 UTC, first after boot "
        "2026-11-25 19:24:16 UTC)")
    guessed = Impact(BOOT, last, 133.0, first_poll=first, exact=False)
    assert impact_words(guessed, local=False).startswith(
        "rebooted, no event announced: down 2m 13s (last sign of life")
