"""What one Prometheus answer says about the fleet: its VMs, their events, their groups.

Pure functions of the answer (and of the VMs seen before, so a VM whose series vanished
is still listed, as "not reported", never silently dropped). The names and labels are the
contract with ``setui agent``. Every label value is network text: it is bounded here and
made printable where it is shown; nothing here guesses what a missing value would be.

An event is listed once however many VMs report it (every VM of an availability set sees
its neighbours' events): its resources, statuses, approvers and reporters are merged, and
every series is kept for the details. Its group is its reporters' group: the scale set,
else the placement group, else the resource group. Each agent names only its own VM in
an event's ``resource`` and counts what the event lists in ``resources_listed``: the
difference is the listed VMs no agent reports it for.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from functools import cached_property
from itertools import islice
from typing import Any, NamedTuple

from setui.core.metricnames import (
    EVENT_LABELS,
    EVENT_METRIC,
    IDENTITY_LABELS,
    IMPACT_METRIC,
    NOT_REPORTED_METRIC,
    SUCCESS_METRIC,
    WAITING_METRIC,
)
from setui.system.gctune import collector_paused

__all__ = [
    "EVENT_LABELS",
    "EVENT_METRIC",
    "IDENTITY_LABELS",
    "SUCCESS_METRIC",
    "Fleet",
    "FleetBuilder",
    "FleetEvent",
    "FleetGroup",
    "FleetImpact",
    "FleetVm",
    "VmKey",
    "VmState",
    "group_of",
]

LABEL_LIMIT = 128  # the agent bounds its labels to this; a relabelling Prometheus may not
MAX_SERIES = 500_000  # more is not a fleet this view can show; the rest is counted
MAX_SERIES_KEPT = 64  # series of one event kept for its details
MAX_REMEMBERED = 20_000  # VMs no longer reported, remembered for this session


class VmKey(NamedTuple):
    """A VM's identity across answers: names are unique within a resource group."""

    subscription_id: str
    resource_group: str
    vm_name: str


class VmState(Enum):
    """What is known of a VM's agent, in words the dashboard shows as they are."""

    LIVE = "live"
    STALE = "stale"  # its last good answer from IMDS is old: its agent stopped polling
    WAITING = "no answer yet"  # its agent has not had a good answer from IMDS yet
    UNKNOWN = "unknown"  # events reported, but no setui_last_success_timestamp_seconds
    GONE = "not reported"  # its series vanished: its agent, or the scrape of it, stopped

    @property
    def healthy(self) -> bool:
        return self is VmState.LIVE


class FleetGroup(NamedTuple):
    """Where a VM belongs for the operator: ``kind`` in words, ``name`` as exported."""

    kind: str  # "scale set", "placement group", "resource group", "no group"
    name: str

    @property
    def label(self) -> str:
        return f"{self.kind} {self.name}" if self.name else self.kind


NO_GROUP = FleetGroup("no group", "")
# The last second a datetime holds (9999-12-31 23:59:59 UTC): a NotBefore past it is none.
_LAST_SECOND = datetime.max.replace(tzinfo=timezone.utc).timestamp() // 1


def group_of(identity: Mapping[str, str]) -> FleetGroup:
    """The contract's rule: the scale set, else the placement group, else the resource
    group."""
    for label, kind in (("vm_scale_set", "scale set"), ("placement_group", "placement group"),
                        ("resource_group", "resource group")):
        if identity.get(label):
            return FleetGroup(kind, identity[label])
    return NO_GROUP


# FleetVm and FleetEvent are named tuples, not frozen dataclasses: as immutable, and made
# four times faster (a frozen dataclass sets each field through object.__setattr__), which
# is 50 ms of a 10,000-VM refresh.
class FleetImpact(NamedTuple):
    """The last stall or boot a VM's agent measured (``setui_last_impact_seconds``)."""

    kind: str  # stall, boot
    event_type: str  # "" when no event was announced for it
    event_id: str
    at: str  # ISO 8601 UTC, as exported
    seconds: float


class FleetVm(NamedTuple):
    """One VM as its agent's series describe it."""

    key: VmKey
    labels: Mapping[str, str]  # one of its series' labels (bounded), its identity among them
    group: FleetGroup
    state: VmState
    last_success: float | None  # Unix seconds; None when not exported, 0 when never
    reported_at: float  # Prometheus's time when its series were last in an answer
    instance: str = ""
    job: str = ""
    event_ids: tuple[str, ...] = ()
    waiting: tuple[str, ...] = ()  # why its agent's early approvals wait (setui_agent_waiting)
    impact: FleetImpact | None = None

    @property
    def name(self) -> str:
        return self.key.vm_name

    @property
    def identity(self) -> dict[str, str]:
        """The contract's identity labels, in its order (made when asked: the details
        show it, a refresh of ten thousand VMs need not)."""
        get = self.labels.get
        return {name: get(name, "") for name in IDENTITY_LABELS}


class FleetEvent(NamedTuple):
    """One scheduled event, merged from every VM that reports it."""

    event_id: str
    event_type: str
    statuses: tuple[str, ...]
    source: str
    not_before_at: float | None  # Unix seconds, the reporters' earliest; None when none
    not_before_text: str
    resources: tuple[str, ...]
    approved_by: tuple[str, ...]
    reporters: tuple[VmKey, ...]
    group: FleetGroup
    series: tuple[Mapping[str, str], ...]  # kept for the details, at most MAX_SERIES_KEPT
    stale: bool = False  # every VM reporting it has stopped answering: its news is old
    listed: int = 0  # VMs the event lists, as its reporters count them (0: not said)

    @property
    def listed_count(self) -> int:
        """How many VMs it lists: the reporters' count, or the names known when no
        reporter counts them (an agent older than the resources_listed label)."""
        return max(self.listed, len(self.resources))

    @property
    def without_agent(self) -> int:
        """Listed VMs that no agent in the answer reports it for: no agent, a stopped
        one, or one not scraped. Their names are in the document on any VM that lists
        the event; each agent names only its own VM."""
        return self.listed_count - len(self.resources)

    @property
    def not_before(self) -> datetime | None:
        """NotBefore as a time, made when asked (for the rows drawn), not for every event
        of a refresh."""
        if self.not_before_at is None:
            return None
        try:
            return datetime.fromtimestamp(self.not_before_at, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):  # past what this platform's clock holds
            return None

    @property
    def status(self) -> str:
        """Started when any reporter sees it started (a fact), else what they say."""
        if self.is_started:
            return "Started"
        return self.statuses[0] if self.statuses else ""

    @property
    def is_started(self) -> bool:
        return "Started" in self.statuses

    def sort_key(self) -> tuple[Any, ...]:
        """Most urgent first, independent of the time so rows only move on news:
        started, then by NotBefore, then the rest."""
        if self.is_started:
            return (0, math.inf, self.event_id)
        if self.not_before_at is not None:
            return (2, self.not_before_at, self.event_id)
        return (3, math.inf, self.event_id)


@dataclass(frozen=True)
class Fleet:
    """One answer, understood. ``at`` is Prometheus's time of the answer (Unix seconds)."""

    at: float
    vms: Mapping[VmKey, FleetVm]
    events: tuple[FleetEvent, ...]
    dropped: int = 0  # series over MAX_SERIES, not read
    ignored: int = 0  # series without the labels of the contract
    # Prometheus remembers VMs that stopped reporting (the shipped recording rule): those
    # that stopped before this view opened are listed. Without it, only those it saw go.
    remembers: bool = False

    def problem_vms(self) -> tuple[FleetVm, ...]:
        """VMs whose agents are not known to be answering, most recently reported first."""
        return self._problems

    @cached_property
    def _problems(self) -> tuple[FleetVm, ...]:
        # Found once per answer: the status line asks every second, and going through ten
        # thousand VMs each time was a tenth of the idle dashboard's CPU.
        return tuple(sorted((vm for vm in self.vms.values() if not vm.state.healthy),
                            key=lambda vm: (-vm.reported_at, vm.key)))


def _label(labels: Mapping[str, Any], name: str) -> str:
    value = labels.get(name, "")
    if not isinstance(value, str):
        return ""
    return value if len(value) <= LABEL_LIMIT else value[:LABEL_LIMIT]


_STR_LEN = str.__len__  # refuses anything but a str: one pass checks type and length


def _bounded(labels: dict[str, Any]) -> dict[str, str]:
    """The labels as strings of at most LABEL_LIMIT characters. Checked once per series
    (a fleet's answer has tens of thousands), so every later look-up is a plain get."""
    try:  # (max without default=: a keyword argument costs a tenth of the check)
        if not labels or max(map(_STR_LEN, labels.values())) <= LABEL_LIMIT:
            return labels
    except TypeError:  # a value that is not a string
        pass
    return {str(k)[:LABEL_LIMIT]: _label(labels, k) for k in labels}


def _value(sample: dict[str, Any]) -> float | None:
    try:
        value = float(sample["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


# One series of an event: the VM reporting it, its labels, its value (NotBefore).
_Row = tuple[VmKey, Mapping[str, str], float | None]


class FleetBuilder:
    """Turns answers into :class:`Fleet` and remembers the VMs seen, so one whose series
    vanished is shown as not reported (with when it last was) rather than forgotten."""

    def __init__(self, stale_after: float = 120.0) -> None:
        self.stale_after = stale_after
        self._seen: dict[VmKey, FleetVm] = {}

    def build(self, result: Iterable[object], at: float) -> Fleet:
        """``result`` as the API gives it (a list of ``{"metric": ..., "value": ...}``);
        anything else in it is counted as ignored."""
        with collector_paused():
            return self._build(result, at)

    def _build(self, result: Iterable[object], at: float) -> Fleet:
        # One pass over tens of thousands of series: plain dicts and tuples, one VmKey per
        # VM (not per series), no copy of a series' labels; each event is made once all
        # its series are known.
        keys: dict[tuple[str, str, str], VmKey] = {}
        vm_labels: dict[VmKey, Mapping[str, str]] = {}
        success: dict[VmKey, float] = {}
        first: dict[str, _Row] = {}  # each event's first series
        more: dict[str, list[_Row]] = {}  # every series of an event with more than one
        ids_of: dict[VmKey, list[str]] = {}
        impacts: dict[VmKey, FleetImpact] = {}
        last_seen: dict[VmKey, tuple[float, Mapping[str, str]]] = {}  # stopped reporting
        waiting: dict[VmKey, list[str]] = {}
        ignored = 0
        remembers = False
        samples = iter(result)
        for sample in islice(samples, MAX_SERIES):
            if not isinstance(sample, dict) or not isinstance(raw := sample.get("metric"), dict):
                ignored += 1
                continue
            labels = _bounded(raw)
            get = labels.get
            ident = (get("subscription_id", ""), get("resource_group", ""),
                     get("vm_name", ""))
            if not ident[2]:
                if get("__name__") == NOT_REPORTED_METRIC:  # the rule's own mark
                    remembers = True
                else:
                    ignored += 1
                continue
            key = keys.get(ident)
            if key is None:
                key = keys[ident] = VmKey(*ident)
            name = get("__name__")
            if name == EVENT_METRIC:
                event_id = get("eventID", "")
                if not event_id:
                    ignored += 1
                    continue
                row = (key, labels, _value(sample))
                if event_id in first:
                    more.setdefault(event_id, [first[event_id]]).append(row)
                else:
                    first[event_id] = row
                ids_of.setdefault(key, []).append(event_id)
            elif name == SUCCESS_METRIC:
                value = _value(sample)
                if value is not None:
                    success[key] = max(value, success.get(key, 0.0))
            elif name == IMPACT_METRIC:
                value = _value(sample)
                if value is not None:
                    impacts[key] = FleetImpact(get("impact", ""), get("eventType", ""),
                                               get("eventID", ""), get("at", ""), value)
            elif name == NOT_REPORTED_METRIC:
                value = _value(sample)
                if value is not None and value > last_seen.get(key, (0.0,))[0]:
                    last_seen[key] = (value, labels)
                continue  # not a VM reporting now
            elif name == WAITING_METRIC:
                if _value(sample) == 1:
                    waiting.setdefault(key, []).append(get("reason", ""))
                continue  # its VM is made from its other series
            else:
                ignored += 1
                continue
            if key not in vm_labels:
                vm_labels[key] = labels
        dropped = sum(1 for _ in samples)  # over MAX_SERIES: counted, not read
        groups: dict[tuple[str, str, str], FleetGroup] = {}
        vms = {key: self._vm(key, labels, success.get(key), at, ids_of.get(key, ()), groups,
                             waiting.get(key, ()), impacts.get(key))
               for key, labels in vm_labels.items()}
        departed = {key: self._gone(key, labels, min(since, at), groups)
                    for key, (since, labels) in last_seen.items() if key not in vms}
        self._remember(vms, departed)
        everyone = dict(self._seen)
        everyone.update(vms)
        ones: dict[Any, tuple[Any]] = {}
        events = [_event(event_id, row, more.get(event_id), vms, ones)
                  for event_id, row in first.items()]
        events.sort(key=FleetEvent.sort_key)
        return Fleet(at, everyone, tuple(events), dropped, ignored, remembers)

    @staticmethod
    def _group(labels: Mapping[str, str],
               groups: dict[tuple[str, str, str], FleetGroup]) -> FleetGroup:
        get = labels.get
        where = (get("vm_scale_set", ""), get("placement_group", ""),
                 get("resource_group", ""))
        group = groups.get(where)
        if group is None:  # one FleetGroup per group, not one per VM
            group = groups[where] = group_of(labels)
        return group

    def _gone(self, key: VmKey, labels: Mapping[str, str], since: float,
              groups: dict[tuple[str, str, str], FleetGroup]) -> FleetVm:
        """A VM Prometheus remembers but does not scrape now: not reported since its last
        scrape; what it said of IMDS and its events then is not known here."""
        return FleetVm(key, labels, self._group(labels, groups), VmState.GONE, None, since,
                       labels.get("instance", ""), labels.get("job", ""))

    def _vm(self, key: VmKey, labels: Mapping[str, str], last: float | None, at: float,
            event_ids: Iterable[str], groups: dict[tuple[str, str, str], FleetGroup],
            waiting: Iterable[str] = (), impact: FleetImpact | None = None) -> FleetVm:
        get = labels.get
        group = self._group(labels, groups)
        if last is None:
            state = VmState.UNKNOWN
        elif last <= 0:
            state = VmState.WAITING
        elif at - last > self.stale_after:
            state = VmState.STALE
        else:
            state = VmState.LIVE
        return FleetVm(key, labels, group, state, last, at, get("instance", ""),
                       get("job", ""), tuple(dict.fromkeys(event_ids)),
                       tuple(sorted(set(waiting))), impact)

    def _remember(self, vms: Mapping[VmKey, FleetVm], departed: Mapping[VmKey, FleetVm]
                  ) -> None:
        """What this session saw of a VM beats what Prometheus remembers of it (its last
        good answer, its events): a departed VM is added only when not seen here."""
        for key, vm in self._seen.items():
            if key not in vms and vm.state is not VmState.GONE:
                self._seen[key] = vm._replace(state=VmState.GONE)
        for key, vm in departed.items():
            self._seen.setdefault(key, vm)
        self._seen.update(vms)
        if len(self._seen) > MAX_REMEMBERED:
            oldest = sorted(self._seen.values(), key=lambda vm: vm.reported_at)
            for vm in oldest[:len(self._seen) - MAX_REMEMBERED]:
                del self._seen[vm.key]


def _event(event_id: str, row: _Row, rows: list[_Row] | None,
           vms: Mapping[VmKey, FleetVm], ones: dict[Any, tuple[Any]]) -> FleetEvent:
    """The event from its series: ``row`` the first, ``rows`` all of them when there is
    more than one (then merged). ``ones`` holds the one-value tuples made so far."""
    key, first, value = row
    if rows is None:  # the common case at scale: one series, no merging to do
        get = first.get
        resource, approver = get("resource", ""), get("approved_by", "")
        status = get("eventStatus", "")
        # One tuple per value (a status, a VM), not per event: fewer objects made, and
        # fewer for the collector to go through when the pause ends.
        statuses: tuple[str, ...] = ones.setdefault(status, (status,))
        resources: tuple[str, ...] = ones.setdefault(resource, (resource,)) if resource else ()
        approvers: tuple[str, ...] = ones.setdefault(approver, (approver,)) if approver else ()
        reporters: tuple[VmKey, ...] = ones.setdefault(key, (key,))
        lowest = value if value is not None and 0 < value <= _LAST_SECOND else None
        vm = vms.get(key)
        group = vm.group if vm is not None else NO_GROUP
        stale = vm is None or vm.state is not VmState.LIVE
        series: tuple[Mapping[str, str], ...] = (first,)
        listed = _count(get("resources_listed", ""))
    else:
        statuses = tuple(dict.fromkeys(labels.get("eventStatus", "") for _, labels, _ in rows))
        resources = tuple(dict.fromkeys(r for _, labels, _ in rows
                                        if (r := labels.get("resource", ""))))
        approvers = tuple(dict.fromkeys(a for _, labels, _ in rows
                                        if (a := labels.get("approved_by", ""))))
        reporters = tuple(dict.fromkeys(key for key, _, _ in rows))
        lowest = min((v for _, _, v in rows if v is not None and 0 < v <= _LAST_SECOND),
                     default=None)
        groups = Counter(vms[key].group for key in reporters if key in vms)
        group = groups.most_common(1)[0][0] if groups else NO_GROUP
        stale = all(key not in vms or not vms[key].state.healthy for key in reporters)
        series = tuple(row[1] for row in rows[:MAX_SERIES_KEPT])
        listed = max(map(_count, {labels.get("resources_listed", "") for _, labels, _ in rows}))
    # Positional: keywords cost a third of the making, thirty thousand times a refresh.
    return FleetEvent(event_id, first.get("eventType", ""), statuses,
                      first.get("eventSource", ""), lowest, first.get("notBefore", ""),
                      resources, approvers, reporters, group, series, stale, listed)


def _count(text: str) -> int:
    """A count label (``resources_listed``) as a number; 0 when absent or not one."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 9 else 0
