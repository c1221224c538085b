"""Scenario files: the built-ins play to the end, and bad files say what is wrong."""

from __future__ import annotations

import json
from dataclasses import replace
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import pytest

from setui.emulator.clock import ManualClock
from setui.emulator.scenario import (
    MAX_SECONDS,
    ScenarioError,
    builtin_scenarios,
    load_scenario,
    parse_scenario,
)
from setui.emulator.server import Emulator

REQUIRED = {"live-migration", "user-reboot", "redeploy", "spot-eviction", "scale-in",
            "host-failure", "cancelled", "predicted-failure", "busy", "quiet"}
TYPES = {"Freeze", "Reboot", "Redeploy", "Preempt", "Terminate"}


def _check_document(document: dict[str, Any]) -> None:
    assert set(document) == {"DocumentIncarnation", "Events"}
    ids = [e["EventId"] for e in document["Events"]]
    assert len(ids) == len(set(ids))
    for event in document["Events"]:
        assert event["EventType"] in TYPES
        assert event["ResourceType"] == "VirtualMachine"
        assert event["Resources"] and all(isinstance(r, str) for r in event["Resources"])
        assert event["EventSource"] in ("Platform", "User")
        assert isinstance(event["DurationInSeconds"], int) and event["DurationInSeconds"] >= -1
        assert event["Description"]
        if event["EventStatus"] == "Started":
            assert event["NotBefore"] == ""
        else:
            assert event["EventStatus"] == "Scheduled"
            parsedate_to_datetime(event["NotBefore"])


def test_the_required_scenarios_are_built_in() -> None:
    assert set(builtin_scenarios()) >= REQUIRED


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_every_builtin_plays_to_the_end(name: str) -> None:
    clock = ManualClock()
    emulator = Emulator(load_scenario(name), clock=clock)
    timeline = emulator.timeline  # its change points: every state is visited
    horizon = emulator.scenario.loop_length() * (2 if emulator.scenario.repeat else 1)
    moments = [0.0, *timeline.change_points(0, horizon)]
    previous = emulator.document()
    states = 1
    for moment in moments[1:]:
        clock.set(emulator.real_time(moment))
        document = emulator.document()
        _check_document(document)
        changed = document["Events"] != previous["Events"]
        assert document["DocumentIncarnation"] == previous["DocumentIncarnation"] + changed
        states += changed
        previous = document
    if emulator.scenario.repeat:
        assert states > 10
    else:
        assert previous["Events"] == []
        assert emulator.played_out()


def test_live_migration_is_the_documented_one() -> None:
    scenario = load_scenario("live-migration")
    [event] = scenario.events
    assert scenario.vm_name == "WestNO_0"
    assert (event.id, event.type, event.resources, event.duration) == (
        "C7061BAC-AFDC-4513-B24B-AA5F13A16123", "Freeze", ("WestNO_0", "WestNO_1"), 5)
    assert event.description == ("Virtual machine is being paused because of a "
                                 "memory-preserving Live Migration operation.")


def test_builtins_have_their_defining_traits() -> None:
    assert load_scenario("user-reboot").events[0].source == "User"
    assert load_scenario("spot-eviction").events[0].type == "Preempt"
    assert load_scenario("spot-eviction").events[0].notice == 30
    assert load_scenario("scale-in").events[0].type == "Terminate"
    assert load_scenario("redeploy").events[0].type == "Redeploy"
    assert load_scenario("host-failure").events[0].status == "Started"
    assert load_scenario("cancelled").events[0].cancel_at is not None
    predicted = load_scenario("predicted-failure").events[0]
    assert predicted.type == "Redeploy" and predicted.notice >= 6 * 86400
    assert load_scenario("quiet").events == ()


def test_busy_is_a_two_minute_demo_at_speed_10() -> None:
    busy = load_scenario("busy")
    assert busy.repeat
    assert {e.type for e in busy.events} == TYPES
    assert {e.source for e in busy.events} == {"Platform", "User"}
    assert {-1, 0} <= {e.duration for e in busy.events}
    assert any(busy.vm_name not in e.resources for e in busy.events)
    assert any(busy.vm_name in e.resources for e in busy.events)
    assert len({r for e in busy.events for r in e.resources}) >= 4
    assert busy.loop_length() / 10 <= 130  # real seconds per loop at `setui demo` speed
    clock = ManualClock()
    emulator = Emulator(busy, clock=clock)
    ids_seen: set[str] = set()
    overlapping = False
    for second in range(0, int(busy.loop_length()), 5):
        clock.set(emulator.real_time(second))
        events = emulator.document()["Events"]
        overlapping = overlapping or len(events) >= 3
        ids_seen.update(e["EventId"] for e in events)
    assert overlapping
    assert len(ids_seen) == len(busy.events)  # each appears within the loop
    clock.set(emulator.real_time(busy.loop_length() - 0.001))
    assert emulator.document()["Events"] == []  # and all are gone before it restarts


def test_json_scenarios_and_time_units(tmp_path: Path) -> None:
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"vm_name": "x", "events": [
        {"type": "Reboot", "at": "1m", "notice": "2h", "tail": "1d"}]}), encoding="utf-8")
    scenario = load_scenario(str(path))
    assert scenario.name == "mine"
    [event] = scenario.events
    assert (event.at, event.notice, event.tail, event.resources) == (60, 7200, 86400, ("x",))
    again = load_scenario(str(path))
    assert again.events[0].id == event.id  # default ids are stable


@pytest.mark.parametrize(("text", "needles"), [
    ("[[events]]\ntype = 'Frezze'", ["events[0].type", "Frezze", "Freeze"]),
    ("[[events]]\nat = 3", ["events[0].type", "missing"]),
    ("[[events]]\ntype = 'Reboot'\nnotcie = 3", ["events[0]", "notcie"]),
    ("taill = 3", ["top level", "taill"]),
    ("[[events]]\ntype = 'Reboot'\nat = -5", ["events[0].at", ">= 0"]),
    ("[[events]]\ntype = 'Reboot'\nat = '5 minutes'", ["events[0].at", "15m"]),
    ("[[events]]\ntype = 'Reboot'\nstatus = 'Completed'", ["events[0].status", "Completed"]),
    ("[[events]]\ntype = 'Reboot'\nduration = -2", ["events[0].duration"]),
    ("[[events]]\ntype = 'Reboot'\nresources = 'vm'", ["events[0].resources"]),
    ("[[events]]\ntype = 'Reboot'\nresources = []", ["events[0].resources"]),
    ("[[events]]\ntype = 'Reboot'\nat = 100\ncancel_at = 50", ["events[0].cancel_at", "before"]),
    ("[[events]]\ntype = 'Reboot'\nreschedule = [{at = 5}]", ["events[0].reschedule[0]",
                                                              "notice"]),
    ("[[events]]\ntype = 'Reboot'\nid = 'a'\n[[events]]\ntype = 'Freeze'\nid = 'A'",
     ["events[1].id", "duplicate"]),
    ("repeat = 'yes'", ["repeat"]),
    ("length = 0", ["length"]),
    ("length = 0.5", ["length", "at least 1 second"]),
    # A loop shorter than its events piled up copies of them without end (CPU runaway).
    ("repeat = true\nlength = 0.00001\n[[events]]\ntype = 'Reboot'",
     ["length", "at least 1 second"]),
    ("repeat = true\nlength = 100\ntail = 60\n[[events]]\ntype = 'Preempt'\nat = 10",
     ["length", "100 s is shorter", "110 s until the last is gone"]),
    ("[[events]]\ntype = 'Reboot'\nat = 1e300", ["events[0].at", "at most", "a year"]),
    ("[[events]]\ntype = 'Reboot'\nnotice = '99999999999d'", ["events[0].notice", "at most"]),
    ("tail = inf", ["tail", "finite"]),
    ("approval_delay = nan", ["approval_delay", "finite"]),
    ("default_duration = 1e20", ["default_duration", "at most"]),
    ("[[events]]\ntype = 'Reboot'\nduration = 9223372036854775807",
     ["events[0].duration", "a year"]),
    ("[[events]]\ntype = 'Reboot'\nreschedule = [{at = 5, notice = 1e30}]",
     ["events[0].reschedule[0].notice", "at most"]),
    ("events = 3", ["events"]),
    ("this is not toml", ["not valid TOML"]),
])
def test_bad_scenarios_name_the_file_and_field(tmp_path: Path, text: str,
                                               needles: list[str]) -> None:
    path = tmp_path / "broken.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(str(path))
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    for needle in needles:
        assert needle in message


@pytest.mark.parametrize(("name", "text"), [
    ("deep.toml", "tail = " + "[" * 100_000 + "\n"),
    ("deep.json", '{"tail": ' + "[" * 100_000 + "]" * 100_000 + "}"),
], ids=["toml", "json"])
def test_a_scenario_nested_too_deeply_is_a_scenario_error(tmp_path: Path, name: str,
                                                          text: str) -> None:
    # Both parsers recurse once a level: this once ended in a RecursionError traceback.
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(str(path))
    assert str(caught.value).startswith(f"{path}: not valid ")
    assert "nested too deeply" in str(caught.value)


def test_unknown_scenario_lists_the_builtins() -> None:
    with pytest.raises(ScenarioError, match="live-migration"):
        load_scenario("no-such-scenario")


@pytest.mark.parametrize(("event", "needles"), [
    # Integers too large for a float once ended in an OverflowError traceback.
    ({"type": "Reboot", "at": 10 ** 400}, ["events[0].at", "a year", "401 digits"]),
    ({"type": "Reboot", "cancel_at": -(10 ** 400)}, ["events[0].cancel_at"]),
    ({"type": "Reboot", "duration": 10 ** 400}, ["events[0].duration", "a year"]),
    ({"type": "Reboot", "tail": 10 ** 30}, ["events[0].tail", "at most"]),
])
def test_huge_json_numbers_are_scenario_errors(tmp_path: Path, event: dict[str, Any],
                                               needles: list[str]) -> None:
    path = tmp_path / "huge.json"
    path.write_text(json.dumps({"events": [event]}), encoding="utf-8")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(str(path))
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    for needle in needles:
        assert needle in message
    assert len(message) < 400  # the number is summarised, not printed digit by digit


def test_the_longest_allowed_scenario_still_renders() -> None:
    # Every number at its bound: the documents stay valid HTTP dates, nothing overflows.
    year = MAX_SECONDS
    scenario = parse_scenario(f"""
        tail = {year}
        approval_delay = {year}
        default_duration = {year}
        repeat = true
        [[events]]
        type = "Reboot"
        at = {year}
        notice = {year}
        duration = {year}
        reschedule = [{{at = {year}, notice = {year}}}]
    """)
    clock = ManualClock()
    emulator = Emulator(scenario, clock=clock)
    clock.set(emulator.real_time(year + 1))
    [event] = emulator.document()["Events"]
    assert event["DurationInSeconds"] == year
    parsedate_to_datetime(event["NotBefore"])
    clock.set(emulator.real_time(scenario.loop_length() + year + 1))
    assert emulator.document()["Events"][0]["EventId"] != event["EventId"]  # the next loop


def test_a_repeating_scenario_built_in_code_must_not_be_shorter_than_its_events() -> None:
    scenario = parse_scenario("[[events]]\ntype = 'Preempt'\ntail = 60")
    with pytest.raises(ValueError, match="at least 100 s"):
        Emulator(replace(scenario, repeat=True, length=0.00001))


def test_bad_json_scenario(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("{", encoding="utf-8")
    with pytest.raises(ScenarioError, match="not valid JSON"):
        load_scenario(str(path))


def test_custom_type_needs_an_explicit_notice() -> None:
    scenario = parse_scenario("[[events]]\ntype = 'Hibernate'\nnotice = 60")
    assert scenario.events[0].type == "Hibernate"
