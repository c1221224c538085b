"""Which rule of the policy an event falls under: the first that matches, or none; and
why a rule does not match an event, in words (the agent says it when an event it acts on
changes under its rule)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from fnmatch import fnmatchcase

from setui.agent.policy import Rule
from setui.core.model import Event, EventStatus, EventType

__all__ = ["NameUnknown", "first_match", "matches", "mismatch", "needs_vm_name", "same_vm"]


class NameUnknown(Exception):
    """A rule that names this VM (``this_vm``, ``other_vms``) cannot be decided while this
    VM's name is not known; ``rule`` is the first such rule the event could fall under."""

    def __init__(self, rule: Rule) -> None:
        super().__init__(f"rule {rule.name} needs this VM's name, which is not known yet")
        self.rule = rule


def needs_vm_name(rule: Rule) -> bool:
    """Whether the rule's conditions depend on this VM's name."""
    return rule.this_vm is not None or rule.other_vms is not None


def _others(event: Event, vm_name: str) -> bool:
    """Whether the event lists a VM other than this one."""
    return any(not same_vm(r, vm_name) for r in event.resources)


def _listed(values: frozenset[str]) -> str:
    return " or ".join(sorted(values))


def mismatch(rule: Rule, event: Event, *, vm_name: str | None, now: datetime,
             window: bool = True) -> str | None:
    """Why ``rule`` does not match ``event`` now, in words; None when every condition it
    states holds. An unknown value (no DurationInSeconds, no NotBefore) never satisfies a
    condition on it. ``window=False`` leaves out ``not_before_within``: once an event has
    started its NotBefore is gone, and the window was about its approach. Raises
    NameUnknown for a rule that names this VM while ``vm_name`` is None."""
    if rule.event_types is not None and event.event_type.value not in rule.event_types:
        return f"EventType {event.event_type.value} is not {_listed(rule.event_types)}"
    if rule.event_sources is not None and (
            event.source is None or event.source.value not in rule.event_sources):
        source = event.source.value if event.source is not None else "(none)"
        return f"EventSource {source} is not {_listed(rule.event_sources)}"
    if rule.min_duration is not None or rule.max_duration is not None:
        duration = event.duration
        if duration is None or duration < 0:
            return "DurationInSeconds is not known"
        if rule.min_duration is not None and duration < rule.min_duration:
            return f"DurationInSeconds {duration} is below min_duration {rule.min_duration}"
        if rule.max_duration is not None and duration > rule.max_duration:
            return f"DurationInSeconds {duration} is above max_duration {rule.max_duration}"
    if window and rule.not_before_within is not None:
        if event.not_before is None:
            return "it has no NotBefore"
        if (event.not_before - now).total_seconds() > rule.not_before_within:
            return f"NotBefore is more than not_before_within {rule.not_before_within:g} s away"
    if rule.resource is not None and not any(
            fnmatchcase(r.casefold(), rule.resource.casefold()) for r in event.resources):
        return f"no resource matches {rule.resource!r}"
    # Last: the rest decides without this VM's name, which may not be known yet.
    if needs_vm_name(rule) and not vm_name:
        raise NameUnknown(rule)
    if rule.this_vm is not None and event.affects(vm_name) != rule.this_vm:
        return "this VM is not in Resources" if rule.this_vm else "this VM is in Resources"
    if rule.other_vms is not None and _others(event, vm_name or "") != rule.other_vms:
        return "no other VM is in Resources" if rule.other_vms \
            else "another VM is in Resources"
    return None


def matches(rule: Rule, event: Event, *, vm_name: str | None, now: datetime) -> bool:
    """Every condition the rule states holds for ``event`` now (see :func:`mismatch`)."""
    return mismatch(rule, event, vm_name=vm_name, now=now) is None


def first_match(rules: Sequence[Rule], event: Event, *, vm_name: str | None,
                now: datetime) -> Rule | None:
    """The first rule that matches; NameUnknown when the search reaches a rule that names
    this VM whose other conditions hold while the name is not known: a later rule must
    not take an event that an earlier one might be meant for."""
    return next((r for r in rules if matches(r, event, vm_name=vm_name, now=now)), None)


def same_vm(resource: str, vm_name: str | None) -> bool:
    """Whether ``resource`` names this VM, as the model compares names."""
    probe = Event("", EventType.FREEZE, EventStatus.SCHEDULED, (resource,), None)
    return probe.affects(vm_name)
