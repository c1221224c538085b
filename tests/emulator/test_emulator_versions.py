"""Each api-version is served only what it carries: an event type it cannot carry is not in
its document at all, nor can it be approved through that version.

The expectations are written out from the service's documents (docs/configuration.md's
table), not read from setui's own table, so a wrong table fails here.
"""

from __future__ import annotations

import httpx
import pytest

from setui.emulator.clock import ManualClock
from tests.support.emulator_helpers import (
    EVENTS,
    HEADERS,
    MakeEmulator,
    get_document,
    scenario_from_toml,
)

REBOOT = "00000000-0000-0000-0000-00000000000a"
PREEMPT = "00000000-0000-0000-0000-00000000000b"
TERMINATE = "00000000-0000-0000-0000-00000000000c"
THREE_TYPES = f"""
vm_name = "vm-0"
[[events]]
id = "{REBOOT}"
type = "Reboot"
notice = "15m"
[[events]]
id = "{PREEMPT}"
type = "Preempt"
notice = "10m"
[[events]]
id = "{TERMINATE}"
type = "Terminate"
notice = "10m"
"""


@pytest.mark.parametrize(("version", "types"), [
    ("2017-03-01", ["Reboot"]),
    ("2017-08-01", ["Reboot"]),
    ("2017-11-01", ["Reboot", "Preempt"]),
    ("2019-01-01", ["Reboot", "Preempt", "Terminate"]),
    ("2019-04-01", ["Reboot", "Preempt", "Terminate"]),
    ("2019-08-01", ["Reboot", "Preempt", "Terminate"]),
    ("2020-07-01", ["Reboot", "Preempt", "Terminate"]),
])
def test_an_event_type_a_version_cannot_carry_is_not_served_to_it(
        make_emulator: MakeEmulator, clock: ManualClock, client: httpx.Client, version: str,
        types: list[str]) -> None:
    emulator = make_emulator(scenario_from_toml(THREE_TYPES))
    clock.advance(1)
    document = get_document(client, emulator, version)
    assert [event["EventType"] for event in document["Events"]] == types
    # The incarnation is the service's, whatever a version is shown of it.
    assert document["DocumentIncarnation"] == get_document(client, emulator)["DocumentIncarnation"]


def _approve(client: httpx.Client, url: str, event_id: str, version: str) -> httpx.Response:
    return client.post(url + EVENTS, headers=HEADERS, params={"api-version": version},
                       json={"StartRequests": [{"EventId": event_id}]})


def test_an_event_a_version_is_not_shown_cannot_be_approved_through_it(
        make_emulator: MakeEmulator, clock: ManualClock, client: httpx.Client) -> None:
    emulator = make_emulator(scenario_from_toml(THREE_TYPES))
    clock.advance(1)
    refused = _approve(client, emulator.url, TERMINATE, "2017-11-01")
    assert refused.status_code == 400
    assert TERMINATE in refused.json()["error"]
    clock.advance(5)
    status = {e["EventId"]: e["EventStatus"] for e in get_document(client, emulator)["Events"]}
    assert status[TERMINATE] == "Scheduled"
    assert _approve(client, emulator.url, PREEMPT, "2017-11-01").status_code == 200
    assert _approve(client, emulator.url, TERMINATE, "2019-01-01").status_code == 200
