"""setui's values on the wire: each ``encode_X`` has its ``decode_X``, and a decode trusts
nothing (the client trusts the agent no more than it trusts IMDS).

Pure, no I/O. An event travels as the service's own JSON and is read back with the same
parser as a document from IMDS (core.model), so it is checked the same way. Monotonic
times mean nothing in another process: a health travels as ages ("seconds since the last
good answer", "seconds to the next try") and is rebuilt on the reader's clock. Every
decode raises :class:`~setui.api.protocol.ProtocolError` and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from setui.api.protocol import API_VERSION, BAD_REQUEST, Fields, ProtocolError, time_text
from setui.core.health import ConnectionState, Health
from setui.core.holes import Hole
from setui.core.impact import AROUND, STARTED, Impact
from setui.core.impact import KINDS as IMPACT_KINDS
from setui.core.model import (
    MAX_INCARNATION,
    Document,
    DocumentError,
    Event,
    parse_document,
)
from setui.core.tracker import Change, ChangeKind
from setui.monitor.state import EventLife, GoneEvent, MonitorState
from setui.outcome import ApprovalOutcome, Progress
from setui.snapshot import Confirmed
from setui.store.reading import RecordingParts
from setui.store.records import (
    AuditRecord,
    ChangeRecord,
    Claim,
    HookRun,
    IncarnationRecord,
    Step,
    StoryEntry,
    VerifyResult,
    event_snapshot,
)

__all__ = [
    "AgentInfo",
    "AgentState",
    "Hello",
    "Plan",
    "RecordingParts",
    "RecordingStatus",
    "VmIdentity",
    "You",
    "decode_audit",
    "decode_claim",
    "decode_confirmed",
    "decode_health",
    "decode_hello",
    "decode_holes",
    "decode_impact",
    "decode_incarnation",
    "decode_outcome",
    "decode_plan",
    "decode_progress",
    "decode_recording",
    "decode_state",
    "decode_story",
    "decode_verify",
    "decode_vm",
    "encode_audit",
    "encode_claim",
    "encode_confirmed",
    "encode_health",
    "encode_hello",
    "encode_holes",
    "encode_impact",
    "encode_incarnation",
    "encode_outcome",
    "encode_plan",
    "encode_progress",
    "encode_recording",
    "encode_state",
    "encode_story",
    "encode_verify",
    "encode_vm",
]

MAX_INT = 2**63 - 1
MAX_EVENTS = 10_000  # events, lives, gone events or changes in one frame
MAX_NOTES = 1_000
MAX_RECORDS = 100_000  # records in one answer; the frame's size bounds it sooner
SHORT = 1_000  # characters of a name, a kind, a key
# The snapshot an operator confirms: the service's field names (store.records.event_snapshot).
_SNAPSHOT_TEXT = ("EventId", "EventType", "EventStatus", "NotBefore", "ResourceType",
                  "EventSource", "Description")
MAX_RESOURCES = 10_000


def _fail(where: str, problem: str) -> ProtocolError:
    return ProtocolError(BAD_REQUEST, f"{where}: {problem}")


def _list(fields: Fields, key: str, limit: int) -> list[Any]:
    return fields.items(key, limit=limit, optional=True) or []


def _each(fields: Fields, key: str, limit: int) -> list[Fields]:
    return [Fields(item, f"{fields.name(key)}[{i}]", fields.code)
            for i, item in enumerate(_list(fields, key, limit))]


# -- events and documents -----------------------------------------------------------------
def _event_json(event: Event) -> dict[str, Any]:
    return dict(event.raw) if event.raw else event_snapshot(event)


def _event(value: Any, where: str) -> Event:
    """One event, read by the service's own parser."""
    if not isinstance(value, dict):
        raise _fail(where, "expected an event object")
    try:
        return parse_document({"DocumentIncarnation": 0, "Events": [value]}).events[0]
    except DocumentError as exc:
        raise _fail(where, str(exc).replace("Events[0]", "event")) from None


def _document(value: Any, where: str) -> Document | None:
    if value is None:
        return None
    try:
        return parse_document(value)
    except DocumentError as exc:
        raise _fail(where, str(exc)) from None


# -- health -------------------------------------------------------------------------------
def encode_health(health: Health, mono_now: float) -> dict[str, Any]:
    """The health at ``mono_now`` with its monotonic times as ages."""
    health = health.at(mono_now)
    return {
        "state": health.state.value, "last_success": time_text(health.last_success),
        "age": health.age(mono_now), "failures": health.consecutive_failures,
        "last_error": health.last_error, "latency": health.latency,
        "first_call_pending": health.first_call_pending,
        "next_attempt_in": health.next_attempt_in, "clock_skew": health.clock_skew,
        "stale_after": health.stale_after,
    }


def decode_health(fields: Fields, mono_now: float) -> Health:
    """The health rebuilt on this process's monotonic clock."""
    state = fields.member("state", ConnectionState, "a connection state")
    age = fields.number("age", optional=True)
    next_in = fields.number("next_attempt_in", optional=True)
    stale_after = fields.number("stale_after")
    if (age is not None and age < 0) or (next_in is not None and next_in < 0) \
            or stale_after <= 0:
        raise fields.fail("age", "times must not be negative")
    return Health(
        state=state, last_success=fields.time("last_success", optional=True),
        last_success_mono=None if age is None else mono_now - age,
        consecutive_failures=fields.integer("failures", high=MAX_INT),
        last_error=fields.text("last_error", optional=True),
        latency=fields.number("latency", optional=True),
        first_call_pending=fields.flag("first_call_pending"),
        next_attempt_in=next_in, clock_skew=fields.number("clock_skew", optional=True),
        next_attempt_mono=None if next_in is None else mono_now + next_in,
        stale_after=stale_after)


# -- changes, lives, gone events ----------------------------------------------------------
def _encode_change(change: Change) -> dict[str, Any]:
    return {
        "kind": change.kind.value, "incarnation": change.incarnation,
        "seen_at": time_text(change.seen_at),
        "event": None if change.event is None else _event_json(change.event),
        "previous": None if change.previous is None else _event_json(change.previous),
        "detail": change.detail, "initial": change.initial, "certain": change.certain,
        "missed": change.missed,
    }


def _decode_change(fields: Fields) -> Change:
    kind = fields.member("kind", ChangeKind, "a kind of change")
    event = fields.value("event", optional=True)
    previous = fields.value("previous", optional=True)
    return Change(
        kind=kind, incarnation=fields.integer("incarnation", high=MAX_INCARNATION),
        seen_at=fields.time("seen_at"),
        event=None if event is None else _event(event, fields.name("event")),
        previous=None if previous is None else _event(previous, fields.name("previous")),
        detail=fields.text("detail"), initial=fields.flag("initial"),
        certain=fields.flag("certain", True),
        missed=fields.integer("missed", high=MAX_INCARNATION))


def _encode_life(life: EventLife) -> dict[str, Any]:
    return {
        "event_id": life.event_id, "first_seen": time_text(life.first_seen),
        "first_incarnation": life.first_incarnation, "initial": life.initial,
        "started_at": time_text(life.started_at),
        "started_incarnation": life.started_incarnation,
        "started_exact": life.started_exact, "gone_at": time_text(life.gone_at),
        "gone_incarnation": life.gone_incarnation, "fate": life.fate,
        "fate_certain": life.fate_certain, "not_before": time_text(life.not_before),
        "notes": [[time_text(at), text] for at, text in life.notes],
        "announced": time_text(life.announced), "appeared_certain": life.appeared_certain,
        "appeared_started": life.appeared_started,
    }


def _decode_life(fields: Fields) -> EventLife:
    notes = []
    for index, note in enumerate(_list(fields, "notes", MAX_NOTES)):
        pair = Fields({"at": note[0], "text": note[1]} if isinstance(note, list)
                      and len(note) == 2 else None, f"{fields.name('notes')}[{index}]")
        notes.append((pair.time("at"), pair.text("text")))
    return EventLife(
        event_id=fields.text("event_id", limit=SHORT), first_seen=fields.time("first_seen"),
        first_incarnation=fields.integer("first_incarnation", high=MAX_INCARNATION),
        initial=fields.flag("initial"), started_at=fields.time("started_at", optional=True),
        started_incarnation=fields.integer("started_incarnation", high=MAX_INCARNATION,
                                           optional=True),
        started_exact=fields.flag("started_exact", True),
        gone_at=fields.time("gone_at", optional=True),
        gone_incarnation=fields.integer("gone_incarnation", high=MAX_INCARNATION,
                                        optional=True),
        fate=fields.text("fate", limit=40, optional=True),
        fate_certain=fields.flag("fate_certain", True),
        not_before=fields.time("not_before", optional=True), notes=notes,
        announced=fields.time("announced", optional=True),
        appeared_certain=fields.flag("appeared_certain", False),
        appeared_started=fields.flag("appeared_started", False))


def _encode_gone(gone: GoneEvent) -> dict[str, Any]:
    return {
        "event": _event_json(gone.event), "fate": gone.fate, "at": time_text(gone.at),
        "incarnation": gone.incarnation, "started_at": time_text(gone.started_at),
        "certain": gone.certain, "detail": gone.detail,
    }


def _decode_gone(fields: Fields) -> GoneEvent:
    return GoneEvent(
        event=_event(fields.value("event"), fields.name("event")),
        fate=fields.text("fate", limit=40), at=fields.time("at"),
        incarnation=fields.integer("incarnation", high=MAX_INCARNATION),
        started_at=fields.time("started_at", optional=True),
        certain=fields.flag("certain", True), detail=fields.text("detail"))


# -- the audit log and the history --------------------------------------------------------
def encode_audit(record: AuditRecord) -> dict[str, Any]:
    return {**record.to_json(), "has_outcome": record.has_outcome}


def _mapping(fields: Fields, key: str, optional: bool = True) -> dict[str, Any] | None:
    value = fields.value(key, optional)
    if value is not None and not isinstance(value, dict):
        raise fields.fail(key, "expected an object")
    return value


def decode_audit(fields: Fields) -> AuditRecord:
    has_outcome = fields.value("has_outcome", optional=True)
    if has_outcome is not None and not isinstance(has_outcome, bool):
        raise fields.fail("has_outcome", "expected true, false or null")
    return AuditRecord(
        seq=fields.integer("seq", high=MAX_INT), action=fields.text("action", limit=SHORT),
        time=fields.time("time"), user=fields.text("user", limit=SHORT),
        host=fields.text("host", limit=SHORT), endpoint=fields.text("endpoint", limit=SHORT),
        ssh_client=fields.text("ssh_client", limit=SHORT, optional=True),
        event_id=fields.text("event_id", limit=SHORT, optional=True),
        event=_mapping(fields, "event"),
        incarnation=fields.integer("incarnation", high=MAX_INCARNATION, optional=True),
        attempt_seq=fields.integer("attempt_seq", high=MAX_INT, optional=True),
        status=fields.integer("status", high=999, optional=True),
        error=fields.text("error", optional=True),
        latency_ms=fields.number("latency_ms", optional=True),
        details=_mapping(fields, "details") or {},
        prev_hash=fields.text("prev_hash", limit=200), hash=fields.text("hash", limit=200),
        has_outcome=has_outcome)


def _decode_change_record(fields: Fields) -> ChangeRecord:
    return ChangeRecord(
        kind=fields.text("kind", limit=40),
        event_id=fields.text("event_id", limit=SHORT, optional=True),
        event_type=fields.text("event_type", limit=SHORT, optional=True),
        status=fields.text("status", limit=SHORT, optional=True),
        not_before=fields.text("not_before", limit=200, optional=True) or "",
        detail=fields.text("detail", optional=True) or "",
        initial=fields.flag("initial"), certain=fields.flag("certain", True),
        missed=fields.integer("missed", high=MAX_INCARNATION))


def encode_claim(claim: Claim) -> dict[str, Any]:
    return {"event_id": claim.event_id, "user": claim.user, "host": claim.host,
            "ssh_client": claim.ssh_client, "time": time_text(claim.time),
            "attempt_seq": claim.attempt_seq, "outcome_seq": claim.outcome_seq,
            "unknown": claim.unknown, "made_on": claim.made_on}


def decode_claim(fields: Fields) -> Claim:
    return Claim(event_id=fields.text("event_id", limit=SHORT),
                 user=fields.text("user", limit=SHORT), host=fields.text("host", limit=SHORT),
                 ssh_client=fields.text("ssh_client", limit=SHORT, optional=True),
                 time=fields.time("time"), attempt_seq=fields.integer("attempt_seq",
                                                                      high=MAX_INT),
                 outcome_seq=fields.integer("outcome_seq", high=MAX_INT, optional=True),
                 unknown=fields.flag("unknown"),
                 made_on=fields.text("made_on", limit=SHORT, optional=True))


def encode_incarnation(record: IncarnationRecord) -> dict[str, Any]:
    return {
        "endpoint": record.endpoint, "incarnation": record.incarnation,
        "first_seen": time_text(record.first_seen), "last_seen": time_text(record.last_seen),
        "raw_json": record.raw_json, "changes": [c.to_json() for c in record.changes],
        "summary": record.summary, "content_hash": record.content_hash,
        "row_id": record.row_id, "clock_skew": record.clock_skew, "vm_name": record.vm_name,
    }


def decode_incarnation(fields: Fields) -> IncarnationRecord:
    return IncarnationRecord(
        endpoint=fields.text("endpoint", limit=SHORT),
        incarnation=fields.integer("incarnation", high=MAX_INCARNATION),
        first_seen=fields.time("first_seen"), last_seen=fields.time("last_seen"),
        raw_json=fields.text("raw_json", limit=8 * 1024 * 1024),
        changes=tuple(_decode_change_record(c) for c in _each(fields, "changes", MAX_EVENTS)),
        summary=fields.text("summary"), content_hash=fields.text("content_hash", limit=200),
        row_id=fields.integer("row_id", high=MAX_INT),
        clock_skew=fields.number("clock_skew", optional=True),
        vm_name=fields.text("vm_name", limit=SHORT, optional=True))


def encode_story(entry: StoryEntry) -> dict[str, Any]:
    return {
        "time": time_text(entry.time), "kind": entry.kind, "event_id": entry.event_id,
        "endpoint": entry.endpoint, "incarnation": entry.incarnation, "detail": entry.detail,
        "event_type": entry.event_type, "status": entry.status,
        "not_before": entry.not_before, "source": entry.source,
        "audit_seq": entry.audit_seq, "initial": entry.initial, "certain": entry.certain,
    }


def decode_story(fields: Fields) -> StoryEntry:
    return StoryEntry(
        time=fields.time("time"), kind=fields.text("kind", limit=SHORT),
        event_id=fields.text("event_id", limit=SHORT),
        endpoint=fields.text("endpoint", limit=SHORT),
        incarnation=fields.integer("incarnation", high=MAX_INCARNATION, optional=True),
        detail=fields.text("detail"),
        event_type=fields.text("event_type", limit=SHORT, optional=True),
        status=fields.text("status", limit=SHORT, optional=True),
        not_before=fields.text("not_before", limit=200, optional=True) or "",
        source=fields.text("source", limit=40),
        audit_seq=fields.integer("audit_seq", high=MAX_INT, optional=True),
        initial=fields.flag("initial"), certain=fields.flag("certain", True))


def encode_verify(result: VerifyResult) -> dict[str, Any]:
    return {"ok": result.ok, "count": result.count, "first_bad": result.first_bad,
            "problem": result.problem, "head_seq": result.head_seq,
            "head_hash": result.head_hash, "warning": result.warning}


def decode_verify(fields: Fields) -> VerifyResult:
    return VerifyResult(
        ok=fields.flag("ok"), count=fields.integer("count", high=MAX_INT),
        first_bad=fields.integer("first_bad", high=MAX_INT, optional=True),
        problem=fields.text("problem", optional=True) or "",
        head_seq=fields.integer("head_seq", high=MAX_INT, optional=True),
        head_hash=fields.text("head_hash", limit=200, optional=True),
        warning=fields.text("warning", optional=True) or "")


def encode_holes(holes: Iterable[Hole]) -> list[dict[str, Any]]:
    return [{"from": time_text(h.start), "to": time_text(h.end), "open": h.open,
             "endpoint": h.endpoint} for h in holes]


def decode_holes(fields: Fields, key: str = "holes") -> tuple[Hole, ...]:
    return tuple(Hole(span.time("from"), span.time("to"), open=span.flag("open"),
                      endpoint=span.text("endpoint", limit=SHORT, optional=True) or "")
                 for span in _each(fields, key, MAX_RECORDS))


def encode_impact(impact: Impact) -> dict[str, Any]:
    return {
        "kind": impact.kind, "at": time_text(impact.at), "seconds": impact.seconds,
        "endpoint": impact.endpoint, "wall_seconds": impact.wall_seconds,
        "boottime_seconds": impact.boottime_seconds,
        "booted_at": time_text(impact.booted_at), "first_poll": time_text(impact.first_poll),
        "exact": impact.exact, "boot_id": impact.boot_id, "event_id": impact.event_id,
        "event_type": impact.event_type, "announced": impact.announced, "tie": impact.tie,
        "id": impact.id,
    }


def decode_impact(fields: Fields) -> Impact:
    kind = fields.text("kind", limit=40)
    if kind not in IMPACT_KINDS:
        raise fields.fail("kind", f"not one of {', '.join(IMPACT_KINDS)}")
    tie = fields.text("tie", limit=40, optional=True)
    if tie not in (None, STARTED, AROUND):
        raise fields.fail("tie", f"not {STARTED} or {AROUND}")
    seconds = fields.number("seconds")
    if seconds < 0:
        raise fields.fail("seconds", "must not be negative")
    return Impact(
        kind=kind, at=fields.time("at"), seconds=seconds,
        endpoint=fields.text("endpoint", limit=SHORT, optional=True) or "",
        wall_seconds=fields.number("wall_seconds", optional=True),
        boottime_seconds=fields.number("boottime_seconds", optional=True),
        booted_at=fields.time("booted_at", optional=True),
        first_poll=fields.time("first_poll", optional=True), exact=fields.flag("exact", True),
        boot_id=fields.text("boot_id", limit=SHORT, optional=True),
        event_id=fields.text("event_id", limit=SHORT, optional=True),
        event_type=fields.text("event_type", limit=SHORT, optional=True),
        announced=fields.integer("announced", low=-MAX_INT, high=MAX_INT, optional=True),
        tie=tie, id=fields.integer("id", high=MAX_INT, optional=True) or 0)


def encode_recording(parts: RecordingParts) -> dict[str, Any]:
    return {
        "endpoint": parts.endpoint,
        "records": [encode_incarnation(r) for r in parts.records],
        "audit": [encode_audit(r) for r in parts.audit],
        "holes": encode_holes(parts.holes), "sessions_known": parts.sessions_known,
        "start": time_text(parts.start), "end": time_text(parts.end),
        "impacts": [encode_impact(i) for i in parts.impacts],
        "measuring": [[time_text(a), time_text(b)] for a, b in parts.measuring],
        "hook_runs": [_encode_hook_run(r) for r in parts.hook_runs],
    }


def _encode_hook_run(run: HookRun) -> dict[str, Any]:
    return {"id": run.id, "event_id": run.event_id, "step": run.step, "rule": run.rule,
            "command": run.command, "started": time_text(run.started),
            "ended": time_text(run.ended), "exit_status": run.exit_status,
            "timed_out": run.timed_out}


def _decode_hook_run(fields: Fields) -> HookRun:
    return HookRun(
        id=fields.integer("id", high=MAX_INT), event_id=fields.text("event_id", limit=SHORT),
        step=fields.text("step", limit=40), rule=fields.text("rule", limit=SHORT),
        command=fields.text("command", limit=4000), started=fields.time("started"),
        ended=fields.time("ended", optional=True),
        exit_status=fields.integer("exit_status", low=-MAX_INT, high=MAX_INT, optional=True),
        timed_out=fields.flag("timed_out"), output="")


def _span(value: Any, where: str) -> tuple[datetime, datetime]:
    pair = Fields({"from": value[0], "to": value[1]} if isinstance(value, list)
                  and len(value) == 2 else None, where)
    return pair.time("from"), pair.time("to")


def decode_recording(fields: Fields) -> RecordingParts:
    return RecordingParts(
        endpoint=fields.text("endpoint", limit=SHORT),
        records=tuple(decode_incarnation(r) for r in _each(fields, "records", MAX_RECORDS)),
        audit=tuple(decode_audit(r) for r in _each(fields, "audit", MAX_RECORDS)),
        holes=decode_holes(fields), sessions_known=fields.flag("sessions_known"),
        start=fields.time("start"), end=fields.time("end"),
        impacts=tuple(decode_impact(i) for i in _each(fields, "impacts", MAX_RECORDS)),
        measuring=tuple(_span(s, f"{fields.name('measuring')}[{n}]") for n, s in
                        enumerate(_list(fields, "measuring", MAX_RECORDS))),
        # An agent from before hook runs were in a recording sends none.
        hook_runs=tuple(_decode_hook_run(r) for r in _each(fields, "hook_runs", MAX_RECORDS)
                        ) if fields.has("hook_runs") else ())


# -- the agent's plan ---------------------------------------------------------------------
@dataclass(frozen=True)
class Plan:
    """What the agent plans and does: its steps, and the events a person holds."""

    steps: tuple[Step, ...] = ()
    held: frozenset[str] = frozenset()


def _encode_step(step: Step) -> dict[str, Any]:
    return {"event_id": step.event_id, "step": step.step, "rule": step.rule,
            "state": step.state, "detail": step.detail, "started": time_text(step.started),
            "updated": time_text(step.updated)}


def _decode_step(fields: Fields) -> Step:
    return Step(event_id=fields.text("event_id", limit=SHORT),
                step=fields.text("step", limit=40), rule=fields.text("rule", limit=SHORT),
                state=fields.text("state", limit=40), detail=fields.text("detail"),
                started=fields.time("started", optional=True), updated=fields.time("updated"))


def encode_plan(plan: Plan) -> dict[str, Any]:
    return {"steps": [_encode_step(s) for s in plan.steps], "held": sorted(plan.held)}


def decode_plan(fields: Fields) -> Plan:
    return Plan(tuple(_decode_step(s) for s in _each(fields, "steps", MAX_EVENTS)),
                frozenset(fields.texts("held", limit=MAX_EVENTS, each=SHORT, optional=True)
                          or ()))


# -- the monitor's state ------------------------------------------------------------------
@dataclass(frozen=True)
class RecordingStatus:
    """Whether the agent records the history now, and why not when it does not."""

    recording: bool
    problem: str | None = None


@dataclass(frozen=True)
class AgentState:
    """A state frame: the monitor's state and what a front end shows beside it."""

    state: MonitorState
    now: datetime  # the service's time when the frame was made
    interval: float
    changes: tuple[Change, ...]  # of the polls since the state frame before (announcements)
    previous_state: ConnectionState | None  # the connection's state before, when it changed
    approvals: Mapping[str, AuditRecord]  # EventId -> its newest accepted approval
    recording: RecordingStatus


def encode_state(state: AgentState, mono_now: float) -> dict[str, Any]:
    monitor = state.state
    document = monitor.document
    return {
        "now": time_text(state.now), "interval": state.interval,
        "document": None if document is None else dict(document.raw),
        "last_seen": time_text(monitor.last_seen),
        "incarnation_since": time_text(monitor.incarnation_since),
        "health": encode_health(monitor.health, mono_now),
        "lives": [_encode_life(life) for life in monitor.lives.values()],
        "gone": [_encode_gone(g) for g in monitor.gone],
        "anomalies": [_encode_change(c) for c in monitor.anomalies],
        "changes": [_encode_change(c) for c in state.changes],
        "previous_state": None if state.previous_state is None
        else state.previous_state.value,
        "approvals": {i: encode_audit(r) for i, r in state.approvals.items()},
        "recording": {"recording": state.recording.recording,
                      "problem": state.recording.problem},
    }


def decode_state(fields: Fields, mono_now: float) -> AgentState:
    lives = [_decode_life(f) for f in _each(fields, "lives", MAX_EVENTS)]
    approvals = _mapping(fields, "approvals") or {}
    if len(approvals) > MAX_EVENTS:
        raise fields.fail("approvals", f"more than {MAX_EVENTS}")
    recording = fields.fields("recording")
    interval = fields.number("interval")
    if interval <= 0:
        raise fields.fail("interval", "must be more than 0")
    monitor = MonitorState(
        document=_document(fields.value("document", optional=True), fields.name("document")),
        health=decode_health(fields.fields("health"), mono_now),
        lives={life.event_id: life for life in lives},
        gone=[_decode_gone(f) for f in _each(fields, "gone", MAX_EVENTS)],
        anomalies=[_decode_change(f) for f in _each(fields, "anomalies", MAX_EVENTS)],
        last_seen=fields.time("last_seen", optional=True),
        incarnation_since=fields.time("incarnation_since", optional=True))
    return AgentState(
        state=monitor, now=fields.time("now"), interval=interval,
        changes=tuple(_decode_change(f) for f in _each(fields, "changes", MAX_EVENTS)),
        previous_state=fields.member("previous_state", ConnectionState, "a connection state",
                                     optional=True),
        approvals={str(i)[:SHORT]: decode_audit(Fields(r, f"approvals.{str(i)[:40]}"))
                   for i, r in approvals.items()},
        recording=RecordingStatus(recording.flag("recording"),
                                  recording.text("problem", optional=True)))


# -- approvals ----------------------------------------------------------------------------
def encode_confirmed(seen: Confirmed) -> dict[str, Any]:
    return {"snapshot": dict(seen.snapshot), "incarnation": seen.incarnation}


def decode_confirmed(event_id: str, fields: Fields) -> Confirmed:
    """What an operator confirmed for ``event_id``: the snapshot's own fields, of the
    types event_snapshot() gives them, and nothing else."""
    snapshot = fields.fields("snapshot")
    unknown = set(snapshot.data) - {*_SNAPSHOT_TEXT, "Resources", "DurationInSeconds"}
    if unknown:
        raise snapshot.fail(sorted(unknown)[0][:40], "not a field of an event")
    values: dict[str, Any] = {k: snapshot.text(k, limit=SHORT * 4, optional=True)
                              for k in _SNAPSHOT_TEXT}
    values["Resources"] = list(snapshot.texts("Resources", limit=MAX_RESOURCES, each=SHORT,
                                              optional=True) or ())
    values["DurationInSeconds"] = snapshot.integer("DurationInSeconds", low=-MAX_INT,
                                                   high=MAX_INT, optional=True)
    confirmed_id = values["EventId"]
    if confirmed_id is None or confirmed_id.casefold() != event_id.strip().casefold():
        raise snapshot.fail("EventId", f"is not {event_id[:80]!r}, the event approved")
    values["NotBefore"] = values["NotBefore"] or ""
    return Confirmed(confirmed_id, values,
                     fields.integer("incarnation", high=MAX_INCARNATION))


def encode_outcome(outcome: ApprovalOutcome) -> dict[str, Any]:
    return {"event_id": outcome.event_id, "approved": outcome.approved,
            "refused": outcome.refused, "status": outcome.status, "message": outcome.message,
            "latency": outcome.latency, "record_seq": outcome.record_seq,
            "ask_again": outcome.ask_again, "changes": list(outcome.changes),
            "unknown": outcome.unknown}


def decode_outcome(fields: Fields) -> ApprovalOutcome:
    return ApprovalOutcome(
        event_id=fields.text("event_id", limit=SHORT), approved=fields.flag("approved"),
        refused=fields.flag("refused"), status=fields.integer("status", high=999,
                                                              optional=True),
        message=fields.text("message"), latency=fields.number("latency", optional=True),
        record_seq=fields.integer("record_seq", high=MAX_INT, optional=True),
        ask_again=fields.flag("ask_again"),
        changes=fields.texts("changes", limit=100, each=SHORT, optional=True) or (),
        unknown=fields.flag("unknown"))


def encode_progress(progress: Progress) -> dict[str, Any]:
    return {"event_id": progress.event_id, "attempt": progress.attempt,
            "last_error": progress.last_error, "next_in": progress.next_in,
            "status": progress.status, "kind": progress.kind}


def decode_progress(fields: Fields) -> Progress:
    return Progress(
        event_id=fields.text("event_id", limit=SHORT),
        attempt=fields.integer("attempt", high=MAX_INT),
        last_error=fields.text("last_error"), next_in=fields.number("next_in"),
        status=fields.integer("status", high=999, optional=True),
        kind=fields.text("kind", limit=40))


# -- hello --------------------------------------------------------------------------------
@dataclass(frozen=True)
class AgentInfo:
    """The agent a client is talking to."""

    pid: int
    since: datetime
    vm_name: str | None
    vm_id: str | None
    endpoint: str
    data_dir: str | None
    policy: str | None
    dry_run: bool


@dataclass(frozen=True)
class VmIdentity:
    """This VM as the agent knows it now. It may learn it after it started (IMDS's
    compute metadata did not answer at once): then it pushes it (``vm``), and greets
    with it from then on."""

    vm_name: str | None
    vm_id: str | None


def encode_vm(vm: VmIdentity) -> dict[str, Any]:
    return {"vm_name": vm.vm_name, "vm_id": vm.vm_id}


def decode_vm(fields: Fields) -> VmIdentity:
    return VmIdentity(vm_name=fields.text("vm_name", limit=SHORT, optional=True),
                      vm_id=fields.text("vm_id", limit=SHORT, optional=True))


@dataclass(frozen=True)
class You:
    """What the kernel said about the client, and what the agent concluded."""

    uid: int
    user: str
    may_approve: bool
    why_not: str | None


@dataclass(frozen=True)
class Hello:
    api: int
    setui: str
    agent: AgentInfo
    you: You

    def with_vm(self, vm: VmIdentity) -> Hello:
        """The hello as the agent would greet now, once it has said it knows ``vm``."""
        return replace(self, agent=replace(self.agent, vm_name=vm.vm_name, vm_id=vm.vm_id))


def encode_hello(hello: Hello) -> dict[str, Any]:
    agent, you = hello.agent, hello.you
    return {"api": hello.api, "setui": hello.setui, "agent": {
        "pid": agent.pid, "since": time_text(agent.since), "vm_name": agent.vm_name,
        "vm_id": agent.vm_id, "endpoint": agent.endpoint, "data_dir": agent.data_dir,
        "policy": agent.policy, "dry_run": agent.dry_run,
    }, "you": {"uid": you.uid, "user": you.user, "may_approve": you.may_approve,
               "why_not": you.why_not}}


def decode_hello(fields: Fields) -> Hello:
    """The hello; a version other than this client's is refused before anything else."""
    api = fields.integer("api", high=MAX_INT)
    if api != API_VERSION:
        raise ProtocolError(BAD_REQUEST, f"the agent speaks API version {api}; this setui "
                                         f"speaks version {API_VERSION}")
    agent, you = fields.fields("agent"), fields.fields("you")
    return Hello(api, fields.text("setui", limit=100), AgentInfo(
        pid=agent.integer("pid", high=2**31), since=agent.time("since"),
        vm_name=agent.text("vm_name", limit=SHORT, optional=True),
        vm_id=agent.text("vm_id", limit=SHORT, optional=True),
        endpoint=agent.text("endpoint", limit=SHORT),
        data_dir=agent.text("data_dir", limit=4096, optional=True),
        policy=agent.text("policy", limit=4096, optional=True),
        dry_run=agent.flag("dry_run")),
        You(uid=you.integer("uid", high=2**32), user=you.text("user", limit=SHORT),
            may_approve=you.flag("may_approve"),
            why_not=you.text("why_not", limit=SHORT, optional=True)))
