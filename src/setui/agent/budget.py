"""The disruption budget: how many VMs of this VM's group are unavailable, asked of the
Prometheus that scrapes the agents (the same client and the same reading of its answer as
``setui fleet``: fleet.prometheus, fleet.model).

A VM of the group is unavailable when its agent is not known to be answering (stale,
not reported, no answer yet: fleet.model's states), when an event of its own has started
or was approved and has not started yet, or when its agent says it is busy
(``setui_agent_busy``: a hook running, an early approval being claimed or sent). This
VM is not counted: the question is whether it may join them.

Two agents that ask at the same moment would both find room. So an agent first claims
(exports ``setui_agent_busy{reason="approving"}``), notes Prometheus's time of an answer
read after it claimed, and decides only once Prometheus has scraped every answering VM
of the group since then: of two agents that claimed, the later one then sees the earlier
one's claim (or its approval), and a claim is held until the approval shows in this
VM's own series. An agent that sees another's claim steps back and tries again later.
A VM whose agent stopped is counted only if Prometheus has setui's recording rules
(contrib/prometheus/setui-rules.yml); without them the budget cannot be told.

Everything here but :class:`BudgetClient` is pure; the client is synchronous (HTTP), so
the agent calls it on a thread.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from setui.core.metricnames import (
    BUSY_METRIC,
    EVENT_METRIC,
    NOT_REPORTED_METRIC,
    SUCCESS_METRIC,
)
from setui.core.model import is_this_vm
from setui.fleet.model import Fleet, FleetBuilder, VmKey
from setui.fleet.prometheus import PrometheusClient

__all__ = ["TIMEOUT", "BudgetClient", "Count", "GroupAnswer", "GroupLabels", "count",
           "group_of_vm", "scraped_query", "series_query"]

TIMEOUT = 10.0  # seconds for each answer: the group's series are few
STALE_AFTER = 120.0  # seconds: as `setui fleet` calls an agent stale by default
# Each kind of group: the identity label that names it, and those it is unique within.
_LABELS = {"scale-set": ("vm_scale_set", ("subscription_id", "resource_group")),
           "placement-group": ("placement_group", ("subscription_id",)),
           "resource-group": ("resource_group", ("subscription_id",))}
_WORDS = {"scale-set": "scale set", "placement-group": "placement group",
          "resource-group": "resource group"}
_BUSY = {"prepare": "prepare running", "recover": "recover running",
         "approving": "approving"}
_SHOWN = 5  # busy VMs named in the words


@dataclass(frozen=True)
class GroupLabels:
    """This VM's group of one kind: its name and the label values that select it."""

    kind: str  # a policy's group: "scale-set", ...
    name: str
    matchers: tuple[tuple[str, str], ...]

    @property
    def kind_words(self) -> str:
        return _WORDS[self.kind]

    def selector(self) -> str:
        """The PromQL label matchers, each value escaped as a PromQL string."""
        return ",".join(f'{name}="{_escape(value)}"' for name, value in self.matchers)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def group_of_vm(kind: str, identity: Mapping[str, str]) -> GroupLabels | None:
    """This VM's group of ``kind`` from its identity labels; None when compute metadata
    did not name it (a VM in no scale set, or not known yet)."""
    label, within = _LABELS[kind]
    name = identity.get(label, "")
    if not name:
        return None
    return GroupLabels(kind, name, ((label, name), *((w, identity.get(w, "")) for w in within)))


def series_query(group: GroupLabels) -> str:
    """Every series of the group that the count reads, and the recording rule's mark
    (its one series without labels: the rules are loaded)."""
    names = "|".join((EVENT_METRIC, SUCCESS_METRIC, NOT_REPORTED_METRIC, BUSY_METRIC))
    return (f'{{__name__=~"{names}",{group.selector()}}} '
            f'or {NOT_REPORTED_METRIC}{{vm_name=""}}')


def scraped_query(group: GroupLabels) -> str:
    """When Prometheus last scraped each VM of the group (its samples' time)."""
    return f"timestamp({SUCCESS_METRIC}{{{group.selector()}}})"


def _key(labels: Mapping[str, object]) -> VmKey:
    def get(name: str) -> str:
        value = labels.get(name, "")
        return value if isinstance(value, str) else ""
    return VmKey(get("subscription_id"), get("resource_group"), get("vm_name"))


def _number(sample: Mapping[str, object]) -> float | None:
    try:
        # A Prometheus sample is JSON of any shape: the except is the check, not the type.
        return float(sample["value"][1])  # type: ignore[index]
    except (KeyError, IndexError, TypeError, ValueError):
        return None


@dataclass(frozen=True)
class GroupAnswer:
    """One look at the group: its VMs (fleet.model's), what their agents say keeps them
    busy, when each was last scraped, and Prometheus's time of the answer."""

    fleet: Fleet
    busy: Mapping[VmKey, frozenset[str]]
    scraped: Mapping[VmKey, float]
    at: float | None

    def scraped_since(self, moment: float, me: VmKey) -> list[VmKey]:
        """The answering VMs of the group, and this one (``me``: its claim must show), not
        scraped since ``moment`` (Prometheus's time): what they export is not known yet."""
        return [vm.key for vm in self.fleet.vms.values()
                if (vm.state.healthy or vm.key == me) and self.scraped.get(vm.key, 0.0) <= moment]


def look_of(series: Iterable[object], scraped: Iterable[object], at: float | None) -> GroupAnswer:
    """The look from the two answers' results (pure: what BudgetClient.look does after
    asking)."""
    rows = [s for s in series if isinstance(s, dict) and isinstance(s.get("metric"), dict)]
    fleet = FleetBuilder(STALE_AFTER).build(rows, at if at is not None else 0.0)
    busy: dict[VmKey, set[str]] = {}
    for row in rows:
        labels = row["metric"]
        if labels.get("__name__") == BUSY_METRIC and _number(row) == 1:
            busy.setdefault(_key(labels), set()).add(str(labels.get("reason", "")))
    times: dict[VmKey, float] = {}
    for answer in scraped:
        if isinstance(answer, dict) and isinstance(answer.get("metric"), dict):
            value = _number(answer)
            key = _key(answer["metric"])
            if value is not None:
                times[key] = max(value, times.get(key, 0.0))
    return GroupAnswer(fleet, {k: frozenset(v) for k, v in busy.items()}, times, at)


@dataclass(frozen=True)
class Count:
    """The group as this VM's early approval would find it."""

    group: GroupLabels
    limit: int
    busy: tuple[tuple[str, str], ...]  # (VM, why), this VM left out
    taking: int  # VMs of the group the approval takes down (this one, and any other listed)
    problem: str | None = None  # why the budget cannot be told
    claiming: tuple[str, ...] = ()  # the VMs among them whose agents are claiming too

    @property
    def within(self) -> bool:
        return self.problem is None and len(self.busy) + self.taking <= self.limit

    def words(self) -> str:
        """``1 of 1 in ss-web busy (web-0: event Started)``."""
        if self.problem is not None:
            return self.problem
        text = f"{len(self.busy)} of {self.limit} in {self.group.name} busy"
        if self.busy:
            named = "; ".join(f"{vm}: {why}" for vm, why in self.busy[:_SHOWN])
            text += f" ({named}{'; ...' if len(self.busy) > _SHOWN else ''})"
        if self.taking > 1:
            text += f"; approving takes {self.taking} VMs of it down at once"
        return text


def count(look: GroupAnswer, group: GroupLabels, *, me: VmKey, limit: int,
          resources: Iterable[str]) -> Count:
    """How many VMs of ``group`` are unavailable besides ``me``, and how many approving an
    event listing ``resources`` takes down."""
    members = {key: vm for key, vm in look.fleet.vms.items() if key != me}
    why: dict[VmKey, str] = {}
    for key, vm in members.items():
        if not vm.state.healthy:
            why[key] = vm.state.value
        elif reasons := look.busy.get(key):
            why[key] = ", ".join(_BUSY.get(r, r) for r in sorted(reasons))
    for event in look.fleet.events:
        if not (event.is_started or event.approved_by):
            continue
        state = "event Started" if event.is_started else "approved, not started yet"
        for key, vm in members.items():
            if key not in why and any(is_this_vm(r, vm.name) for r in event.resources):
                why[key] = state
    listed = list(resources)
    taking = sum(1 for key, vm in members.items() if key not in why
                 and any(is_this_vm(r, vm.name) for r in listed))
    taking += any(is_this_vm(r, me.vm_name) for r in listed)
    problem = None
    if not look.fleet.remembers:
        problem = ("Prometheus does not have setui's recording rules (contrib/prometheus/"
                   "setui-rules.yml): a VM whose agent stopped cannot be counted")
    elif me not in look.scraped:
        problem = ("this VM's own series are not in Prometheus (is this agent's --metrics "
                   "scraped?): the other VMs could not see it approve")
    busy = tuple(sorted((key.vm_name, text) for key, text in why.items()))
    claiming = tuple(sorted(key.vm_name for key in members
                            if "approving" in look.busy.get(key, ())))
    return Count(group, limit, busy, taking, problem, claiming)


class BudgetClient:
    """Asks one Prometheus about groups; one question at a time (from threads)."""

    def __init__(self, client: PrometheusClient) -> None:
        self.client = client
        self._lock = threading.Lock()

    def look(self, group: GroupLabels) -> GroupAnswer:
        """The group now; PrometheusError (in words) when Prometheus cannot say."""
        with self._lock:
            series = self.client.query(series_query(group))
            scraped = self.client.query(scraped_query(group))
        at = series.evaluated_at if series.evaluated_at is not None else scraped.evaluated_at
        return look_of(series.result, scraped.result, at)

    def close(self) -> None:
        self.client.close()
