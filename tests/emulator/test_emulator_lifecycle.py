"""Events live as documented, deterministically under a manual clock."""

from __future__ import annotations

import time
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
import pytest

from setui.emulator.clock import ManualClock
from setui.emulator.documents import http_date
from setui.emulator.faults import Faults
from setui.emulator.scenario import builtin_scenarios, load_scenario
from setui.emulator.server import Emulator
from tests.support.emulator_helpers import (
    EVENTS,
    HEADERS,
    LIVE_MIGRATION_ID,
    PARAMS,
    MakeEmulator,
    approve,
    get_document,
    scenario_from_toml,
)

START = ManualClock()()  # the manual clock's default start, a whole second


def _statuses(document: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e["EventId"], e["EventStatus"]) for e in document["Events"]]


def test_live_migration_follows_the_documented_incarnations(
        make_emulator: MakeEmulator, clock: ManualClock, client: httpx.Client) -> None:
    emulator = make_emulator()
    seen = [get_document(client, emulator)]
    # Appears at 60 s; NotBefore 15 min later; gone after the 5 s freeze and a 120 s tail.
    for seconds in (60, 60 + 900, 60 + 900 + 5 + 120):
        clock.set(START + seconds - 0.001)
        assert get_document(client, emulator) == seen[-1], seconds
        clock.set(START + seconds)
        seen.append(get_document(client, emulator))
    assert [d["DocumentIncarnation"] for d in seen] == [1, 2, 3, 4]
    assert seen[0]["Events"] == seen[3]["Events"] == []
    scheduled, started = seen[1]["Events"][0], seen[2]["Events"][0]
    assert scheduled == {
        "EventId": LIVE_MIGRATION_ID, "EventStatus": "Scheduled", "EventType": "Freeze",
        "ResourceType": "VirtualMachine", "Resources": ["WestNO_0", "WestNO_1"],
        "NotBefore": "Mon, 11 Apr 2022 22:16:00 GMT",
        "Description": "Virtual machine is being paused because of a memory-preserving Live "
                       "Migration operation.",
        "EventSource": "Platform", "DurationInSeconds": 5,
    }
    assert started == {**scheduled, "EventStatus": "Started", "NotBefore": ""}


def test_incarnation_does_not_move_while_nothing_changes(
        make_emulator: MakeEmulator, clock: ManualClock, client: httpx.Client) -> None:
    emulator = make_emulator()
    clock.advance(61)
    first = get_document(client, emulator)
    for _ in range(20):
        clock.advance(30)  # 10 minutes of polling, still before NotBefore
        assert get_document(client, emulator) == first
    assert first["DocumentIncarnation"] == 2


def test_incarnation_does_not_depend_on_how_often_anyone_polled(clock: ManualClock) -> None:
    busy = Emulator(load_scenario("busy"), clock=clock)
    stepped = [busy.document()]
    for _ in range(300):  # one 20-minute loop and a half, every 6 s
        clock.advance(6)
        stepped.append(busy.document())
    incarnations = [d["DocumentIncarnation"] for d in stepped]
    assert incarnations == sorted(incarnations)
    assert incarnations[-1] > 20
    # Asked only once, at the end, a fresh emulator gives the same document...
    fresh_clock = ManualClock(START)
    fresh = Emulator(busy.scenario, clock=fresh_clock)
    fresh_clock.set(clock())
    assert fresh.document() == stepped[-1]
    # ... and going back in time gives back the earlier documents.
    for index in (250, 100, 7):
        clock.set(START + 6 * index)
        assert busy.document() == stepped[index]


def test_approval_starts_the_event_and_it_goes_after_duration_and_tail(
        make_emulator: MakeEmulator, clock: ManualClock, client: httpx.Client) -> None:
    emulator = make_emulator()
    clock.advance(100)
    assert approve(client, emulator, LIVE_MIGRATION_ID).status_code == 200
    clock.advance(0.999)  # approval_delay is 1 s
    assert _statuses(get_document(client, emulator)) == [(LIVE_MIGRATION_ID, "Scheduled")]
    clock.advance(0.001)
    document = get_document(client, emulator)
    assert _statuses(document) == [(LIVE_MIGRATION_ID, "Started")]
    assert document["DocumentIncarnation"] == 3
    # Approving again, also once started, is fine and changes nothing.
    assert approve(client, emulator, LIVE_MIGRATION_ID).status_code == 200
    assert get_document(client, emulator) == document
    clock.advance(5 + 120 - 0.001)
    assert get_document(client, emulator) == document
    clock.advance(0.001)
    assert get_document(client, emulator) == {"DocumentIncarnation": 4, "Events": []}
    # Gone: approving it now is an unknown EventId.
    assert approve(client, emulator, LIVE_MIGRATION_ID).status_code == 400


def test_cancelled_event_vanishes_while_scheduled(make_emulator: MakeEmulator,
                                                  clock: ManualClock,
                                                  client: httpx.Client) -> None:
    emulator = make_emulator("cancelled")
    clock.advance(30)
    [event] = get_document(client, emulator)["Events"]
    assert event["EventStatus"] == "Scheduled"
    clock.set(START + 330)
    assert get_document(client, emulator) == {"DocumentIncarnation": 3, "Events": []}
    clock.advance(3600)
    assert get_document(client, emulator) == {"DocumentIncarnation": 3, "Events": []}
    assert approve(client, emulator, event["EventId"]).status_code == 400


RESCHEDULED = """
vm_name = "vm-a"
tail = 10
[[events]]
id = "11111111-2222-3333-4444-555555555555"
type = "Reboot"
at = 10
notice = 100
duration = 20
reschedule = [{at = 50, notice = 200}, {at = 60, notice = 190.2}]
"""


def test_reschedule_moves_not_before(make_emulator: MakeEmulator, clock: ManualClock,
                                     client: httpx.Client) -> None:
    emulator = make_emulator(scenario_from_toml(RESCHEDULED))
    clock.set(START + 10)
    first = get_document(client, emulator)
    assert first["Events"][0]["NotBefore"] == http_date(START + 110)
    clock.set(START + 50)
    moved = get_document(client, emulator)
    assert moved["Events"][0]["NotBefore"] == http_date(START + 250)
    assert moved["DocumentIncarnation"] == first["DocumentIncarnation"] + 1
    # A move smaller than the document's one-second resolution is not a change.
    clock.set(START + 60)
    assert get_document(client, emulator) == moved
    clock.set(START + 110)  # the old NotBefore: nothing happens
    assert get_document(client, emulator) == moved
    clock.set(START + 250.1)  # shown as 250, but it will not start before 250.2
    assert get_document(client, emulator) == moved
    clock.set(START + 250.2)
    started = get_document(client, emulator)
    assert started["Events"][0]["EventStatus"] == "Started"
    assert started["DocumentIncarnation"] == moved["DocumentIncarnation"] + 1
    clock.set(START + 250.2 + 30)
    assert get_document(client, emulator)["Events"] == []


def test_host_failure_appears_started(make_emulator: MakeEmulator, clock: ManualClock,
                                      client: httpx.Client) -> None:
    emulator = make_emulator("host-failure")
    clock.set(START + 45)
    document = get_document(client, emulator)
    assert document["DocumentIncarnation"] == 2
    [event] = document["Events"]
    assert (event["EventStatus"], event["NotBefore"], event["EventType"]) == \
        ("Started", "", "Reboot")


def test_another_vm_can_approve(make_emulator: MakeEmulator, clock: ManualClock) -> None:
    scenario = scenario_from_toml("""
        approval_delay = 2
        [[events]]
        type = "Freeze"
        at = 0
        approve_at = 30
        duration = 5
    """)
    emulator = make_emulator(scenario)
    clock.set(START + 31.9)
    assert emulator.document()["Events"][0]["EventStatus"] == "Scheduled"
    clock.set(START + 32)
    assert emulator.document()["Events"][0]["EventStatus"] == "Started"


def test_repeat_loops_with_fresh_event_ids(clock: ManualClock) -> None:
    scenario = scenario_from_toml("""
        repeat = true
        length = 100
        tail = 0
        [[events]]
        type = "Preempt"
        at = 10
        notice = 30
        duration = 5
    """)
    emulator = Emulator(scenario, clock=clock)
    ids = []
    for loop in range(3):
        clock.set(START + loop * 100 + 10)
        ids.append(emulator.document()["Events"][0]["EventId"])
        clock.set(START + loop * 100 + 60)
        assert emulator.document()["Events"] == []
    assert len(set(ids)) == 3
    assert emulator.document()["DocumentIncarnation"] == 1 + 3 * 3
    assert not emulator.played_out()


def test_speed_not_before_is_the_real_time_of_the_start(clock: ManualClock,
                                                         make_emulator: MakeEmulator,
                                                         client: httpx.Client) -> None:
    # 15 minutes of notice at speed 60 is a 15-second countdown, in real seconds.
    clock.set(START + 0.4)  # scenario time 0 is the next whole second
    emulator = make_emulator(speed=60)
    assert emulator.epoch == START + 1
    clock.set(START + 1 + 1)  # scenario second 60: the Freeze appears
    [event] = get_document(client, emulator)["Events"]
    not_before = parsedate_to_datetime(event["NotBefore"]).timestamp()
    assert not_before == START + 1 + 1 + 15
    clock.set(not_before - 0.01)
    assert get_document(client, emulator)["Events"][0]["EventStatus"] == "Scheduled"
    clock.set(not_before)
    assert get_document(client, emulator)["Events"][0]["EventStatus"] == "Started"


def test_speed_with_the_real_clock(make_emulator: MakeEmulator, client: httpx.Client) -> None:
    scenario = scenario_from_toml("""
        [[events]]
        type = "Freeze"
        notice = 100
        duration = 5
    """)
    emulator = make_emulator(scenario, speed=1000, clock=time.time)
    starts = emulator.real_time(100)  # 0.1 real seconds after scenario second 0
    [event] = get_document(client, emulator)["Events"]
    not_before = parsedate_to_datetime(event["NotBefore"]).timestamp()
    assert not_before <= starts < not_before + 1  # shown to the second, never later
    while True:
        asked = time.time()
        status = get_document(client, emulator)["Events"][0]["EventStatus"]
        answered = time.time()
        if status == "Started":
            break
        assert asked < starts, "still Scheduled after its start time"
        time.sleep(0.01)
    assert answered >= starts


def test_skew_moves_date_and_not_before_together(make_emulator: MakeEmulator,
                                                 clock: ManualClock,
                                                 client: httpx.Client) -> None:
    emulator = make_emulator(faults=Faults(skew=3600))
    clock.advance(61)
    response = client.get(emulator.url + EVENTS, headers=HEADERS, params=PARAMS)
    date = parsedate_to_datetime(response.headers["date"]).timestamp()
    not_before = parsedate_to_datetime(response.json()["Events"][0]["NotBefore"]).timestamp()
    assert date == clock() + 3600
    assert not_before - date == 15 * 60 - 1  # the countdown against Date is unchanged


@pytest.mark.parametrize("name", builtin_scenarios())
def test_incarnation_moves_exactly_when_the_events_change(
        name: str, make_emulator: MakeEmulator, clock: ManualClock,
        client: httpx.Client) -> None:
    """Every built-in, with a client approving every other event it sees: between any two
    consecutive answers the incarnation goes up by one if the Events differ, else not."""
    emulator = make_emulator(name)
    scenario = emulator.scenario
    horizon = scenario.loop_length() * (2 if scenario.repeat else 1)
    previous = get_document(client, emulator)
    seen: set[str] = set()
    now, pairs, changes, approvals = 0.0, 0, 0, 0
    while points := emulator.timeline.change_points(now, horizon):
        # Half-way to the next change point nothing may change; at it, something may.
        for moment in ((now + points[0]) / 2, points[0]):
            clock.set(emulator.real_time(moment))
            document = get_document(client, emulator)
            changed = document["Events"] != previous["Events"]
            assert document["DocumentIncarnation"] == \
                previous["DocumentIncarnation"] + changed, (name, moment, previous, document)
            pairs += 1
            changes += changed
            previous = document
        now = points[0]
        # document: the last of the loop above, which runs at least once
        for event in document["Events"]:  # type: ignore[possibly-undefined]
            if event["EventStatus"] == "Scheduled" and event["EventId"] not in seen:
                seen.add(event["EventId"])
                if len(seen) % 2:
                    assert approve(client, emulator, event["EventId"]).status_code == 200
                    approvals += 1
    assert changes == previous["DocumentIncarnation"] - 1
    if scenario.events:
        assert pairs >= 4 and changes >= 2
    if any(spec.status == "Scheduled" for spec in scenario.events):
        assert approvals >= 1, name


def test_an_approval_can_keep_an_event_into_later_loops(
        make_emulator: MakeEmulator, clock: ManualClock, client: httpx.Client) -> None:
    # Unapproved, the event is cancelled at 50 and each loop lasts 50 s. Approved at 48,
    # it starts at 49 and lasts until 49 + 5 + 60 = 114, two loops later.
    scenario = scenario_from_toml("""
        repeat = true
        tail = 60
        [[events]]
        id = "AAAAAAAA-0000-0000-0000-000000000000"
        type = "Freeze"
        notice = 100
        duration = 5
        cancel_at = 50
    """)
    assert scenario.loop_length() == 50
    emulator = make_emulator(scenario)
    clock.set(emulator.real_time(48))
    assert approve(client, emulator, "AAAAAAAA-0000-0000-0000-000000000000").status_code == 200
    clock.set(emulator.real_time(113.9))
    events = get_document(client, emulator)["Events"]
    assert [(e["EventId"] == "AAAAAAAA-0000-0000-0000-000000000000", e["EventStatus"])
            for e in events] == [(True, "Started"), (False, "Scheduled")]  # and loop 2's own
    clock.set(emulator.real_time(114))
    assert len(get_document(client, emulator)["Events"]) == 1
