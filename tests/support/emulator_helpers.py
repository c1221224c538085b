"""Shared constants and helpers of the emulator tests (fixtures live in conftest.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from setui.emulator.scenario import Scenario, parse_scenario
from setui.emulator.server import Emulator

EVENTS = "/metadata/scheduledevents"
HEADERS = {"Metadata": "true"}
PARAMS = {"api-version": "2020-07-01"}
LIVE_MIGRATION_ID = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
MakeEmulator = Callable[..., Emulator]


def scenario_from_toml(text: str, name: str = "test") -> Scenario:
    return parse_scenario(text, source=f"{name}.toml", default_name=name)


def get_document(http: httpx.Client, emulator: Emulator,
                 api_version: str = "2020-07-01") -> dict[str, Any]:
    response = http.get(emulator.url + EVENTS, headers=HEADERS,
                        params={"api-version": api_version})
    assert response.status_code == 200, response.text
    return response.json()


def approve(http: httpx.Client, emulator: Emulator, *event_ids: str) -> httpx.Response:
    body = {"StartRequests": [{"EventId": event_id} for event_id in event_ids]}
    return http.post(emulator.url + EVENTS, headers=HEADERS, params=PARAMS, json=body)
