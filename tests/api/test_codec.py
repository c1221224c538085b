"""setui's values through the wire and back: what the agent encodes, a client decodes to
the same thing; and whatever a broken or hostile agent sends instead, a decode gives a
value or a ProtocolError, never another exception."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from setui.api.codec import (
    AgentInfo,
    AgentState,
    CallerAccess,
    Hello,
    Plan,
    RecordingParts,
    RecordingStatus,
    decode_audit,
    decode_confirmed,
    decode_health,
    decode_hello,
    decode_impact,
    decode_incarnation,
    decode_outcome,
    decode_plan,
    decode_progress,
    decode_recording,
    decode_state,
    decode_story,
    decode_verify,
    encode_audit,
    encode_confirmed,
    encode_health,
    encode_hello,
    encode_impact,
    encode_incarnation,
    encode_outcome,
    encode_plan,
    encode_progress,
    encode_recording,
    encode_state,
    encode_story,
    encode_verify,
)
from setui.api.protocol import Fields, ProtocolError, decode_frame, encode_frame
from setui.approval.outcome import ApprovalOutcome, Progress
from setui.approval.snapshot import confirmed
from setui.core.health import ConnectionState, Health, PollResult
from setui.core.holes import Hole
from setui.core.impact import BOOT, STALL, STARTED, Impact
from setui.core.model import format_not_before, parse_document
from setui.core.tracker import Tracker
from setui.monitor.state import MonitorState
from setui.store.records import (
    AuditRecord,
    ChangeRecord,
    HookRun,
    IncarnationRecord,
    Step,
    StoryEntry,
    VerifyResult,
)
from tests.support.api_helpers import JSON
from tests.support.examples import examples

T0 = datetime(2026, 11, 25, 19, 0, tzinfo=timezone.utc)
TEXT = st.text(max_size=30)  # controls, bidi and lone surrogates included
TIMES = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1),
                     timezones=st.just(timezone.utc))


def _through_wire(value: dict[str, Any]) -> Fields:
    return Fields(decode_frame(encode_frame(value)[:-1]))


def _event(index: int, status: str, start_in: int, resources: list[str], text: str
           ) -> dict[str, Any]:
    return {"EventId": f"ID-{index}-{text[:8]}", "EventType": "Reboot", "EventStatus": status,
            "Resources": resources, "NotBefore": format_not_before(T0 + timedelta(
                minutes=start_in)) if status == "Scheduled" else "",
            "Description": text, "DurationInSeconds": -1, "EventSource": "Platform"}


DOCUMENTS = st.lists(st.lists(st.tuples(st.integers(0, 5), st.sampled_from(
    ["Scheduled", "Started"]), st.integers(1, 60), st.lists(TEXT, max_size=3), TEXT),
    max_size=4), min_size=1, max_size=5)


def _state(documents: list[list[tuple[Any, ...]]]) -> MonitorState:
    """A monitor's state after these documents, by the real tracker and state."""
    state, tracker = MonitorState(), Tracker()
    for number, events in enumerate(documents, start=1):
        seen: dict[Any, Any] = {}
        for index, status, start_in, resources, text in events:
            seen.setdefault(index, _event(index, status, start_in, resources, text))
        document = parse_document({"DocumentIncarnation": number,
                                   "Events": list(seen.values())})
        at = T0 + timedelta(seconds=number)
        changes = tracker.update(document, at)
        state.apply(PollResult(Health(state=ConnectionState.LIVE, last_success=at,
                                      last_success_mono=100.0 + number, latency=0.01),
                               document, tuple(changes), fresh=True, seen_at=at))
    return state


@settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck))
@given(DOCUMENTS)
def test_a_state_reads_back_as_it_was(documents: list[list[tuple[Any, ...]]]) -> None:
    monitor = _state(documents)
    last = list(monitor.lives)
    approvals = {last[0]: _audit(1, last[0])} if last else {}
    sent = AgentState(monitor, T0, 1.0, tuple(monitor.anomalies[:2]), ConnectionState.STALE,
                      approvals, RecordingStatus(False, "disk full"))
    got = decode_state(_through_wire(encode_state(sent, 200.0)), 500.0)
    assert got.state.document == monitor.document
    assert got.state.document.raw == monitor.document.raw
    assert got.state.lives == monitor.lives
    assert got.state.gone == monitor.gone and got.state.anomalies == monitor.anomalies
    assert (got.now, got.interval, got.previous_state, got.recording) == (
        T0, 1.0, ConnectionState.STALE, RecordingStatus(False, "disk full"))
    assert got.changes == sent.changes and got.approvals == approvals


def test_a_health_travels_as_ages_and_is_rebuilt_on_the_readers_clock() -> None:
    health = Health(state=ConnectionState.RETRYING, last_success=T0, last_success_mono=90.0,
                    consecutive_failures=3, last_error="HTTP 503", latency=0.2,
                    first_call_pending=False, next_attempt_in=4.0, next_attempt_mono=104.0,
                    clock_skew=-2.5, stale_after=3.0)
    got = decode_health(_through_wire(encode_health(health, 100.0)), 5000.0)
    assert got.age(5000.0) == pytest.approx(10.0)
    assert got.at(5000.0).next_attempt_in == pytest.approx(4.0)
    assert (got.state, got.consecutive_failures, got.last_error, got.clock_skew) == (
        ConnectionState.RETRYING, 3, "HTTP 503", -2.5)
    # Live that has gone stale by the time it is sent is sent as stale.
    live = Health(state=ConnectionState.LIVE, last_success_mono=0.0, stale_after=3.0)
    assert encode_health(live, 10.0)["state"] == "stale"


def _audit(seq: int, event_id: str | None = "E1", **fields: Any) -> AuditRecord:
    base: dict[str, Any] = dict(
        seq=seq, action="approve-outcome", time=T0, user="alice", host="vm",
        endpoint="http://127.0.0.1:1", ssh_client=None, event_id=event_id,
        event={"EventId": event_id}, incarnation=3, attempt_seq=seq - 1, status=200,
        error=None, latency_ms=12.5, details={"api": {"uid": 1001}}, prev_hash="a" * 64,
        hash="b" * 64, has_outcome=None)
    base.update(fields)
    return AuditRecord(**base)


AUDITS = st.builds(lambda seq, user, error, details, when: _audit(
    seq, "E1", user=user, error=error, details=details, time=when),
    st.integers(1, 2**40), TEXT, st.none() | TEXT, st.dictionaries(TEXT, JSON, max_size=3),
    TIMES)


@settings(max_examples=examples(100), deadline=None)
@given(AUDITS)
def test_audit_records_read_back_as_they_were(record: AuditRecord) -> None:
    assert decode_audit(_through_wire(encode_audit(record))) == record


@settings(max_examples=examples(100), deadline=None)
@given(st.builds(IncarnationRecord, endpoint=TEXT, incarnation=st.integers(0, 2**62),
                 first_seen=TIMES, last_seen=TIMES, raw_json=TEXT,
                 changes=st.lists(st.builds(ChangeRecord, kind=st.sampled_from(
                     ["appeared", "gone"]), event_id=st.none() | TEXT, detail=TEXT,
                     missed=st.integers(0, 9)), max_size=3).map(tuple),
                 summary=TEXT, content_hash=TEXT, row_id=st.integers(0, 2**40),
                 clock_skew=st.none() | st.floats(-1e6, 1e6)))
def test_incarnations_read_back_as_they_were(record: IncarnationRecord) -> None:
    got = decode_incarnation(_through_wire(encode_incarnation(record)))
    assert got == record and got.row_id == record.row_id


def test_the_other_values_read_back_as_they_were() -> None:
    story = StoryEntry(T0, "approve-attempt", "E1", "http://x", 3, "approved", "Reboot",
                       "Scheduled", "Mon, 01 Jan 2026 00:00:00 GMT", "audit", 4, False)
    assert decode_story(_through_wire(encode_story(story))) == story
    verify = VerifyResult(False, 9, 4, "record 4 altered", 9, "c" * 64, "witness behind")
    assert decode_verify(_through_wire(encode_verify(verify))) == verify
    outcome = ApprovalOutcome("E1", False, True, None, "refused: changed", None, 7,
                              ask_again=True, changes=("NotBefore: a -> b",))
    assert decode_outcome(_through_wire(encode_outcome(outcome))) == outcome
    # A try may have arrived: neither approved nor failed, and it must reach a client so.
    unknown = ApprovalOutcome("E1", False, False, None, "outcome unknown: try 1 of 1 may "
                              "have reached the service (timed out)", 0.5, 8, unknown=True)
    assert decode_outcome(_through_wire(encode_outcome(unknown))) == unknown
    progress = Progress("E1", 2, "HTTP 503", 1.5, 503, "server")
    assert decode_progress(_through_wire(encode_progress(progress))) == progress
    plan = Plan((Step("E1", "prepare", "drain", "running", "prepare 'drain'", T0, T0),),
                frozenset({"E1"}))
    assert decode_plan(_through_wire(encode_plan(plan))) == plan
    holes = (Hole(T0, T0 + timedelta(1), endpoint="http://x"),
             Hole(T0 + timedelta(1.5), T0 + timedelta(2), open=True, endpoint="http://x"))
    parts = RecordingParts("http://x", (), (_audit(2),), holes, True, T0, T0 + timedelta(2))
    assert decode_recording(_through_wire(encode_recording(parts))) == parts
    runs = (HookRun(1, "E1", "prepare", "drain", "/bin/drain", T0, T0 + timedelta(1), 0,
                    False, ""),
            HookRun(2, "E1", "recover", "drain", "/bin/undrain", T0, None, None, False, ""))
    parts = replace(parts, hook_runs=runs)
    assert decode_recording(_through_wire(encode_recording(parts))) == parts
    older = {k: v for k, v in encode_recording(parts).items() if k != "hook_runs"}
    assert decode_recording(_through_wire(older)).hook_runs == ()  # an older agent's
    hello = Hello(1, "0.1.0", AgentInfo(42, T0, "vm", None, "http://x", "/d", None, False),
                  CallerAccess(1001, "alice", False, "you are not in group setui"))
    assert decode_hello(_through_wire(encode_hello(hello))) == hello
    assert tuple(decode_impact(_through_wire(encode_impact(i))) for i in IMPACTS) == IMPACTS


IMPACTS = (Impact(STALL, T0, 4.8, "http://x", wall_seconds=4.9, boottime_seconds=4.8,
                  event_id="E1", event_type="Freeze", announced=5, tie=STARTED, id=3),
           Impact(BOOT, T0 + timedelta(1), 62.5, "http://x", booted_at=T0 + timedelta(1),
                  first_poll=T0 + timedelta(1, 60), exact=False, boot_id="b-2", id=4))


def test_a_confirmed_snapshot_reads_back_and_nothing_else_is_taken() -> None:
    document = parse_document({"DocumentIncarnation": 4, "Events": [
        _event(1, "Scheduled", 10, ["vm-a", "vm-b"], "maintenance")]})
    event_id = document.events[0].event_id
    seen = confirmed(document, event_id)
    assert seen is not None
    got = decode_confirmed(event_id.lower(), _through_wire(encode_confirmed(seen)))
    assert got == seen
    wrong = encode_confirmed(seen)
    wrong["snapshot"]["Extra"] = "x"
    with pytest.raises(ProtocolError, match="not a field of an event"):
        decode_confirmed(event_id, _through_wire(wrong))
    with pytest.raises(ProtocolError, match="is not 'OTHER'"):
        decode_confirmed("OTHER", _through_wire(encode_confirmed(seen)))


def test_a_version_this_client_does_not_speak_is_refused_in_words() -> None:
    hello = encode_hello(Hello(1, "9", AgentInfo(1, T0, None, None, "x", None, None, False),
                               CallerAccess(0, "root", True, None)))
    hello["api"] = 2
    with pytest.raises(ProtocolError, match="API version 2; this setui speaks version 1"):
        decode_hello(Fields(hello))


def _valid() -> list[tuple[Callable[[Fields], Any], dict[str, Any]]]:
    monitor = _state([[(1, "Scheduled", 10, ["a"], "x"), (2, "Started", 1, [], "y")],
                      [(2, "Started", 1, [], "y")]])
    state = AgentState(monitor, T0, 1.0, (), None, {"E1": _audit(1)},
                       RecordingStatus(True))
    return [
        (lambda f: decode_state(f, 0.0), encode_state(state, 0.0)),
        (decode_audit, encode_audit(_audit(3))),
        (decode_impact, encode_impact(IMPACTS[0])),
        (decode_plan, encode_plan(Plan((Step("E", "approve", "r", "done", "", None, T0),),
                                       frozenset({"E"})))),
        (decode_outcome, encode_outcome(ApprovalOutcome("E", True, False, 200, "ok", 0.1,
                                                        2))),
        (decode_hello, encode_hello(Hello(1, "1", AgentInfo(1, T0, None, None, "x", None,
                                                            None, False),
                                          CallerAccess(0, "root", True, None)))),
    ]


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*path, index))
    return found


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = _replace(value[path[0]], path[1:], new)
    return copy


@settings(max_examples=examples(400), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data(), JSON)
def test_a_hostile_agents_frames_decode_to_a_value_or_a_protocol_error(
        data: st.DataObject, replacement: Any) -> None:
    """Any one part of a valid frame replaced by any JSON at all."""
    decode, valid = data.draw(st.sampled_from(_valid()))
    path = data.draw(st.sampled_from(_paths(valid)))
    hostile = _replace(valid, path, replacement)
    try:
        decode(Fields(hostile))
    except ProtocolError as exc:
        assert exc.message


def test_a_document_as_deep_as_the_parser_takes_still_travels_in_a_state_frame() -> None:
    deep: Any = "bottom"
    for _ in range(28):  # the document 1, Events 2, the event 3, then 28 more: 31 in all
        deep = {"x": deep}
    document = parse_document({"DocumentIncarnation": 1, "Events": [
        {**_event(1, "Scheduled", 5, ["a"], "x"), "Extra": deep}]})
    monitor = MonitorState(document=document)
    sent = AgentState(monitor, T0, 1.0, (), None, {}, RecordingStatus(True))
    frame = encode_frame({"push": "state", "state": encode_state(sent, 0.0)})
    got = decode_state(Fields(decode_frame(frame[:-1])["state"]), 0.0)
    assert got.state.document is not None and got.state.document.raw == document.raw
