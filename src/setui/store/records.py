"""The values the store hands out and takes in: plain frozen dataclasses, no SQL.

Times are aware UTC datetimes in memory and fixed-width ISO 8601 text in the database
(``2024-05-14T09:30:00.000000Z``), which sorts as text and reads well in ``sqlite3``;
text is stored as SQLite can hold it (:func:`clean_text`), JSON canonical and ASCII
(:func:`stored_json`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from setui.core.impact import IMPACT_SOURCE
from setui.core.model import (
    MAX_INCARNATION,
    Document,
    Event,
    format_not_before,
    parse_document,
)
from setui.core.timefmt import stamp

__all__ = ["ACTIONS", "APPROVED", "APPROVE_ATTEMPT", "APPROVE_OUTCOME", "CANCELLED", "DISMISSALS",
           "DISMISSED", "FAILED", "IMPACT_SOURCE", "REFUSED", "UNKNOWN", "AuditEntry",
           "AuditRecord", "ChangeRecord", "Claim", "Hold", "HookRun", "IncarnationRecord",
           "RecorderSpan", "Step", "StoryEntry", "VerifyResult", "action_word", "approval_result",
           "clean_text", "event_snapshot", "from_db_time", "stored_json", "to_db_time", "utc"]

APPROVE_ATTEMPT = "approve-attempt"
APPROVE_OUTCOME = "approve-outcome"
DISMISSED = "dismissed"  # the operator said no in the dialog or at the prompt
# The word older records gave a dismissal; kept in them (they are under the hash chain)
# and read as DISMISSED, never written again: it read like Azure cancelling the event.
CANCELLED = "cancelled"
DISMISSALS = (DISMISSED, CANCELLED)
REFUSED = "refused"
ACTIONS = (APPROVE_ATTEMPT, APPROVE_OUTCOME, DISMISSED, CANCELLED, REFUSED)
# What became of an approval: the service accepted it; it did not (no try can have
# arrived, or every answer said no); or nobody knows (a try may have arrived and no
# answer says what the service made of it: a timeout, a connection lost after the
# request left, an interruption mid-request).
APPROVED, FAILED, UNKNOWN = "approved", "failed", "unknown"

_DB_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"


def clean_text(text: str) -> str:
    """Text SQLite can store: lone surrogates (valid in JSON escapes) become visible escapes."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def stored_json(value: Any) -> str:
    """Canonical JSON, ASCII-only so any string the network sent can be stored and hashed."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def action_word(action: str) -> str:
    """An audit action as readers show it: an older record's "cancelled" is "dismissed"."""
    return DISMISSED if action in DISMISSALS else action


def utc(moment: datetime) -> datetime:
    """``moment`` in UTC; a naive datetime is taken to be UTC already."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


def to_db_time(moment: datetime) -> str:
    # The year by hand: strftime("%Y") does not zero-pad years before 1000 on glibc,
    # and these strings are compared as text.
    moment = utc(moment)
    return f"{moment.year:04d}-" + moment.strftime(_DB_TIME[3:])


def from_db_time(text: str) -> datetime:
    # fromisoformat for the text to_db_time writes: strptime's first call loads its
    # locale machinery, a tenth of a recorder's start-up. Anything else goes the strict way.
    if len(text) == 27 and text[10] == "T" and text[19] == "." and text[26] == "Z":
        try:
            return datetime.fromisoformat(text[:26]).replace(tzinfo=timezone.utc)
        except ValueError:
            pass
    return datetime.strptime(text, _DB_TIME).replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class ChangeRecord:
    """One stored change of one incarnation: the tracker's Change without live objects."""

    kind: str  # appeared, started, completed, cancelled, gone, rescheduled, changed, anomaly
    event_id: str | None
    event_type: str | None = None
    status: str | None = None
    not_before: str = ""  # RFC 1123 as the service writes it; "" when started or absent
    detail: str = ""
    initial: bool = False  # already in the first document this endpoint's history holds
    certain: bool = True  # False: seen across a gap (see core.tracker)
    missed: int = 0  # incarnations skipped just before this one

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "event_id": self.event_id, "event_type": self.event_type,
            "status": self.status, "not_before": self.not_before, "detail": self.detail,
            "initial": self.initial, "certain": self.certain, "missed": self.missed,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ChangeRecord:
        return cls(
            kind=str(data.get("kind", "")), event_id=data.get("event_id"),
            event_type=data.get("event_type"), status=data.get("status"),
            not_before=str(data.get("not_before") or ""), detail=str(data.get("detail") or ""),
            initial=bool(data.get("initial", False)),
            certain=bool(data.get("certain", True)),
            missed=_count(data.get("missed")),
        )


def _count(value: Any) -> int:
    return value if isinstance(value, int) and 0 <= value <= MAX_INCARNATION else 0


@dataclass(frozen=True)
class RecorderSpan:
    """One recording session: a process that polled and recorded, from ``started`` to
    ``stopped`` (None while it runs or if it died; ``last_beat`` says how far it got)."""

    id: int
    endpoint: str
    pid: int
    host: str
    command: str
    started: datetime
    last_beat: datetime
    stopped: datetime | None
    boot_id: str | None = None  # the boot it ran in (None: not known, before schema 6)
    measures: bool = False  # it kept the agent's heartbeat: stalls and boots were measured

    @property
    def end(self) -> datetime:
        """Up to when it is known to have recorded."""
        return self.stopped or self.last_beat


@dataclass(frozen=True)
class IncarnationRecord:
    """One distinct document seen at one endpoint, with what changed since the one before."""

    endpoint: str
    incarnation: int
    first_seen: datetime
    last_seen: datetime
    raw_json: str
    changes: tuple[ChangeRecord, ...]
    summary: str
    content_hash: str = ""
    row_id: int = field(default=0, compare=False)  # paging key; meaningless outside the db
    # Service clock minus this VM's when first seen (seconds; None: not measured, or a
    # store from before it was kept). Times above are in the service's clock when off.
    clock_skew: float | None = None
    # This VM's name as the writer knew it (None: not known, or a store from before it
    # was kept): whose events are "this VM's" in a replay.
    vm_name: str | None = None

    def document(self) -> Document:
        """The stored document, parsed again (raises DocumentError if it cannot be)."""
        return parse_document(self.raw_json)


@dataclass(frozen=True)
class StoryEntry:
    """One moment in an event's life: a change seen in the history or an audit record."""

    time: datetime
    kind: str  # a ChangeRecord kind, or an audit action (approve-attempt, ...)
    event_id: str
    endpoint: str
    incarnation: int | None = None
    detail: str = ""
    event_type: str | None = None
    status: str | None = None
    not_before: str = ""
    source: str = "history"  # "history", "audit", or IMPACT_SOURCE (the agent measured it)
    audit_seq: int | None = None
    initial: bool = False
    certain: bool = True  # False: seen across a gap (core.tracker), so not when it happened


def approval_result(status: int | None, error: str | None,
                    details: Mapping[str, Any]) -> str:
    """What an approve-outcome record says became of its approval: :data:`APPROVED`,
    :data:`FAILED` or :data:`UNKNOWN`. The one reading of an outcome; records written
    before the outcome was kept in ``details`` are read by their status and error."""
    said = details.get("outcome")
    if said in (APPROVED, FAILED, UNKNOWN):
        return str(said)
    return APPROVED if error is None and status is not None and 200 <= status < 300 \
        else FAILED


def event_snapshot(event: Event) -> dict[str, Any]:
    """The event as an operator saw it, under the service's own field names."""
    return {
        "EventId": event.event_id,
        "EventType": event.event_type.value,
        "EventStatus": event.status.value,
        "NotBefore": format_not_before(event.not_before),
        "Resources": list(event.resources),
        "ResourceType": event.resource_type,
        "EventSource": event.source.value if event.source is not None else None,
        "DurationInSeconds": event.duration,
        "Description": event.description,
    }


@dataclass(frozen=True)
class AuditEntry:
    """What an operator action is to be recorded as; the store adds seq, hashes.

    ``error`` holds the service's error for an outcome and setui's reason for a refusal.
    ``latency`` is in seconds; the database keeps milliseconds.
    """

    action: str
    time: datetime
    user: str
    host: str
    endpoint: str
    ssh_client: str | None = None
    event_id: str | None = None
    event: Mapping[str, Any] | None = None  # event_snapshot() of the event as shown
    incarnation: int | None = None
    attempt_seq: int | None = None  # an outcome's attempt
    status: int | None = None
    error: str | None = None
    latency: float | None = None
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AuditRecord:
    """A stored audit record: the entry, its place in the chain and its hashes."""

    seq: int
    action: str
    time: datetime
    user: str
    host: str
    endpoint: str
    ssh_client: str | None
    event_id: str | None
    event: dict[str, Any] | None
    incarnation: int | None
    attempt_seq: int | None
    status: int | None
    error: str | None
    latency_ms: float | None
    details: dict[str, Any]
    prev_hash: str
    hash: str
    # For an attempt: whether an outcome for it exists anywhere in the log. False means
    # setui stopped between the POST and the outcome: "outcome unknown", not tampering.
    has_outcome: bool | None = None

    @property
    def latency(self) -> float | None:
        """Seconds, like every other latency in setui."""
        return None if self.latency_ms is None else self.latency_ms / 1000.0

    @property
    def outcome_unknown(self) -> bool:
        """An attempt with no outcome anywhere in the log: setui stopped between the
        POST and writing the answer down (or it is in flight in another process)."""
        return self.action == APPROVE_ATTEMPT and self.has_outcome is False

    @property
    def result(self) -> str | None:
        """What became of the approval this record tells of (:func:`approval_result`;
        an attempt without an outcome is unknown); None for any other record."""
        if self.action == APPROVE_OUTCOME:
            return approval_result(self.status, self.error, self.details)
        return UNKNOWN if self.outcome_unknown else None

    def to_json(self) -> dict[str, Any]:
        """Every field with stable keys, as ``setui audit --json`` and ``export`` write it."""
        return {
            "seq": self.seq, "time": to_db_time(self.time), "action": self.action,
            "user": self.user, "ssh_client": self.ssh_client, "host": self.host,
            "endpoint": self.endpoint, "event_id": self.event_id, "event": self.event,
            "incarnation": self.incarnation, "attempt_seq": self.attempt_seq,
            "status": self.status, "error": self.error, "latency_ms": self.latency_ms,
            "details": self.details, "prev_hash": self.prev_hash, "hash": self.hash,
        }


@dataclass(frozen=True)
class VerifyResult:
    """The audit chain's state; ``problem`` says in words what is wrong and where.

    ``warning`` is something to know that is not tampering (``ok`` stays True): the
    witness file is missing, unreadable or behind the log.
    """

    ok: bool
    count: int
    first_bad: int | None = None
    problem: str = ""
    head_seq: int | None = None
    head_hash: str | None = None
    warning: str = ""

    def __str__(self) -> str:
        if self.ok:
            return f"ok, {self.count} record{'s' if self.count != 1 else ''}"
        return self.problem


# A step's states. "running" is also what a dead agent leaves behind. A step that failed
# is FAILED, and an approval whose POST may have arrived UNKNOWN: the words of what an
# approval came to (above), which a step's state says in the same sense.
PLANNED, WAITING, RUNNING, DONE, INTERRUPTED, SKIPPED = (
    "planned", "waiting", "running", "done", "interrupted", "skipped")
FINISHED = frozenset({DONE, FAILED, UNKNOWN, INTERRUPTED, SKIPPED})


@dataclass(frozen=True)
class Step:
    """One piece of the agent's work on one event: prepare, approve or recover."""

    event_id: str
    step: str
    rule: str
    state: str
    detail: str
    started: datetime | None
    updated: datetime

    @property
    def finished(self) -> bool:
        return self.state in FINISHED


@dataclass(frozen=True)
class Claim:
    """An earlier approval of an event: who, when, and which audit record says so."""

    event_id: str
    user: str
    host: str
    ssh_client: str | None
    time: datetime
    attempt_seq: int
    outcome_seq: int | None  # None: no outcome recorded (in flight, or setui stopped)
    unknown: bool  # whether the service may or may not have it (else: it accepted it)
    # The VM the attempt names when this VM's own vmId is not known (it counts all the
    # same); None otherwise.
    made_on: str | None = None

    @property
    def record_seq(self) -> int:
        """The record to cite: the outcome, else the attempt."""
        return self.outcome_seq if self.outcome_seq is not None else self.attempt_seq

    def describe(self) -> str:
        """In words, for a refusal and a prompt; the names come from the audit log,
        which setui wrote, and are escaped again by whoever prints them."""
        who = self.user + (f" from {self.ssh_client}" if self.ssh_client else "")
        made_on = "" if self.made_on is None else \
            f"; made on VM {self.made_on}, and this VM's id is not known, so it counts"
        said = f"by {who} on {self.host} at {stamp(self.time, local=False)} " \
               f"(audit record {self.record_seq}{made_on})"
        if not self.unknown:
            return f"already approved {said}"
        if self.outcome_seq is not None:
            return f"may already have been sent {said}: its outcome is unknown"
        return (f"may already have been sent {said}: no outcome is recorded, so it is in "
                "flight, or setui stopped before writing it down")


@dataclass(frozen=True)
class HookRun:
    """One run of a hook: its command, when, how it ended, and what it printed."""

    id: int
    event_id: str
    step: str
    rule: str
    command: str
    started: datetime
    ended: datetime | None
    exit_status: int | None
    timed_out: bool
    output: str


@dataclass(frozen=True)
class Hold:
    """A person's hold on the agent's automation for an event, from the audit log: who
    set it and when, and who released it and when (None: not released)."""

    event_id: str
    holder: str
    since: datetime
    seq: int  # the hold's audit record
    until: datetime | None = None
    released_by: str | None = None
    release_seq: int | None = None  # the release's audit record
