"""setui's values on the wire: each ``encode_X`` has its ``decode_X``, and a decode trusts
nothing (the client trusts the agent no more than it trusts IMDS). Each value's fields,
kinds and bounds are declared once, as a :class:`~setui.api.shapes.Shape`, and both
directions come from it; what a shape cannot say (ages, the API version, a confirmed
snapshot) is written out below.

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
from setui.api.shapes import (
    MAX_INT,
    Flag,
    Int,
    Kind,
    Many,
    Member,
    Num,
    OneOf,
    Pairs,
    Raw,
    Shape,
    Text,
    Texts,
    Time,
)
from setui.approval.outcome import ApprovalOutcome, Progress
from setui.approval.snapshot import Confirmed
from setui.core.health import ConnectionState, Health
from setui.core.holes import Hole
from setui.core.impact import AROUND, STARTED, Impact
from setui.core.impact import KINDS as IMPACT_KINDS
from setui.core.model import MAX_INCARNATION, Document, DocumentError, Event, parse_document
from setui.core.tracker import Change, ChangeKind
from setui.monitor.state import EventLife, GoneEvent, MonitorState
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

__all__ = ["AgentInfo", "AgentState", "CallerAccess", "Hello", "Plan", "RecordingParts",
           "RecordingStatus", "VmIdentity", "decode_audit", "decode_claim",
           "decode_confirmed", "decode_health", "decode_hello", "decode_holes",
           "decode_impact", "decode_incarnation", "decode_outcome", "decode_plan",
           "decode_progress", "decode_recording", "decode_state", "decode_story",
           "decode_verify", "decode_vm", "encode_audit", "encode_claim",
           "encode_confirmed", "encode_health", "encode_hello", "encode_holes",
           "encode_impact", "encode_incarnation", "encode_outcome", "encode_plan",
           "encode_progress", "encode_recording", "encode_state", "encode_story",
           "encode_verify", "encode_vm"]

MAX_EVENTS = 10_000  # events, lives, gone events or changes in one frame
MAX_NOTES = 1_000
MAX_RECORDS = 100_000  # records in one answer; the frame's size bounds it sooner
SHORT = 1_000  # characters of a name, a kind, a key
# The snapshot an operator confirms: the service's field names (store.records.event_snapshot).
_SNAPSHOT_TEXT = ("EventId", "EventType", "EventStatus", "NotBefore", "ResourceType",
                  "EventSource", "Description")
MAX_RESOURCES = 10_000


# -- events and documents -----------------------------------------------------------------
def _document(value: Any, where: str) -> Document | None:
    if value is None:
        return None
    try:
        return parse_document(value)
    except DocumentError as exc:
        raise ProtocolError(BAD_REQUEST, f"{where}: {exc}") from None


class _Event(Kind):
    """An event as the service's own JSON, read back by its parser: checked as a
    document from IMDS is."""

    def __init__(self, optional: bool = False) -> None:
        self.optional = optional

    def write(self, value: Event | None) -> Any:
        return None if value is None else dict(value.raw) if value.raw \
            else event_snapshot(value)

    def read(self, fields: Fields, key: str) -> Any:
        value, where = fields.value(key, optional=self.optional), fields.name(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise ProtocolError(BAD_REQUEST, f"{where}: expected an event object")
        try:
            return parse_document({"DocumentIncarnation": 0, "Events": [value]}).events[0]
        except DocumentError as exc:
            problem = str(exc).replace("Events[0]", "event")
            raise ProtocolError(BAD_REQUEST, f"{where}: {problem}") from None


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
_CHANGES = Many(Shape(Change, {
    "kind": Member(ChangeKind, "a kind of change"), "incarnation": Int(MAX_INCARNATION),
    "seen_at": Time(), "event": _Event(optional=True), "previous": _Event(optional=True),
    "detail": Text(), "initial": Flag(), "certain": Flag(True),
    "missed": Int(MAX_INCARNATION)}), MAX_EVENTS)

_LIVES = Many(Shape(EventLife, {
    "notes": Pairs(("at", "text"), (Time(), Text()), MAX_NOTES, into=list),
    "event_id": Text(SHORT), "first_seen": Time(), "first_incarnation": Int(MAX_INCARNATION),
    "initial": Flag(), "started_at": Time(optional=True),
    "started_incarnation": Int(MAX_INCARNATION, optional=True),
    "started_exact": Flag(True), "gone_at": Time(optional=True),
    "gone_incarnation": Int(MAX_INCARNATION, optional=True),
    "fate": Text(40, optional=True), "fate_certain": Flag(True),
    "not_before": Time(optional=True),
    "announced": Time(optional=True), "appeared_certain": Flag(),
    "appeared_started": Flag()}), MAX_EVENTS, into=list)

_GONE = Many(Shape(GoneEvent, {
    "event": _Event(), "fate": Text(40), "at": Time(), "incarnation": Int(MAX_INCARNATION),
    "started_at": Time(optional=True), "certain": Flag(True), "detail": Text()}),
    MAX_EVENTS, into=list)


# -- the audit log and the history --------------------------------------------------------
_OBJECT, _OBJECTS = Raw(dict, "an object"), Raw(dict, "an object", dict)  # null: None, {}
AUDIT = Shape(AuditRecord, {
    "has_outcome": Raw(bool, "true, false or null"), "seq": Int(), "action": Text(SHORT),
    "time": Time(), "user": Text(SHORT), "host": Text(SHORT), "endpoint": Text(SHORT),
    "ssh_client": Text(SHORT, optional=True), "event_id": Text(SHORT, optional=True),
    "event": _OBJECT, "incarnation": Int(MAX_INCARNATION, optional=True),
    "attempt_seq": Int(optional=True), "status": Int(999, optional=True),
    "error": Text(optional=True), "latency_ms": Num(optional=True), "details": _OBJECTS,
    "prev_hash": Text(200), "hash": Text(200)})
encode_audit, decode_audit = AUDIT.encode, AUDIT.decode

CLAIM = Shape(Claim, {
    "event_id": Text(SHORT), "user": Text(SHORT), "host": Text(SHORT),
    "ssh_client": Text(SHORT, optional=True), "time": Time(), "attempt_seq": Int(),
    "outcome_seq": Int(optional=True), "unknown": Flag(),
    "made_on": Text(SHORT, optional=True)})
encode_claim, decode_claim = CLAIM.encode, CLAIM.decode

INCARNATION = Shape(IncarnationRecord, {
    "endpoint": Text(SHORT), "incarnation": Int(MAX_INCARNATION), "first_seen": Time(),
    "last_seen": Time(), "raw_json": Text(8 * 1024 * 1024),
    "changes": Many(Shape(ChangeRecord, {
        "kind": Text(40), "event_id": Text(SHORT, optional=True),
        "event_type": Text(SHORT, optional=True), "status": Text(SHORT, optional=True),
        "not_before": Text(200, empty=True), "detail": Text(empty=True), "initial": Flag(),
        "certain": Flag(True), "missed": Int(MAX_INCARNATION)}), MAX_EVENTS),
    "summary": Text(), "content_hash": Text(200), "row_id": Int(),
    "clock_skew": Num(optional=True), "vm_name": Text(SHORT, optional=True)})
encode_incarnation, decode_incarnation = INCARNATION.encode, INCARNATION.decode

STORY = Shape(StoryEntry, {
    "time": Time(), "kind": Text(SHORT), "event_id": Text(SHORT), "endpoint": Text(SHORT),
    "incarnation": Int(MAX_INCARNATION, optional=True), "detail": Text(),
    "event_type": Text(SHORT, optional=True), "status": Text(SHORT, optional=True),
    "not_before": Text(200, empty=True), "source": Text(40), "audit_seq": Int(optional=True),
    "initial": Flag(), "certain": Flag(True)})
encode_story, decode_story = STORY.encode, STORY.decode

VERIFY = Shape(VerifyResult, {
    "ok": Flag(), "count": Int(), "first_bad": Int(optional=True), "problem": Text(empty=True),
    "head_seq": Int(optional=True), "head_hash": Text(200, optional=True),
    "warning": Text(empty=True)})
encode_verify, decode_verify = VERIFY.encode, VERIFY.decode

_HOLES = Many(Shape(Hole, {
    "from": Time(), "to": Time(), "open": Flag(), "endpoint": Text(SHORT, empty=True)},
    names={"from": "start", "to": "end"}), MAX_RECORDS)


def encode_holes(holes: Iterable[Hole]) -> list[dict[str, Any]]:
    return _HOLES.write(holes)  # type: ignore[no-any-return]


def decode_holes(fields: Fields, key: str = "holes") -> tuple[Hole, ...]:
    return _HOLES.read(fields, key)  # type: ignore[no-any-return]


IMPACT = Shape(Impact, {
    "kind": OneOf(IMPACT_KINDS, f"one of {', '.join(IMPACT_KINDS)}"),
    "tie": OneOf((STARTED, AROUND), f"{STARTED} or {AROUND}", optional=True),
    "seconds": Num(floor=True), "at": Time(), "endpoint": Text(SHORT, empty=True),
    "wall_seconds": Num(optional=True), "boottime_seconds": Num(optional=True),
    "booted_at": Time(optional=True), "first_poll": Time(optional=True),
    "exact": Flag(True), "boot_id": Text(SHORT, optional=True),
    "event_id": Text(SHORT, optional=True), "event_type": Text(SHORT, optional=True),
    "announced": Int(low=-MAX_INT, optional=True), "id": Int(empty=True)})
encode_impact, decode_impact = IMPACT.encode, IMPACT.decode

RECORDING = Shape(RecordingParts, {
    "endpoint": Text(SHORT), "records": Many(INCARNATION, MAX_RECORDS),
    "audit": Many(AUDIT, MAX_RECORDS), "holes": _HOLES, "sessions_known": Flag(),
    "start": Time(), "end": Time(), "impacts": Many(IMPACT, MAX_RECORDS),
    "measuring": Pairs(("from", "to"), (Time(), Time()), MAX_RECORDS),
    # An older agent's recordings carry no hook runs: it sends none, read as none.
    "hook_runs": Many(Shape(HookRun, {
        "id": Int(), "event_id": Text(SHORT), "step": Text(40), "rule": Text(SHORT),
        "command": Text(4000), "started": Time(), "ended": Time(optional=True),
        "exit_status": Int(low=-MAX_INT, optional=True), "timed_out": Flag()},
        fixed={"output": ""}), MAX_RECORDS)})
encode_recording, decode_recording = RECORDING.encode, RECORDING.decode


# -- the agent's plan ---------------------------------------------------------------------
@dataclass(frozen=True)
class Plan:
    """What the agent plans and does: its steps, and the events a person holds."""

    steps: tuple[Step, ...] = ()
    held: frozenset[str] = frozenset()


PLAN = Shape(Plan, {
    "steps": Many(Shape(Step, {
        "event_id": Text(SHORT), "step": Text(40), "rule": Text(SHORT), "state": Text(40),
        "detail": Text(), "started": Time(optional=True), "updated": Time()}), MAX_EVENTS),
    "held": Texts(MAX_EVENTS, SHORT, into=frozenset)})
encode_plan, decode_plan = PLAN.encode, PLAN.decode


# -- the monitor's state ------------------------------------------------------------------
@dataclass(frozen=True)
class RecordingStatus:
    """Whether the agent records the history now, and why not when it does not."""

    recording: bool
    problem: str | None = None


_RECORDING_STATUS = Shape(RecordingStatus, {"recording": Flag(),
                                            "problem": Text(optional=True)})


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
        "lives": _LIVES.write(monitor.lives.values()), "gone": _GONE.write(monitor.gone),
        "anomalies": _CHANGES.write(monitor.anomalies), "changes": _CHANGES.write(state.changes),
        "previous_state": None if state.previous_state is None
        else state.previous_state.value,
        "approvals": {i: encode_audit(r) for i, r in state.approvals.items()},
        "recording": _RECORDING_STATUS.encode(state.recording),
    }


def decode_state(fields: Fields, mono_now: float) -> AgentState:
    lives = _LIVES.read(fields, "lives")
    approvals = _OBJECTS.read(fields, "approvals")
    if len(approvals) > MAX_EVENTS:
        raise fields.fail("approvals", f"more than {MAX_EVENTS}")
    recording = fields.fields("recording")
    interval = Num(positive=True).read(fields, "interval")
    monitor = MonitorState(
        document=_document(fields.value("document", optional=True), fields.name("document")),
        health=decode_health(fields.fields("health"), mono_now),
        lives={life.event_id: life for life in lives}, gone=_GONE.read(fields, "gone"),
        anomalies=list(_CHANGES.read(fields, "anomalies")),
        last_seen=fields.time("last_seen", optional=True),
        incarnation_since=fields.time("incarnation_since", optional=True))
    return AgentState(
        state=monitor, now=fields.time("now"), interval=interval,
        changes=_CHANGES.read(fields, "changes"),
        previous_state=fields.member("previous_state", ConnectionState, "a connection state",
                                     optional=True),
        approvals={str(i)[:SHORT]: decode_audit(Fields(r, f"approvals.{str(i)[:40]}"))
                   for i, r in approvals.items()},
        recording=_RECORDING_STATUS.decode(recording))


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


OUTCOME = Shape(ApprovalOutcome, {
    "event_id": Text(SHORT), "approved": Flag(), "refused": Flag(),
    "status": Int(999, optional=True), "message": Text(), "latency": Num(optional=True),
    "record_seq": Int(optional=True), "ask_again": Flag(), "changes": Texts(100, SHORT),
    "unknown": Flag()})
encode_outcome, decode_outcome = OUTCOME.encode, OUTCOME.decode

PROGRESS = Shape(Progress, {
    "event_id": Text(SHORT), "attempt": Int(), "last_error": Text(), "next_in": Num(),
    "status": Int(999, optional=True), "kind": Text(40)})
encode_progress, decode_progress = PROGRESS.encode, PROGRESS.decode


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


VM = Shape(VmIdentity, {"vm_name": Text(SHORT, optional=True),
                        "vm_id": Text(SHORT, optional=True)})
encode_vm, decode_vm = VM.encode, VM.decode


@dataclass(frozen=True)
class CallerAccess:
    """The hello's ``you``: what the kernel said about the client, and what the agent
    concluded (whether it may approve, and if not, why)."""

    uid: int
    user: str
    may_approve: bool
    why_not: str | None


@dataclass(frozen=True)
class Hello:
    api: int
    setui: str
    agent: AgentInfo
    you: CallerAccess

    def with_vm(self, vm: VmIdentity) -> Hello:
        """The hello as the agent would greet now, once it has said it knows ``vm``."""
        return replace(self, agent=replace(self.agent, vm_name=vm.vm_name, vm_id=vm.vm_id))


_AGENT = Shape(AgentInfo, {
    "pid": Int(2**31), "since": Time(), "vm_name": Text(SHORT, optional=True),
    "vm_id": Text(SHORT, optional=True), "endpoint": Text(SHORT),
    "data_dir": Text(4096, optional=True), "policy": Text(4096, optional=True),
    "dry_run": Flag()})
_YOU = Shape(CallerAccess, {"uid": Int(2**32), "user": Text(SHORT), "may_approve": Flag(),
                            "why_not": Text(SHORT, optional=True)})


def encode_hello(hello: Hello) -> dict[str, Any]:
    return {"api": hello.api, "setui": hello.setui, "agent": _AGENT.encode(hello.agent),
            "you": _YOU.encode(hello.you)}


def decode_hello(fields: Fields) -> Hello:
    """The hello; a version other than this client's is refused before anything else."""
    api = fields.integer("api", high=MAX_INT)
    if api != API_VERSION:
        raise ProtocolError(BAD_REQUEST, f"the agent speaks API version {api}; this setui "
                                         f"speaks version {API_VERSION}")
    agent, you = fields.fields("agent"), fields.fields("you")
    return Hello(api, fields.text("setui", limit=100), _AGENT.decode(agent), _YOU.decode(you))
