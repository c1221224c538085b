"""The fleet view's states and keys under Pilot, against loopback servers that answer
as a refusing or broken Prometheus would."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from setui.fleet import FleetWatcher, PrometheusAuth, PrometheusClient
from setui.ui.fleet.app import FleetApp
from setui.ui.screens.help import HelpScreen
from tests.fleet.test_fleet_client import OK, Canned


async def wait_for(pilot: Any, predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


def status(app: FleetApp) -> str:
    return "\n".join(t.plain for t in app.query_one("#status").texts)  # type: ignore[attr-defined]


async def test_refused_credentials_are_a_state_with_the_reason() -> None:
    server = Canned(401, b"Unauthorized")
    try:
        app = FleetApp(FleetWatcher(PrometheusClient(server.url, PrometheusAuth(token="t"))),
                       refresh=0.5)
        async with app.run_test(size=(100, 24)) as pilot:
            await wait_for(pilot, lambda: "✖ refused" in status(app), "refused")
            assert "refused the credentials (HTTP 401)" in status(app)
            assert "bearer token" in status(app) and "no answer yet" in status(app)
            assert app.lines == []
            await pilot.press("question_mark")
            await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "help")
            assert "setui fleet: keys" in (app.screen._text or "")  # type: ignore[attr-defined]
    finally:
        server.stop()


async def test_a_broken_answer_after_a_good_one_keeps_the_last_with_its_age() -> None:
    server = Canned(200, json.dumps(OK).encode())
    try:
        app = FleetApp(FleetWatcher(PrometheusClient(server.url)), refresh=0.5)
        async with app.run_test(size=(100, 24)) as pilot:
            await wait_for(pilot, lambda: "● live" in status(app), "live")
            assert "1 VMs" in status(app)
            server.body = b"<html>maintenance</html>"
            await wait_for(pilot, lambda: "✖ Prometheus error" in status(app), "the error")
            assert "STALE: showing the last answer" in status(app)
            assert "not the query API's JSON" in status(app)
            assert "1 VMs" in status(app)
    finally:
        server.stop()


async def test_escape_in_the_filter_box_clears_it() -> None:
    server = Canned(200, json.dumps(OK).encode())
    try:
        app = FleetApp(FleetWatcher(PrometheusClient(server.url)), refresh=0.5)
        async with app.run_test(size=(100, 24)) as pilot:
            await wait_for(pilot, lambda: "● live" in status(app), "live")
            await pilot.press("slash", "x", "y")
            await wait_for(pilot, lambda: app.filter_text == "xy", "the filter typed")
            assert "filter “xy”" in status(app)
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.filter_text == "", "the filter cleared")
            assert not app.query_one("#filter").display
            assert "filter" not in status(app)
    finally:
        server.stop()


async def test_hostile_label_values_are_shown_as_text_never_obeyed() -> None:
    nasty = "\x1b[2J\x1b]0;owned\x07[bold red]boom[/]\u202eevil\x9b31m"
    labels = {"vm_name": nasty, "vm_scale_set": nasty, "placement_group": "",
              "resource_group": "rg", "subscription_id": "s", "zone": ""}
    answer = {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"__name__": "setui_last_success_timestamp_seconds", **labels},
         "value": [1800000000, "1800000000"]},
        {"metric": {"__name__": "azure_scheduledevent_event", **labels, "eventID": nasty,
                    "eventType": nasty, "eventStatus": "Scheduled", "eventSource": nasty,
                    "resourceType": "virtualMachine", "resource": nasty, "notBefore": nasty,
                    "this_vm": "true", "approved_by": nasty},
         "value": [1800000000, "1800000600"]}]}}
    server = Canned(200, json.dumps(answer).encode())
    try:
        app = FleetApp(FleetWatcher(PrometheusClient(server.url)), refresh=0.5)
        async with app.run_test(size=(160, 30)) as pilot:
            await wait_for(pilot, lambda: "1 events" in status(app), "the event")
            table = app.query_one("#lines")
            shown = "\n".join("".join(seg.text for seg in table.render_line(y))
                              for y in range(4))
            await pilot.press("g", "enter")
            await wait_for(pilot, lambda: hasattr(app.screen, "body"), "the details")
            details = app.screen.body.plain  # type: ignore[attr-defined]
            for text in (shown, details, status(app)):
                assert "\x1b" not in text and "\u202e" not in text and "\x9b" not in text
            assert "\\x1b" in shown and "[bold red]boom[/]" in shown
            assert "setui approve '" in details  # quoted for the shell
    finally:
        server.stop()


async def test_the_details_countdown_ticks() -> None:
    """The details of an event count down with the view's clock (they were drawn once
    when opened, and stayed at that second)."""
    at = 1_800_000_000
    labels = {"vm_name": "web-0", "vm_scale_set": "ss", "placement_group": "",
              "resource_group": "rg", "subscription_id": "s", "zone": ""}
    answer = {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"__name__": "setui_last_success_timestamp_seconds", **labels},
         "value": [at, str(at)]},
        {"metric": {"__name__": "azure_scheduledevent_event", **labels, "eventID": "E1",
                    "eventType": "Reboot", "eventStatus": "Scheduled",
                    "eventSource": "Platform", "resourceType": "virtualMachine",
                    "resource": "web-0", "notBefore": "", "this_vm": "true",
                    "approved_by": "", "resources_listed": "1"},
         "value": [at, str(at + 600)]}]}}
    server = Canned(200, json.dumps(answer).encode())
    clock = [5000.0]

    def mono() -> float:
        return clock[0]

    try:
        app = FleetApp(FleetWatcher(PrometheusClient(server.url), mono=mono),
                       refresh=3600, mono=mono)
        async with app.run_test(size=(120, 30)) as pilot:
            await wait_for(pilot, lambda: "1 events" in status(app), "the event")
            await pilot.press("g", "enter")
            await wait_for(pilot, lambda: hasattr(app.screen, "body"), "the details")
            assert "T-10:00" in app.screen.body.plain  # type: ignore[attr-defined]
            clock[0] += 5
            await wait_for(pilot, lambda: "T-9:55" in app.screen.body.plain,  # type: ignore[attr-defined]
                           "the countdown to tick")
    finally:
        server.stop()


async def test_an_answer_that_comes_as_the_app_closes_is_dropped_not_an_error() -> None:
    """The app's widgets are removed before its messages stop: a refresh answered then
    (a worker's, under load) found no table and failed the app's exit."""
    from setui.ui.fleet.app import Refreshed
    from setui.ui.fleet.status import FleetStatus
    from setui.ui.fleet.table import FleetTable

    server = Canned(200, json.dumps(OK).encode())
    try:
        app = FleetApp(FleetWatcher(PrometheusClient(server.url)), refresh=0.5)
        async with app.run_test(size=(100, 24)) as pilot:
            await wait_for(pilot, lambda: "● live" in status(app), "live")
            update = app.update
            await app.query_one(FleetTable).remove()
            await app.query_one(FleetStatus).remove()
            before = app.refreshes
            app.post_message(Refreshed(update, ("", None), [], 0))
            app.post_message(Refreshed(update, ("not the view", None), [], 0))
            await wait_for(pilot, lambda: app.refreshes >= before + 2, "both answers taken")
        assert app.return_code in (0, None)
    finally:
        server.stop()
