"""Prometheus metrics: an HTTP endpoint and/or a node_exporter textfile.

The names are a contract (docs/metrics.md, setui.core.metricnames): ``setui fleet`` queries
them, and where they mean the same they are webdevops' exporter's
``azure_scheduledevent_*`` (but one series per event, not one per listed VM). The
per-event series are made at scrape time from the current document, so an event that
left the document leaves no series behind: the cardinality is bounded by what the
service lists now.

A poll costs the agent next to nothing here: it counts in plain integers and keeps a
reference to the document. The work is done at scrape time, and only for what changed:
the families drawn from the document (its events, its incarnation, the VM's identity)
are rendered once per document and kept, so a scrape every 15 s of a document that did
not change renders just the counters and the time of the last good answer.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from setui.agent.scrape import MetricsServer
from setui.core.impact import STALL, Impact
from setui.core.metricnames import (
    BUSY_METRIC,
    EVENT_LABELS,
    EVENT_METRIC,
    IDENTITY_LABELS,
    IMPACT_LABELS,
    IMPACT_METRIC,
    INFO_METRIC,
    WAITING_METRIC,
)
from setui.core.model import Document, Event, EventType, is_this_vm
from setui.core.textsafe import masked
from setui.core.timefmt import iso
from setui.system.atomicfile import write_atomically

__all__ = ["IDENTITY_LABELS", "AgentMetrics", "label", "parse_listen", "type_label"]

# IMDS compute metadata field of each identity label.
COMPUTE_FIELD = {"vm_scale_set": "vmScaleSetName", "placement_group": "placementGroupId",
                 "resource_group": "resourceGroupName", "subscription_id": "subscriptionId",
                 "zone": "zone"}
MAX_LABEL = 128
# The label values the counters are made with at start (docs/metrics.md): a value not
# listed here still counts, but its series appears only at its first increment.
APPROVAL_OUTCOMES = ("approved", "refused", "failed", "unknown")
ACTOR_KINDS = ("policy",)
HOOKS = ("prepare", "recover")
HOOK_OUTCOMES = ("ok", "failed", "timeout", "deadline", "error", "interrupted")
NOTIFICATION_OUTCOMES = ("sent", "failed")
# The eventType of the measured series: the known types, "other" for a type setui does not
# know (a label value per unknown word would let the service grow the series), and, for
# an impact, "none" when no event was announced for it.
EVENT_TYPES = (*(t.value for t in EventType), "other")
IMPACT_TYPES = (*EVENT_TYPES, "none")
ANNOUNCED = ("true", "false")
# Seconds. Notice: around each documented minimum (Preempt 30 s, Terminate 5 to 15 min,
# Redeploy 10 min, Freeze and Reboot 15 min) and up to the week a predicted hardware
# failure is announced ahead. Impact: a Freeze's seconds to a Redeploy's minutes.
NOTICE_BUCKETS = (30, 60, 120, 300, 600, 900, 1800, 3600, 21600, 86400, 604800)
IMPACT_BUCKETS = (0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
_EOF = b"# EOF\n"  # OpenMetrics' last line: once, at the end of the whole exposition

# *_created series double the output for nothing here. (prometheus_client leaves this
# function unannotated, so strict mypy calls it untyped.)
disable_created_metrics()  # type: ignore[no-untyped-call]


def label(value: object) -> str:
    """A label value: printable (a control character becomes ``?``), at most 128."""
    text = "" if value is None else str(value)
    return masked(text[:MAX_LABEL])


def type_label(event_type: str | None) -> str:
    """An eventType label of the measured series: known, ``other``, or ``none``."""
    if event_type is None:
        return "none"
    return event_type if event_type in EVENT_TYPES else "other"


def parse_listen(text: str) -> tuple[str, int]:
    """``ADDR:PORT``, ``[::1]:PORT`` or ``PORT`` (then on 127.0.0.1); ValueError in words."""
    value = text.strip()
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", value
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"not ADDR:PORT (port 0 to 65535): {text!r}")
    return host, int(port)


def _same_document(a: Document | None, b: Document | None) -> bool:
    """Whether two answers draw the same series: equal fields and equal raw text (the
    ``notBefore`` label is the service's own string, which the parsed time does not
    keep). Called at scrape time only, a few times a minute."""
    return a is b or (a is not None and b is not None and a == b and a.raw == b.raw)


def _event_labels(event: Event, vm_name: str | None, approved_by: str) -> tuple[str, ...]:
    """An event's labels (EVENT_LABELS' order). One series per event, whatever it lists:
    its ``resource`` is this VM when listed (``this_vm="true"``), else empty; the others
    are counted in ``resources_listed``, not named, so a group of N VMs that all see an
    event of all of them export N series for it, not N x N."""
    mine = next((r for r in event.resources if is_this_vm(r, vm_name)), "")
    raw_not_before = event.raw.get("NotBefore", "")
    return (label(event.event_id), label(event.event_type.value), label(event.status.value),
            label(event.source.value if event.source else ""), "virtualMachine",
            label(mine),
            label(raw_not_before if isinstance(raw_not_before, str) else ""),
            "true" if mine else "false", label(approved_by),
            str(len(dict.fromkeys(event.resources))))


class _Current(Collector):
    """The per-VM gauges drawn from the current document and the approvals: rendered
    once per change of either (see :meth:`AgentMetrics.exposition`), not per scrape."""

    def __init__(self, owner: AgentMetrics) -> None:
        self.owner = owner

    def collect(self) -> Iterator[GaugeMetricFamily]:
        owner = self.owner
        document, approved_by = owner.document, owner.approved_by
        ids = owner.identity_values
        names = list(IDENTITY_LABELS)
        incarnation = GaugeMetricFamily(
            "azure_scheduledevent_document_incarnation",
            "DocumentIncarnation of the scheduled events document", labels=names)
        if document is not None:
            incarnation.add_metric(ids, document.incarnation)
        yield incarnation
        events = GaugeMetricFamily(
            EVENT_METRIC,
            "A current scheduled event, one series per event: resource is this VM when the "
            "event lists it; value: NotBefore as Unix seconds (0 when empty)",
            labels=[*names, *EVENT_LABELS])
        if document is not None:
            seen: set[tuple[str, ...]] = set()
            for event in document.events:
                values = (*ids, *_event_labels(event, owner.vm_name,
                                               approved_by.get(event.event_id, "")))
                if values not in seen:  # a repeated EventId with the same labels
                    seen.add(values)
                    events.add_metric(list(values), event.not_before.timestamp()
                                      if event.not_before else 0.0)
        yield events
        info = GaugeMetricFamily(INFO_METRIC, "This VM's identity and setui's version",
                                 labels=[*names, "location", "version"])
        info.add_metric([*ids, label(owner.location), label(owner.version)], 1)
        yield info
        build = GaugeMetricFamily("setui_build_info", "setui's version", labels=["version"])
        build.add_metric([label(owner.version)], 1)
        yield build
        impact = GaugeMetricFamily(
            IMPACT_METRIC, "The last stall or boot the agent measured on this VM: its kind, "
            "the event it was tied to (empty: none announced), when; value: seconds",
            labels=[*names, *IMPACT_LABELS])
        last = owner.last_impact
        if last is not None:
            impact.add_metric([*ids, last.kind, label(last.event_type or ""),
                               label(last.event_id or ""), iso(last.at) or ""], last.measured)
        yield impact


class _Polling(Collector):
    """Polls, failed polls by kind and the last good answer: they move at every poll,
    so the poll only adds to plain numbers and the families are made here, per scrape."""

    def __init__(self, owner: AgentMetrics) -> None:
        self.owner = owner

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        owner = self.owner
        polls = CounterMetricFamily("setui_polls", "Polls of the metadata service by outcome",
                                    labels=["outcome"])
        polls.add_metric(["ok"], owner.answers() if owner.answers else owner.polls_ok)
        polls.add_metric(["error"], owner.polls_failed)
        yield polls
        errors = CounterMetricFamily("setui_poll_errors", "Failed polls by kind of error",
                                     labels=["kind"])
        for kind, count in list(owner.poll_errors.items()):
            errors.add_metric([kind], count)
        yield errors
        last = GaugeMetricFamily(
            "setui_last_success_timestamp_seconds",
            "Unix time of the last good answer from the metadata service (0: none yet)",
            labels=list(IDENTITY_LABELS))
        last.add_metric(owner.identity_values, owner.last_answer())
        yield last


class _Activity(Collector):
    """What counts this VM against its group's disruption budget, and what waits for it:
    a series per reason that holds, none otherwise (most VMs, most of the time)."""

    def __init__(self, owner: AgentMetrics) -> None:
        self.owner = owner

    def collect(self) -> Iterator[GaugeMetricFamily]:
        owner = self.owner
        labels = [*IDENTITY_LABELS, "reason"]
        for name, what, reasons in (
                (BUSY_METRIC, "1 while this VM counts against its group's disruption budget "
                              "for this reason (a hook running, an approval being made)",
                 owner.busy),
                (WAITING_METRIC, "1 while an early approval waits for this reason (budget: "
                                 "the group's budget is spent; prometheus: it cannot be told)",
                 owner.waiting)):
            family = GaugeMetricFamily(name, what, labels=labels)
            for reason in sorted(reasons):
                family.add_metric([*owner.identity_values, label(reason)], 1)
            yield family


class AgentMetrics:
    """The agent's metrics; ``observe()`` from the agent's loop, scrapes from anywhere."""

    def __init__(self, *, vm_name: str | None, compute: Mapping[str, str] | None,
                 version: str) -> None:
        self.set_identity(vm_name, compute)
        self.version = version
        # What a poll leaves, read at scrape time (a textfile is written on a worker
        # thread: each value is one reference, replaced whole, never changed in place).
        self.document: Document | None = None
        self.approved_by: Mapping[str, str] = {}
        self.last_impact: Impact | None = None  # the last stall or boot measured
        self.last_success = 0.0
        # The poller's own count of good answers and the time of the newest, when it
        # polls quietly (see count_answers).
        self.answers: Callable[[], int] | None = None
        self.newest_answer: Callable[[], float | None] | None = None
        self.polls_ok = 0
        self.polls_failed = 0
        self.poll_errors: dict[str, int] = {}  # by kind, as label values
        self.busy: frozenset[str] = frozenset()  # set_activity
        self.waiting: frozenset[str] = frozenset()
        # Three registries, one exposition: the document's families, rendered once per
        # document and approvals; the counters and histograms (a few hundred series),
        # rendered once per change of theirs (count_* and observe_*: _changed); both
        # kept per content type; and the polls and activity, rendered at every scrape.
        self._described = CollectorRegistry(auto_describe=True)
        self._described.register(_Current(self))
        self._counted = CollectorRegistry(auto_describe=True)
        self._counts = 0  # changes of the counted families so far
        self._counted_kept: dict[str, tuple[int, bytes]] = {}
        self._live = CollectorRegistry(auto_describe=True)
        self._live.register(_Polling(self))
        self._live.register(_Activity(self))
        self._approvals = Counter("setui_approvals", "Approvals by outcome and kind of actor",
                                  ["outcome", "actor_kind"], registry=self._counted)
        self._hook_runs = Counter("setui_hook_runs", "Hook runs by hook and outcome",
                                  ["hook", "outcome"], registry=self._counted)
        self._notifications_told = Counter("setui_notifications", "Notifications by outcome",
                                           ["outcome"], registry=self._counted)
        self._impacts = Histogram(
            "setui_event_impact_seconds", "Stalls and boots of this VM the agent measured, "
            "by the type of the event they were tied to (none: no event announced)",
            ["eventType"], buckets=IMPACT_BUCKETS, registry=self._counted)
        self._stalls = Counter("setui_stalls", "Stalls of this VM over 0.5 s the agent's "
                               "heartbeat saw, by whether an event was announced for them",
                               ["announced"], registry=self._counted)
        self._notices = Histogram(
            "setui_event_notice_seconds", "Notice of this VM's events: first seen to the "
            "NotBefore first announced (0: appeared Started), when seen to appear",
            ["eventType"], buckets=NOTICE_BUCKETS, registry=self._counted)
        # Every known series at 0 from the start: a counter first seen at 1 has no
        # increase, and an alert on increase() would miss the first failure.
        for metric, values in ((self._approvals, (APPROVAL_OUTCOMES, ACTOR_KINDS)),
                               (self._hook_runs, (HOOKS, HOOK_OUTCOMES)),
                               (self._notifications_told, (NOTIFICATION_OUTCOMES,)),
                               (self._impacts, (IMPACT_TYPES,)), (self._stalls, (ANNOUNCED,)),
                               (self._notices, (EVENT_TYPES,))):
            for labels in itertools.product(*values):
                metric.labels(*labels)
        self._server: MetricsServer | None = None
        self._lock = threading.Lock()

    def observe(self, document: Document | None, *, fresh: bool, error_kind: str | None,
                wall: float | None = None) -> None:
        """One poll: its outcome, and the document it leaves current. Called at every
        poll, so it only counts and keeps references; scrapes make the series."""
        if error_kind is None:
            self.polls_ok += 1
        else:
            self.polls_failed += 1
            kind = label(error_kind)
            self.poll_errors = {**self.poll_errors, kind: self.poll_errors.get(kind, 0) + 1}
        if fresh:
            self.last_success = wall if wall is not None else time.time()
        self.document = document

    def set_identity(self, vm_name: str | None, compute: Mapping[str, str] | None) -> None:
        """This VM's identity labels: "" for what is not known yet, and set again when
        IMDS answers later (the series then carry the learned values)."""
        compute = compute or {}
        self.vm_name = vm_name
        self.identity_values = [label(vm_name)] + [
            label(compute.get(COMPUTE_FIELD[name], "")) for name in IDENTITY_LABELS[1:]]
        self.location = compute.get("location", "")
        self._rendered: dict[str, tuple[Document | None, Mapping[str, str], Impact | None,
                                        bytes]] = {}

    def count_answers(self, answers: Callable[[], int],
                      newest: Callable[[], float | None]) -> None:
        """Take the count of good polls, and the monotonic time of the newest, from the
        poller itself: its quiet polls (core.quiet) reach the agent in results seconds
        apart, and a scrape in between counts them all the same."""
        self.answers, self.newest_answer = answers, newest

    def last_answer(self) -> float:
        """Unix time of the last good answer (0: none yet)."""
        newest = self.newest_answer() if self.newest_answer else None
        last: float = self.last_success
        if newest is None:
            return last
        return max(last, time.time() - max(0.0, time.monotonic() - newest))

    def observe_impact(self, impact: Impact) -> None:
        """A stall or a boot measured: counted, and the last one shown (replaced whole)."""
        self._impacts.labels(type_label(impact.event_type)).observe(impact.measured)
        if impact.kind == STALL:
            self._stalls.labels("true" if impact.event_id else "false").inc()
        self._changed()
        if self.last_impact is None or impact.at >= self.last_impact.at:
            self.last_impact = impact

    def observe_notice(self, event_type: str, seconds: float) -> None:
        """The notice an event of this VM was seen to give (0: none)."""
        self._notices.labels(type_label(event_type)).observe(max(seconds, 0.0))
        self._changed()

    def count_hook_run(self, hook: str, outcome: str) -> None:
        self._hook_runs.labels(hook=hook, outcome=outcome).inc()
        self._changed()

    def count_approval(self, outcome: str, actor_kind: str) -> None:
        self._approvals.labels(outcome=outcome, actor_kind=actor_kind).inc()
        self._changed()

    def count_notification(self, sent: bool) -> None:
        """A notification sent, or given up (any thread: the notifier's)."""
        self._notifications_told.labels(outcome="sent" if sent else "failed").inc()
        self._changed()

    def _changed(self) -> None:
        """The counted families changed: the next scrape renders them again. Only
        through here (count_*, observe_*), or a scrape would show the old values."""
        self._counts += 1

    @property
    def identity(self) -> dict[str, str]:
        """This VM's identity labels as exported (what Prometheus selects it by)."""
        return dict(zip(IDENTITY_LABELS, self.identity_values, strict=True))

    def set_activity(self, busy: frozenset[str], waiting: frozenset[str]) -> None:
        """Why this VM is busy and why an approval waits (agent: each time it changes)."""
        self.busy, self.waiting = busy, waiting

    def set_approved_by(self, approved_by: Mapping[str, str]) -> None:
        if dict(approved_by) != dict(self.approved_by):
            self.approved_by = dict(approved_by)

    def exposition(self, accept: str = "") -> tuple[bytes, str]:
        """The whole exposition in the format ``accept`` asks for, and its content type.

        The document's families are rendered again only when the document or the
        approvals differ from those they were rendered from, the counters and
        histograms only when they changed; the polls and the time of the last good
        answer every time."""
        encoder, content_type = choose_encoder(accept)
        document, approved_by, impact = self.document, self.approved_by, self.last_impact
        kept = self._rendered.get(content_type)
        if kept is not None and kept[1] is approved_by and kept[2] is impact \
                and _same_document(kept[0], document):
            described = kept[3]
        else:
            described = encoder(self._described)
            if described.endswith(_EOF):  # OpenMetrics: one "# EOF", after the rest
                described = described[:-len(_EOF)]
            self._rendered[content_type] = (document, approved_by, impact, described)
        counts = self._counts
        counted = self._counted_kept.get(content_type)
        if counted is None or counted[0] != counts:
            counted = (counts, encoder(self._counted).removesuffix(_EOF))
            self._counted_kept[content_type] = counted
        return described + counted[1] + encoder(self._live), content_type

    async def serve(self, host: str, port: int) -> tuple[str, int]:
        """Answer scrapes on ``host:port`` (0: a free port) from the caller's event loop,
        bounded (see :mod:`setui.agent.scrape`); the address it listens on. No thread of
        its own: nothing wakes between scrapes, and a scrape (well under a millisecond)
        reads one consistent state."""
        self._server = MetricsServer(self.exposition)
        return await self._server.start(host, port)

    def text(self) -> bytes:
        """The exposition in Prometheus' text format (the textfile's)."""
        return self.exposition()[0]

    def write_textfile(self, path: Path) -> None:
        """The exposition (no timestamps) written whole under a temporary name and
        renamed, readable by node_exporter. Not synced to disk: it is rewritten every few
        seconds, and after a crash the next agent writes it again."""
        with self._lock:
            write_atomically(path, self.text(), mode=0o644, sync=False)

    async def aclose(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            await server.aclose()
