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
    is_this_vm,
    parse_document,
    parse_not_before,
)
from tests.support.examples import examples

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
        # .NET's 7-digit fractions and the basic (compact) form: Python 3.10's
        # fromisoformat refused both, 3.11 took them; the parser must not depend on it.
        ("2016-09-19T18:29:47.1234567Z",
         datetime(2016, 9, 19, 18, 29, 47, 123456, tzinfo=timezone.utc)),
        ("2016-09-19T18:29:47.5Z", datetime(2016, 9, 19, 18, 29, 47, 500000, tzinfo=timezone.utc)),
        ("2016-09-19T18:29:47,25Z",
         datetime(2016, 9, 19, 18, 29, 47, 250000, tzinfo=timezone.utc)),
        ("20160919T182947Z", datetime(2016, 9, 19, 18, 29, 47, tzinfo=timezone.utc)),
        ("20160919T182947.1234567+0200",
         datetime(2016, 9, 19, 16, 29, 47, 123456, tzinfo=timezone.utc)),
        ("2016-09-19T13:59:47-04:30", datetime(2016, 9, 19, 18, 29, 47, tzinfo=timezone.utc)),
        ("2016-09-19T20:29:47+0200", datetime(2016, 9, 19, 18, 29, 47, tzinfo=timezone.utc)),
        ("2016-09-19T21:29:47+03", datetime(2016, 9, 19, 18, 29, 47, tzinfo=timezone.utc)),
        ("2016-09-19t18:29:47z", datetime(2016, 9, 19, 18, 29, 47, tzinfo=timezone.utc)),
        ("2016-09-19 18:29", datetime(2016, 9, 19, 18, 29, tzinfo=timezone.utc)),
        ("2016-09-19", datetime(2016, 9, 19, tzinfo=timezone.utc)),
        ("2016-09-19T23:30:00-01:00", datetime(2016, 9, 20, 0, 30, tzinfo=timezone.utc)),
        ("Mon, 19 Sep 2016 18:29:47 +0000",
         datetime(2016, 9, 19, 18, 29, 47, tzinfo=timezone.utc)),
        ("", None),
        ("  ", None),
    ],
)
def test_not_before_formats(text: str, expected: datetime | None) -> None:
    assert parse_not_before(text) == expected


@pytest.mark.parametrize("text", [
    "tomorrow", "2016-09-19T18:29:47Zjunk", "2016-13-19T18:29:47Z", "2016-02-30T00:00:00Z",
    "2016-09-19T24:00:00Z", "2016-09-19T18:60:00Z", "2016-09-19T18:29:47+24:00",
    "2016-09-19T18:29:47+02:60", "2016-9-19T18:29:47Z", "2016-09-19T182947Z",
    "2016-09-19T18:29:47.Z", "\u0662\u0660\u0661\u0666-09-19T18:29:47Z",
    "0001-01-01T00:00:00+01:00", "Mon, 32 Sep 2016 18:29:47 GMT", "2016-09-19T18:29:47 Z",
])
def test_garbage_not_before_is_the_one_error_naming_the_field(text: str) -> None:
    with pytest.raises(DocumentError) as info:
        parse_document(_doc(NotBefore=text))
    assert info.value.field == "Events[0].NotBefore"
    assert "time" in info.value.problem


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


@pytest.mark.parametrize("value", [2**63, 99999999999999999999999, "99999999999999999999999",
                                   1e30])
def test_incarnation_beyond_64_bits_is_a_document_error(value: object) -> None:
    """The history stores it as SQLite's 64-bit integer: bigger is malformed, not a crash."""
    with pytest.raises(DocumentError) as info:
        parse_document({"DocumentIncarnation": value, "Events": []})
    assert info.value.field == "DocumentIncarnation"
    assert "too large (at most 9223372036854775807)" in str(info.value)
    largest = parse_document({"DocumentIncarnation": 2**63 - 1, "Events": []})
    assert largest.incarnation == 2**63 - 1


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
        # str.isdigit() takes these and int() refuses them: once a nameless "unreadable".
        (_doc(DurationInSeconds="--5"), "Events[0].DurationInSeconds", "seconds"),
        (_doc(DurationInSeconds="\u00b2"), "Events[0].DurationInSeconds", "seconds"),
        (_doc(DurationInSeconds="-\u00b3"), "Events[0].DurationInSeconds", "seconds"),
        (_doc(DurationInSeconds="\u0663"), "Events[0].DurationInSeconds", "seconds"),
        (_doc(DurationInSeconds="1" * 19), "Events[0].DurationInSeconds", "seconds"),
        (_doc(DurationInSeconds="-"), "Events[0].DurationInSeconds", "seconds"),
        ({"DocumentIncarnation": "\u00b2", "Events": []}, "DocumentIncarnation", ""),
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


def test_durations_as_strings() -> None:
    assert parse_document(_doc(DurationInSeconds=" -1 ")).events[0].duration == -1
    assert parse_document(_doc(DurationInSeconds="600")).events[0].duration == 600
    assert parse_document(_doc(DurationInSeconds="9" * 18)).events[0].duration == int("9" * 18)


def test_missing_events_entry_can_be_null() -> None:
    assert parse_document({"DocumentIncarnation": 3, "Events": None}).events == ()


def test_deeply_nested_json_is_a_document_error() -> None:
    with pytest.raises(DocumentError):
        parse_document("[" * 100_000 + "]" * 100_000)


# Strings that look numeric to str.isdigit() but not to int(), and other near-misses.
tricky_text = st.sampled_from(["--5", "\u00b2", "-\u00b3", "\u0663", "1" * 40, "-", " 7 ",
                               "2016-09-19T18:29:47.1234567Z", "20160919T182947Z"])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text()
    | tricky_text,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(
        st.sampled_from(["DocumentIncarnation", "Events", "EventId", "EventType",
                         "EventStatus", "Resources", "NotBefore", "DurationInSeconds",
                         "EventSource", "Description", "x"]),
        children, max_size=6),
    max_leaves=20,
)


@settings(max_examples=examples(300), deadline=None)
@given(json_values)
def test_any_json_value_parses_or_raises_the_one_error(value: object) -> None:
    try:
        doc = parse_document(value)
    except DocumentError as exc:
        # Past "is it a JSON object", every error says which field it is about.
        assert exc.field or not isinstance(value, dict), exc
        return
    assert isinstance(doc, Document)


field_values = (st.none() | st.booleans() | st.integers() | st.floats() | st.text()
                | tricky_text | st.lists(st.text() | st.integers(), max_size=2))


@settings(max_examples=examples(300), deadline=None)
@given(st.dictionaries(
    st.sampled_from(["EventId", "EventType", "EventStatus", "Resources", "NotBefore",
                     "DurationInSeconds", "EventSource", "Description", "ResourceType"]),
    field_values, min_size=1, max_size=2), field_values)
def test_every_error_in_an_event_names_its_field(changed: dict[str, object],
                                                 incarnation: object) -> None:
    # A valid event with one or two fields replaced, so the parser reaches every field.
    event = {**_doc()["Events"][0], **changed}  # type: ignore[index]
    for value in (1, incarnation):
        try:
            parse_document({"DocumentIncarnation": value, "Events": [event]})
        except DocumentError as exc:
            assert exc.field.startswith(("Events[0].", "DocumentIncarnation")), exc


@settings(max_examples=examples(200), deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_parse_or_raise_the_one_error(data: bytes) -> None:
    # Any other exception fails the test; a document must hold only what was parsed.
    try:
        doc = parse_document(data)
    except DocumentError:
        return
    assert isinstance(doc, Document)


@settings(max_examples=examples(200), deadline=None)
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


def test_this_vm_is_matched_by_one_rule() -> None:
    """Case and the 2017 preview's leading underscore are ignored, by affects and alone."""
    event = parse_document({"DocumentIncarnation": 1, "Events": [{
        "EventId": "A", "EventType": "Reboot", "EventStatus": "Scheduled",
        "Resources": ["_Web-0", "web-1"], "NotBefore": ""}]}).events[0]
    for name in ("web-0", "WEB-0", "_web-0"):
        assert event.affects(name)
        assert is_this_vm("_Web-0", name)
    assert not event.affects("web-01")
    assert not event.affects(None) and not is_this_vm("web-0", None)
    assert not is_this_vm("", "")
