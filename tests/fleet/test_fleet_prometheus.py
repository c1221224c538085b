"""`setui fleet` against a real Prometheus scraping three stand-in exporters on loopback:
every event appears with its VM and group; a stopped exporter marks its VM as not
reported; a stopped Prometheus is shown as unreachable, and the view recovers."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import pytest

from setui.fleet import Fleet, FleetUpdate, FleetWatcher, LinkState, PrometheusClient, VmState
from setui.ui.fleet.app import FleetApp
from setui.ui.fleet.details import FleetDetailsScreen, details_text
from setui.ui.fleet.view import EventLine, HeaderLine, VmLine, build_lines, line_text
from setui.ui.format import Palette
from tests.support.promtest import Prometheus, StandIn, VmSeries, exposition

pytestmark = pytest.mark.slow  # starts processes: the slow tier (docs/testing.md)

PATIENCE = 60.0


async def wait_for(pilot: Any, predicate: Callable[[], bool], what: str,
                   timeout: float = PATIENCE) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


def refresh_until(watcher: FleetWatcher, done: Callable[[Fleet], bool]) -> FleetUpdate:
    """Refresh until the fleet is as ``done`` wants (Prometheus has scraped the stand-ins)."""
    deadline = time.monotonic() + PATIENCE
    while True:
        update = watcher.refresh()
        if update.fleet is not None and done(update.fleet):
            return update
        assert time.monotonic() < deadline, "the stand-ins' series never appeared"
        time.sleep(0.2)


def three_vms() -> list[VmSeries]:
    soon = time.time() + 600
    week = time.time() + 7 * 86400
    return [
        VmSeries("web-0", vm_scale_set="web-vmss", events=[
            {"eventID": "EV-REBOOT-1", "value": soon, "notBefore": "soon"},
            {"eventID": "EV-FREEZE-2", "eventType": "Freeze", "eventStatus": "Started",
             "approved_by": "alice@ops"}]),
        VmSeries("web-1", vm_scale_set="web-vmss", events=[
            # web-1 sees web-0's reboot too: listed once, with both reporters.
            {"eventID": "EV-REBOOT-1", "value": soon, "this_vm": "false",
             "resource": "web-0"}]),
        VmSeries("db-0", placement_group="pg-db", events=[
            {"eventID": "EV-REDEPLOY-3", "eventType": "Redeploy", "value": week}]),
    ]


def text_of(app: FleetApp) -> str:
    return "\n".join(line.plain for line in app.query_one("#status").texts)  # type: ignore[attr-defined]


async def test_three_stand_ins_through_a_real_prometheus(
        prometheus: Callable[..., Prometheus]) -> None:
    vms = three_vms()
    stand_ins = [StandIn(lambda vm=vm: exposition([vm])) for vm in vms]
    server = prometheus([s.target for s in stand_ins])
    watcher = FleetWatcher(PrometheusClient(server.url), stale_after=30)
    app = FleetApp(watcher, refresh=0.5)
    try:
        async with app.run_test(size=(140, 40)) as pilot:
            def every_event() -> bool:
                fleet = app.update.fleet
                return fleet is not None and len(fleet.vms) == 3 and \
                    {e.event_id for e in fleet.events} == {"EV-REBOOT-1", "EV-FREEZE-2",
                                                           "EV-REDEPLOY-3"} and \
                    len(next(e for e in fleet.events
                             if e.event_id == "EV-REBOOT-1").reporters) == 2
            await wait_for(pilot, every_event, "the three VMs' events")
            lines = app.lines
            headers = [line.group.label for line in lines if isinstance(line, HeaderLine)]
            # The started Freeze makes the scale set the most urgent group.
            assert headers == ["scale set web-vmss", "placement group pg-db"]
            events = {line.event.event_id: line for line in lines
                      if isinstance(line, EventLine)}
            assert events["EV-FREEZE-2"].group.label == "scale set web-vmss"
            assert events["EV-FREEZE-2"].event.approved_by == ("alice@ops",)
            assert events["EV-REBOOT-1"].event.resources == ("web-0",)
            assert events["EV-REDEPLOY-3"].group.label == "placement group pg-db"
            assert all(vm.state is VmState.LIVE for vm in app.update.fleet.vms.values())
            status = text_of(app)
            assert "● live" in status and "3 VMs" in status and "3 events" in status

            # Enter on the first event: its series and the command to approve it.
            table = app.query_one("#lines")
            table.focus()
            await pilot.press("g", "enter")  # the first line: the started Freeze
            await wait_for(pilot, lambda: isinstance(app.screen, FleetDetailsScreen),
                           "the details")
            body = app.screen.body.plain  # type: ignore[attr-defined]
            assert "setui approve EV-FREEZE-2" in body
            assert "approved by alice@ops" in body
            assert "azure_scheduledevent_event{" in body and "vm_name=web-0" in body
            await pilot.press("escape")

            # / filters, m keeps one group.
            await pilot.press("slash", *"redeploy", "enter")
            await wait_for(pilot, lambda: [line.event.event_id for line in app.lines
                                           if isinstance(line, EventLine)]
                           == ["EV-REDEPLOY-3"], "the filter")
            assert "filter “redeploy”: 2 hidden" in text_of(app)
            await pilot.press("escape")
            await wait_for(pilot, lambda: len(app.lines) == len(lines), "the filter cleared")
            # The cursor stayed on the Redeploy the filter showed: its group.
            await pilot.press("m")
            assert {line.group.label for line in app.lines} == {"placement group pg-db"}
            await pilot.press("m", "g", "m")
            assert {line.group.label for line in app.lines} == {"scale set web-vmss"}
            await pilot.press("m")

            # Stopping db-0's exporter: Prometheus marks its series stale, and the view
            # says that VM is not reported, never that its event went away quietly.
            stand_ins[2].stop()
            await wait_for(pilot, lambda: any(
                isinstance(line, VmLine) and line.vm.name == "db-0"
                and line.vm.state is VmState.GONE for line in app.lines), "db-0 not reported")
            assert "1 not answering" in text_of(app)
            assert "not reported" in "\n".join(
                str(app.query_one("#lines").render_line(y)) for y in range(12))

            # Stopping Prometheus: unreachable, with the last answer and its age.
            server.stop()
            await wait_for(pilot, lambda: app.update.state is LinkState.UNREACHABLE,
                           "unreachable")
            await wait_for(pilot, lambda: "✖ unreachable" in text_of(app), "the state shown")
            assert "STALE: showing the last answer" in text_of(app)
            assert "cannot reach" in text_of(app)
            assert any(isinstance(line, EventLine) for line in app.lines)  # still shown

            server.start()
            await wait_for(pilot, lambda: app.update.state is LinkState.LIVE,
                           "Prometheus again")
            await wait_for(pilot, lambda: "● live" in text_of(app), "live shown again")
    finally:
        for stand_in in stand_ins[:2]:
            stand_in.stop()


async def test_prometheus_errors_are_states(prometheus: Callable[..., Prometheus]) -> None:
    """A query Prometheus refuses is its error in words, not a crash or an empty fleet."""
    server = prometheus([])
    watcher = FleetWatcher(PrometheusClient(server.url), query="sum(")
    update = watcher.refresh()
    assert update.state is LinkState.ERROR
    assert "bad_data" in (update.error or "")
    watcher.close()


@pytest.mark.parametrize("stale_after", [5.0])
def test_an_old_last_success_is_stale(prometheus: Callable[..., Prometheus],
                                      stale_after: float) -> None:
    old = VmSeries("web-9", vm_scale_set="s", last_success=time.time() - 3600)
    never = VmSeries("web-8", vm_scale_set="s", last_success=0)
    stand_in = StandIn(lambda: exposition([old, never]))
    try:
        server = prometheus([stand_in.target])
        watcher = FleetWatcher(PrometheusClient(server.url), stale_after=stale_after)
        update = refresh_until(watcher, lambda fleet: len(fleet.vms) == 2)
        states = {vm.name: vm.state for vm in update.fleet.vms.values()}
        assert states == {"web-9": VmState.STALE, "web-8": VmState.WAITING}
        watcher.close()
    finally:
        stand_in.stop()


def test_a_groups_event_is_one_series_per_agent_and_the_vms_without_one_are_counted(
        prometheus: Callable[..., Prometheus]) -> None:
    """Agents export an event once each, naming only their own VM and counting what it
    lists: web-0 and web-1 report a Reboot of the 4 VMs of their set (2 of them have no
    agent); web-1 also sees a Freeze of 2 neighbours, neither with an agent."""
    soon = time.time() + 600
    group = [VmSeries(name, vm_scale_set="web-vmss", events=[
        {"eventID": "EV-SET-REBOOT", "value": soon, "resource": name,
         "resources_listed": "4"}]) for name in ("web-0", "web-1")]
    group[1].events.append({"eventID": "EV-NEIGHBOURS", "eventType": "Freeze",
                            "value": soon, "resource": "", "this_vm": "false",
                            "resources_listed": "2"})
    stand_in = StandIn(lambda: exposition(group))
    server = prometheus([stand_in.target])
    watcher = FleetWatcher(PrometheusClient(server.url), stale_after=30)
    try:
        update = refresh_until(watcher, lambda fleet: len(fleet.events) == 2)
    finally:
        watcher.close()
        stand_in.stop()
    fleet = update.fleet
    events = {e.event_id: e for e in fleet.events}
    reboot, freeze = events["EV-SET-REBOOT"], events["EV-NEIGHBOURS"]
    assert reboot.resources == ("web-0", "web-1") and len(reboot.reporters) == 2
    assert (reboot.listed_count, reboot.without_agent) == (4, 2)
    assert (freeze.resources, freeze.listed_count, freeze.without_agent) == ((), 2, 2)
    now = datetime.fromtimestamp(fleet.at, tz=timezone.utc)
    lines = {line.event.event_id: line for line in build_lines(fleet)
             if isinstance(line, EventLine)}
    assert "web-0, web-1 +2" in line_text(lines["EV-SET-REBOOT"], now, 140, Palette()).plain
    assert "2 VMs, no agent" in line_text(lines["EV-NEIGHBOURS"], now, 140,
                                                    Palette()).plain
    details = details_text(lines["EV-SET-REBOOT"], fleet, now).plain
    assert "4 VMs; 2 of them with no agent reporting it" in details


def test_what_each_agent_measured_is_in_the_details(prometheus: Callable[..., Prometheus]
                                                    ) -> None:
    """setui_last_impact_seconds through a real scrape: the VM's last stall in its details,
    and in its event's; a stall with no event is said as such."""
    freeze: dict[str, str | float] = {"eventID": "EV-FREEZE", "eventType": "Freeze",
                                      "eventStatus": "Started"}
    vms = [VmSeries("web-0", vm_scale_set="web-vmss", events=[freeze], impact={
               "impact": "stall", "eventType": "Freeze", "eventID": "EV-FREEZE",
               "at": "2026-11-25T19:22:01.300000Z", "value": 4.8}),
           VmSeries("web-1", vm_scale_set="web-vmss", impact={
               "impact": "stall", "eventType": "", "eventID": "",
               "at": "2026-11-25T19:40:12.700000Z", "value": 3.1})]
    stand_in = StandIn(lambda: exposition(vms))
    server = prometheus([stand_in.target])
    watcher = FleetWatcher(PrometheusClient(server.url), stale_after=30)
    try:
        update = refresh_until(watcher, lambda fleet: sum(
            vm.impact is not None for vm in fleet.vms.values()) == 2)
    finally:
        watcher.close()
        stand_in.stop()
    fleet = update.fleet
    now = datetime.fromtimestamp(fleet.at, tz=timezone.utc)
    lines = build_lines(fleet)
    # A VM's own details (a line for a VM whose agent is in trouble: as after a reboot).
    vm_text = {vm.name: details_text(VmLine(vm.group, vm), fleet, now).plain
               for vm in fleet.vms.values()}
    assert ("last impact     paused 4.8s at 2026-11-25T19:22:01.300000Z: Freeze EV-FREEZE"
            in vm_text["web-0"])
    assert "paused 3.1s at 2026-11-25T19:40:12.700000Z: no event announced" in vm_text["web-1"]
    event = next(line for line in lines if isinstance(line, EventLine))
    details = details_text(event, fleet, now).plain
    assert "What it did, as each VM's agent measured it" in details
    assert "web-0  paused 4.8s at" in details and "web-1  paused" not in details
