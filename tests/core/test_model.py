"""The parser on every documented example and on everything else the network can send."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from setui.core.model import (
    Document,
    DocumentError,
    EventSource,
    EventStatus,
    EventType,
    format_not_before,
    parse_document,
    parse_not_before,
)

SEEDS = sorted((Path(__file__).parent.parent / "data" / "seed_documents").glob("*.json"))


def test_there_are_seed_documents() -> None:
    assert len(SEEDS) >= 17


@pytest.mark.parametrize("path", SEEDS, ids=[p.stem for p in SEEDS])
def test_every_seed_document_parses(path: Path) -> None:
    raw = path.read_bytes()
    doc = parse_document(raw)
    data = json.loads(raw)
    assert doc.incarnation == int(data["DocumentIncarnation"])
    assert len(doc.events) == len(data["Events"])
    for event, item in zip(doc.events, data["Events"], strict=True):
        assert event.event_id == item["EventId"]
        assert event.event_type.known
        assert event.raw == item


def test_live_migration_example_fields() -> None:
    doc = parse_document((SEEDS[1]).read_bytes())  # seed000 incarnation 2
    (event,) = doc.events
    assert event.event_type is EventType.FREEZE
    assert event.status is EventStatus.SCHEDULED
    assert event.source is EventSource.PLATFORM
    assert event.resources == ("WestNO_0", "WestNO_1")
    assert event.not_before == datetime(2022, 4, 11, 22, 26, 58, tzinfo=timezone.utc)
    assert event.duration == 5
    assert event.impact == "5 s"
    assert event.affects("westno_0") and not event.affects("WestNO_2")


def test_started_event_has_no_not_before() -> None:
    doc = parse_document((SEEDS[2]).read_bytes())  # seed000 incarnation 3
    assert doc.events[0].status is EventStatus.STARTED
    assert doc.events[0].not_before is None


def test_preview_2017_schema() -> None:
    doc = parse_document(
        (Path(__file__).parent.parent / "data/seed_documents/seed001_preview_2017.json").read_text()
    )
    assert doc.incarnation == 5
    event = doc.events[0]
    assert event.not_before == datetime(2016, 9, 19, 18, 29, 47, tzinfo=timezone.utc)
    # fields the version lacked are unknown, not errors
    assert event.description is None and event.source is None and event.duration is None
    assert event.impact == "unknown"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Mon, 11 Apr 2022 22:26:58 GMT", datetime(2022, 4, 11, 22, 26, 58, tzinfo=timezone.utc)),
        ("Mon, 19 Sep 2016 18:29:47 GMT", datetime(2016, 9, 19, 18, 29, 47, tzinfo=timezone.utc)),
        ("2016-09-19T18:29:47Z", datetime(2016, 9, 19, 18, 29, 47, tzinfo=timezone.utc)),
        ("2016-09-19T20:29:47+02:00", datetime(2016, 9, 19, 18, 29, 47, tzinfo=timezone.utc)),
        ("2016-09-19T18:29:47", datetime(2016, 9, 19, 18, 29, 47, tzinfo=timezone.utc)),
        ("", None),
        ("  ", None),
    ],
)
def test_not_before_formats(text: str, expected: datetime | None) -> None:
    assert parse_not_before(text) == expected


def test_not_before_round_trips_in_the_service_format() -> None:
    when = datetime(2022, 4, 11, 22, 26, 58, tzinfo=timezone.utc)
    assert format_not_before(when) == "Mon, 11 Apr 2022 22:26:58 GMT"
    assert parse_not_before(format_not_before(when)) == when
    assert format_not_before(None) == ""


def _doc(**event: object) -> dict[str, object]:
    base: dict[str, object] = {
        "EventId": "e1", "EventType": "Reboot", "EventStatus": "Scheduled",
        "Resources": ["vm1"], "NotBefore": "Mon, 11 Apr 2022 22:26:58 GMT",
    }
    base.update(event)
    return {"DocumentIncarnation": 1, "Events": [base]}


def test_duration_zero_and_minus_one_stay_different() -> None:
    assert parse_document(_doc(DurationInSeconds=0)).events[0].impact == "none"
    assert parse_document(_doc(DurationInSeconds=-1)).events[0].impact == "unknown"
    assert parse_document(_doc(DurationInSeconds=-1)).events[0].duration == -1
    assert parse_document(_doc(DurationInSeconds=600)).events[0].impact == "10 min"


def test_unknown_values_are_kept_as_they_came() -> None:
    doc = parse_document(_doc(EventType="Hibernate", EventStatus="Paused", EventSource="Robot"))
    event = doc.events[0]
    assert str(event.event_type) == "Hibernate" and not event.event_type.known
    assert event.status.value == "Paused" and not event.status.known
    assert str(event.source) == "Robot"
    assert EventType("Freeze") is EventType.FREEZE and EventType.FREEZE.known


def test_incarnation_as_string_or_integer() -> None:
    assert parse_document({"DocumentIncarnation": "42", "Events": []}).incarnation == 42
    assert parse_document({"DocumentIncarnation": 42, "Events": []}).incarnation == 42


@pytest.mark.parametrize(
    ("body", "field", "problem"),
    [
        (b"not json", "", "not JSON"),
        (b"\xff\xfe\x00", "", "UTF-8"),
        ("[]", "", "expected a JSON object"),
        ({"Events": []}, "DocumentIncarnation", "missing"),
        ({"DocumentIncarnation": 1}, "Events", "missing"),
        ({"DocumentIncarnation": "x", "Events": []}, "DocumentIncarnation", "integer"),
        ({"DocumentIncarnation": True, "Events": []}, "DocumentIncarnation", "boolean"),
        ({"DocumentIncarnation": -3, "Events": []}, "DocumentIncarnation", "negative"),
        ({"DocumentIncarnation": 1, "Events": {}}, "Events", "list"),
        ({"DocumentIncarnation": 1, "Events": [1]}, "Events[0]", "object"),
        (_doc(EventId=None), "Events[0].EventId", "string"),
        (_doc(EventId=""), "Events[0].EventId", "empty"),
        (_doc(Resources="vm1"), "Events[0].Resources", "list"),
        (_doc(Resources=[1]), "Events[0].Resources[0]", "string"),
        (_doc(NotBefore=5), "Events[0].NotBefore", "time string"),
        (_doc(NotBefore="tomorrow-ish"), "Events[0].NotBefore", "RFC 1123"),
        (_doc(DurationInSeconds="long"), "Events[0].DurationInSeconds", "seconds"),
        (_doc(Description=["x"]), "Events[0].Description", "string"),
    ],
)
def test_malformed_documents_name_the_field(body: object, field: str, problem: str) -> None:
    with pytest.raises(DocumentError) as info:
        parse_document(body)
    assert info.value.field == field
    assert problem in str(info.value)
    if field:
        assert str(info.value).startswith(field + ":")


def test_missing_events_entry_can_be_null() -> None:
    assert parse_document({"DocumentIncarnation": 3, "Events": None}).events == ()


def test_deeply_nested_json_is_a_document_error() -> None:
    with pytest.raises(DocumentError):
        parse_document("[" * 100_000 + "]" * 100_000)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(
        st.sampled_from(["DocumentIncarnation", "Events", "EventId", "EventType",
                         "EventStatus", "Resources", "NotBefore", "DurationInSeconds",
                         "EventSource", "Description", "x"]),
        children, max_size=6),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_any_json_value_parses_or_raises_the_one_error(value: object) -> None:
    try:
        doc = parse_document(value)
    except DocumentError:
        return
    assert isinstance(doc, Document)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_parse_or_raise_the_one_error(data: bytes) -> None:
    # Any other exception fails the test; a document must hold only what was parsed.
    try:
        doc = parse_document(data)
    except DocumentError:
        return
    assert isinstance(doc, Document)


@settings(max_examples=200, deadline=None)
@given(
    st.fixed_dictionaries({
        "EventId": st.text(min_size=1),
        "EventType": st.text(),
        "EventStatus": st.sampled_from(["Scheduled", "Started"]) | st.text(),
        "Resources": st.lists(st.text(), max_size=5),
        "NotBefore": st.just("") | st.just("Mon, 11 Apr 2022 22:26:58 GMT") | st.text(),
        "DurationInSeconds": st.integers(min_value=-1, max_value=10**6),
    })
)
def test_well_shaped_events_round_trip_their_strings(event: dict[str, object]) -> None:
    try:
        doc = parse_document({"DocumentIncarnation": 1, "Events": [event]})
    except DocumentError as exc:
        assert exc.field.startswith(("Events[0].NotBefore", "Events[0].EventId"))
        return
    parsed = doc.events[0]
    assert parsed.event_id == event["EventId"]
    assert parsed.event_type.value == event["EventType"]
    assert parsed.resources == tuple(event["Resources"])  # type: ignore[arg-type]
