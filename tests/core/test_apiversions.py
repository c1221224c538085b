"""The one table of what each api-version carries: what it answers, and that the reference
in docs/configuration.md prints the same table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from setui.core.apiversions import API_VERSIONS, KNOWN_API_VERSIONS, carries, limits, since
from setui.core.endpoint import DEFAULT_API_VERSION

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_the_documented_firsts() -> None:
    # Written out from the service's documents, not from the table under test.
    assert {name: since(name) for name in ("Freeze", "Reboot", "Redeploy", "Preempt",
                                           "Terminate", "Description", "EventSource",
                                           "DurationInSeconds", "EventId", "Surprise")} == {
        "Freeze": None, "Reboot": None, "Redeploy": None, "Preempt": "2017-11-01",
        "Terminate": "2019-01-01", "Description": "2019-04-01", "EventSource": "2019-08-01",
        "DurationInSeconds": "2020-07-01", "EventId": None, "Surprise": None}
    assert KNOWN_API_VERSIONS[-1] == DEFAULT_API_VERSION


@pytest.mark.parametrize(("version", "expected"), [
    ("2017-11-01", True), ("2019-08-01", True), ("2017-08-01", False),
    # Newer than setui knows, or not a date at all: the service's to answer.
    ("2024-01-01", True), ("latest", True), ("2019-08-01-preview", True),
    ("2017-10-31-preview", False),
])
def test_carries_compares_dates(version: str, expected: bool) -> None:
    assert carries(version, "Preempt") is expected


def test_limits_is_silent_when_nothing_is_missing() -> None:
    assert limits("2020-07-01") is None
    assert limits("2030-01-01") is None
    assert limits("latest") is None
    assert limits("2019-08-01") == "api-version 2019-08-01 has no DurationInSeconds; " \
                                   "2020-07-01 has them all"


def _documented_table() -> list[tuple[str, str, str]]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## api-version", 1)[1]
    rows = re.findall(r"^\| (\d{4}-\d\d-\d\d) \|(.*?)\|(.*?)\|$", section, re.MULTILINE)
    return [(version, first.strip(), note.strip()) for version, first, note in rows]


def test_the_reference_prints_the_same_table() -> None:
    assert _documented_table() == [
        (v.name, ", ".join((*v.event_types, *v.fields)), v.note) for v in API_VERSIONS]
