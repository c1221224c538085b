"""The fleet model: one answer (an instant vector as Prometheus gives it) understood."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest
from rich.text import Text

from setui.core.model import Event, EventStatus, EventType
from setui.fleet import model
from setui.fleet.model import LABEL_LIMIT, FleetBuilder, VmState
from setui.ui.fleet.view import (
    EventLine,
    HeaderLine,
    VmLine,
    approve_command,
    build_lines,
    event_countdown,
    line_text,
)
from setui.ui.format import Palette, countdown

AT = 1_800_000_000.0


def identity(vm: str, **labels: str) -> dict[str, str]:
    return {"vm_name": vm, "vm_scale_set": "", "placement_group": "", "resource_group": "rg",
            "subscription_id": "sub", "zone": "", "instance": f"{vm}:9", "job": "setui",
            **labels}


def success(vm: str, value: float, **labels: str) -> dict[str, Any]:
    return {"metric": {"__name__": "setui_last_success_timestamp_seconds",
                       **identity(vm, **labels)}, "value": [AT, str(value)]}


def event(vm: str, event_id: str, value: float = 0, **labels: str) -> dict[str, Any]:
    mine = {k: v for k, v in labels.items() if k in identity("x")}
    rest = {k: v for k, v in labels.items() if k not in mine}
    return {"metric": {"__name__": "azure_scheduledevent_event", **identity(vm, **mine),
                       "eventID": event_id, "eventType": "Reboot", "eventStatus": "Scheduled",
                       "eventSource": "Platform", "resourceType": "virtualMachine",
                       "resource": vm, "notBefore": "", "this_vm": "true", "approved_by": "",
                       **rest}, "value": [AT, str(value)]}


def test_groups_urgency_and_merging() -> None:
    builder = FleetBuilder(stale_after=60)
    fleet = builder.build([
        success("a-0", AT - 1, vm_scale_set="ss-a"),
        success("a-1", AT - 1, vm_scale_set="ss-a"),
        success("b-0", AT - 1, placement_group="pg-b"),
        success("c-0", AT - 1),
        event("a-0", "E1", AT + 600, vm_scale_set="ss-a"),
        event("a-1", "E1", AT + 600, vm_scale_set="ss-a", this_vm="false", resource="a-0",
              approved_by="bob"),
        event("b-0", "E2", AT + 30, placement_group="pg-b"),
        event("c-0", "E3", 0, eventStatus="Started"),
    ], AT)
    e1 = next(e for e in fleet.events if e.event_id == "E1")
    assert e1.reporters == (("sub", "rg", "a-0"), ("sub", "rg", "a-1"))
    assert e1.resources == ("a-0",) and e1.approved_by == ("bob",)
    assert e1.not_before == datetime.fromtimestamp(AT + 600, tz=timezone.utc)
    assert [e.event_id for e in fleet.events] == ["E3", "E2", "E1"]
    lines = build_lines(fleet)
    assert [line.group.label for line in lines if isinstance(line, HeaderLine)] == [
        "resource group rg", "placement group pg-b", "scale set ss-a"]
    now = datetime.fromtimestamp(AT, tz=timezone.utc)
    assert event_countdown(next(e for e in fleet.events if e.event_id == "E2"), now).label() \
        == "!! T-0:30"
    assert event_countdown(fleet.events[0], now).label() == "▶ started"


def test_stale_waiting_unknown_and_vanished_vms_are_said_never_guessed() -> None:
    builder = FleetBuilder(stale_after=60)
    first = builder.build([success("live", AT - 5), success("old", AT - 600),
                           success("new", 0), event("bare", "E9", AT + 60),
                           success("leaving", AT - 1),
                           event("leaving", "E8", AT + 900)], AT)
    states = {vm.name: vm.state for vm in first.vms.values()}
    assert states == {"live": VmState.LIVE, "old": VmState.STALE, "new": VmState.WAITING,
                      "bare": VmState.UNKNOWN, "leaving": VmState.LIVE}
    second = builder.build([success("live", AT + 5)], AT + 10)
    gone = {vm.name for vm in second.vms.values() if vm.state is VmState.GONE}
    assert gone == {"old", "new", "bare", "leaving"}
    leaving = next(vm for vm in second.vms.values() if vm.name == "leaving")
    assert leaving.reported_at == AT and leaving.event_ids == ("E8",)
    lines = build_lines(second)
    vm_lines = [line for line in lines if isinstance(line, VmLine)]
    assert len(vm_lines) == 4
    text = line_text(vm_lines[0], datetime.fromtimestamp(AT + 70, tz=timezone.utc), 200,
                     Palette()).plain
    assert "not reported since 08:00:00 UTC (1m 10s)" in text and "unknown" in text
    # Its events are not shown as if they were still true.
    assert second.events == ()


def test_events_of_stopped_agents_are_marked_old() -> None:
    fleet = FleetBuilder(stale_after=60).build(
        [success("x", AT - 600), event("x", "E1", AT + 600)], AT)
    assert fleet.events[0].stale
    assert event_countdown(fleet.events[0],
                           datetime.fromtimestamp(AT, tz=timezone.utc)).text == "T-10:00?"


@pytest.mark.parametrize("ahead", [3600, 300, 299.5, 60, 59, 1, 0.2, 0, -5])
def test_a_fleet_countdown_reads_as_the_dashboards(ahead: float) -> None:
    """One rule for T-, waiting and how urgent: the fleet view and the dashboard agree."""
    fleet = FleetBuilder().build([success("vm", AT), event("vm", "E1", AT + ahead)], AT)
    now = datetime.fromtimestamp(AT, tz=timezone.utc)
    on_this_vm = Event("E1", EventType.REBOOT, EventStatus.SCHEDULED, ("vm",),
                       datetime.fromtimestamp(AT + ahead, tz=timezone.utc))
    fleets, dashboards = event_countdown(fleet.events[0], now), countdown(on_this_vm, now)
    assert (fleets.text, fleets.urgency) == (dashboards.text, dashboards.urgency)


def test_hostile_labels_are_bounded_and_shown_as_text() -> None:
    nasty = "\x1b]0;owned\x07[bold red]x[/]\u202e" + "y" * 500
    fleet = FleetBuilder().build([success("vm", AT),
                                  event("vm", nasty, AT + 60, approved_by=nasty,
                                        resource=nasty)], AT)
    the_event = fleet.events[0]
    assert len(the_event.event_id) == LABEL_LIMIT
    line = next(line for line in build_lines(fleet) if isinstance(line, EventLine))
    text = line_text(line, datetime.fromtimestamp(AT, tz=timezone.utc), 300, Palette())
    assert isinstance(text, Text)
    assert "\x1b" not in text.plain and "\u202e" not in text.plain
    assert "\\x1b" in text.plain and "[bold red]" in text.plain  # shown, not obeyed
    command = approve_command(the_event)
    assert command.startswith("setui approve '") and "\x1b" not in command


def test_series_without_the_contract_labels_are_counted_not_shown() -> None:
    fleet = FleetBuilder().build([{"metric": {"__name__": "azure_scheduledevent_event"},
                                   "value": [AT, "1"]}, {"nonsense": True}, "junk"], AT)
    assert fleet.vms == {} and fleet.events == () and fleet.ignored == 3


def test_filter_and_group() -> None:
    fleet = FleetBuilder().build([success("a", AT, vm_scale_set="s1"),
                                  success("b", AT, vm_scale_set="s2"),
                                  event("a", "E1", AT + 60, vm_scale_set="s1"),
                                  event("b", "E2", AT + 90, vm_scale_set="s2",
                                        eventType="Freeze")], AT)
    only = build_lines(fleet, text="FREEZE")
    assert [type(line).__name__ for line in only] == ["HeaderLine", "EventLine"]
    group = only[0].group
    assert {line.group for line in build_lines(fleet, group=group)} == {group}


def test_labels_that_are_not_strings_are_made_strings_and_bounded() -> None:
    odd = event("vm", "E1", AT + 60)
    odd["metric"]["approved_by"] = 42  # JSON allows it; the contract does not
    odd["metric"]["resource"] = ["a", "list"]
    fleet = FleetBuilder().build([success("vm", AT), odd], AT)
    (the_event,) = fleet.events
    assert the_event.approved_by == () and the_event.resources == ()
    assert all(isinstance(v, str) and len(v) <= LABEL_LIMIT
               for labels in the_event.series for v in labels.values())


def test_series_over_the_bound_are_counted_not_read(monkeypatch: Any) -> None:
    monkeypatch.setattr(model, "MAX_SERIES", 3)
    fleet = FleetBuilder().build([success("a", AT), event("a", "E1", AT + 60),
                                  event("a", "E2", AT + 90), event("a", "E3", AT + 120),
                                  success("b", AT)], AT)
    assert [e.event_id for e in fleet.events] == ["E1", "E2"]
    assert fleet.dropped == 2 and set(fleet.vms) == {("sub", "rg", "a")}


def test_an_event_reported_three_times_keeps_its_series_in_order() -> None:
    fleet = FleetBuilder().build([
        success("a", AT), success("b", AT), success("c", AT),
        event("a", "E1", AT + 90), event("b", "E1", AT + 60, approved_by="bob"),
        event("c", "E1", 0, eventStatus="Started", this_vm="false", resource="a")], AT)
    (the_event,) = fleet.events
    assert [key.vm_name for key in the_event.reporters] == ["a", "b", "c"]
    assert [labels["vm_name"] for labels in the_event.series] == ["a", "b", "c"]
    assert the_event.statuses == ("Scheduled", "Started") and the_event.is_started
    assert the_event.not_before == datetime.fromtimestamp(AT + 60, tz=timezone.utc)
    assert the_event.resources == ("a", "b") and the_event.approved_by == ("bob",)


def test_a_not_before_no_clock_holds_is_none() -> None:
    fleet = FleetBuilder().build([success("vm", AT), event("vm", "E1", 1e300),
                                  event("vm", "E2", -5), event("vm", "E3", AT + 60)], AT)
    by_id = {e.event_id: e for e in fleet.events}
    assert by_id["E1"].not_before is None and by_id["E2"].not_before is None
    assert by_id["E3"].not_before == datetime.fromtimestamp(AT + 60, tz=timezone.utc)
    now = datetime.fromtimestamp(AT, tz=timezone.utc)
    assert event_countdown(by_id["E1"], now).text == "no NotBefore"
    assert [e.event_id for e in fleet.events] == ["E3", "E1", "E2"]


def test_in_a_group_started_events_then_silent_vms_then_the_rest() -> None:
    fleet = FleetBuilder(stale_after=60).build([
        success("a", AT, vm_scale_set="s"), success("b", AT - 600, vm_scale_set="s"),
        success("c", AT, vm_scale_set="s"),
        event("a", "E1", AT + 60, vm_scale_set="s"),
        event("c", "E2", 0, vm_scale_set="s", eventStatus="Started"),
        event("a", "E3", AT + 30, vm_scale_set="s"),
        event("c", "E4", AT + 90, vm_scale_set="s", eventStatus="Started")], AT)
    lines = build_lines(fleet)
    assert [type(line).__name__ for line in lines] == [
        "HeaderLine", "EventLine", "EventLine", "VmLine", "EventLine", "EventLine"]
    assert [line.event.event_id for line in lines if isinstance(line, EventLine)] == [
        "E2", "E4", "E3", "E1"]
    assert lines[3].vm.name == "b"  # type: ignore[union-attr]


def test_a_vm_shows_its_identity_not_its_events_labels() -> None:
    from setui.ui.fleet.details import details_text

    fleet = FleetBuilder(stale_after=60).build([
        event("vm", "E1", AT + 60, vm_scale_set="ss", zone="2"),
        success("vm", AT - 600, vm_scale_set="ss", zone="2")], AT)
    (vm,) = fleet.vms.values()
    assert list(vm.identity) == ["vm_name", "vm_scale_set", "placement_group",
                                 "resource_group", "subscription_id", "zone"]
    assert vm.identity["zone"] == "2" and vm.group.label == "scale set ss"
    line = next(line for line in build_lines(fleet) if isinstance(line, VmLine))
    text = details_text(line, fleet, datetime.fromtimestamp(AT, tz=timezone.utc)).plain
    assert "vm_scale_set" in text and "subscription_id" in text and "zone" in text
    assert "eventID" not in text and "eventType" not in text and "instance        vm:9" in text


def test_at_120_columns_the_event_id_is_whole_and_the_resources_fill_the_rest() -> None:
    """An EventId is a GUID (36 characters): at 120 columns it was cut beside a resources
    cell half empty. The resources take the room the other columns leave."""
    guid = "F020BA2E-3BC0-4C40-A10B-86575A9EABD5"
    names = [f"web-{i}" for i in range(12)]
    fleet = FleetBuilder().build(
        [success(name, AT - 1, vm_scale_set="ss") for name in names]
        + [event(name, guid, AT + 600, vm_scale_set="ss", resources_listed="12")
           for name in names], AT)
    line = next(line for line in build_lines(fleet) if isinstance(line, EventLine))
    now = datetime.fromtimestamp(AT, tz=timezone.utc)
    for width in (113, 120, 200):
        text = line_text(line, now, width, Palette()).plain
        assert text.endswith(guid) and len(text) <= width, (width, text)
    wide = line_text(line, now, 200, Palette()).plain
    assert ", ".join(names) in wide and "+" not in wide
    assert "web-0, web-1, web-2 +9 " in line_text(line, now, 120, Palette()).plain


def last_seen(vm: str, value: float, **labels: str) -> dict[str, Any]:
    return {"metric": {"__name__": "setui:vm_not_reported_since_timestamp_seconds",
                       **identity(vm, **labels)}, "value": [AT, str(value)]}


# The recording rule's own series, without labels: the rule is there.
REMEMBERS = {"metric": {"__name__": "setui:vm_not_reported_since_timestamp_seconds"},
             "value": [AT, "0"]}


def test_vms_prometheus_remembers_are_not_reported_since_their_last_scrape() -> None:
    """The shipped rule's series of a VM not scraped now: listed on the first answer, in
    its group, not reported since its last scrape; what the session saw of a VM beats
    what Prometheus remembers."""
    builder = FleetBuilder(stale_after=60)
    first = builder.build([success("live", AT - 1, vm_scale_set="ss"),
                           last_seen("down", AT - 3600, vm_scale_set="ss"),
                           last_seen("future", AT + 99_999, vm_scale_set="ss"),
                           REMEMBERS], AT)
    assert first.remembers and first.ignored == 0
    down = next(vm for vm in first.vms.values() if vm.name == "down")
    assert down.state is VmState.GONE and down.reported_at == AT - 3600
    assert down.group.label == "scale set ss" and down.last_success is None
    assert next(vm for vm in first.vms.values() if vm.name == "future").reported_at == AT
    now = datetime.fromtimestamp(AT, tz=timezone.utc)
    lines = build_lines(first)
    assert [line.group.label for line in lines if isinstance(line, HeaderLine)] \
        == ["scale set ss"]
    text = line_text(next(line for line in lines if isinstance(line, VmLine)
                          and line.vm.name == "down"), now, 200, Palette()).plain
    assert "not reported since 07:00:00 UTC (1h 00m)" in text
    # "live" stops: the session's own memory of it (its last good answer) is kept.
    second = builder.build([last_seen("live", AT - 30, vm_scale_set="ss"), REMEMBERS],
                           AT + 60)
    live = next(vm for vm in second.vms.values() if vm.name == "live")
    assert live.state is VmState.GONE and live.last_success == AT - 1
    assert not FleetBuilder().build([success("x", AT)], AT).remembers
