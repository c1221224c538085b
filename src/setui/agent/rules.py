"""Which rule of the policy an event falls under: the first that matches, or none."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from fnmatch import fnmatchcase

from setui.agent.policy import Rule
from setui.core.model import Event, EventStatus, EventType

__all__ = ["first_match", "matches", "same_vm"]


def _others(event: Event, vm_name: str) -> bool:
    """Whether the event lists a VM other than this one."""
    return any(not same_vm(r, vm_name) for r in event.resources)


def matches(rule: Rule, event: Event, *, vm_name: str, now: datetime) -> bool:
    """Every condition the rule states holds for ``event`` now; an unknown value (no
    DurationInSeconds, no NotBefore) never satisfies a condition on it."""
    if rule.event_types is not None and event.event_type.value not in rule.event_types:
        return False
    if rule.event_sources is not None and (
            event.source is None or event.source.value not in rule.event_sources):
        return False
    if rule.this_vm is not None and event.affects(vm_name) != rule.this_vm:
        return False
    if rule.other_vms is not None and _others(event, vm_name) != rule.other_vms:
        return False
    if rule.min_duration is not None or rule.max_duration is not None:
        duration = event.duration
        if duration is None or duration < 0:
            return False
        if rule.min_duration is not None and duration < rule.min_duration:
            return False
        if rule.max_duration is not None and duration > rule.max_duration:
            return False
    if rule.not_before_within is not None:
        if event.not_before is None:
            return False
        if (event.not_before - now).total_seconds() > rule.not_before_within:
            return False
    return rule.resource is None or any(
        fnmatchcase(r.casefold(), rule.resource.casefold()) for r in event.resources)


def first_match(rules: Sequence[Rule], event: Event, *, vm_name: str,
                now: datetime) -> Rule | None:
    return next((r for r in rules if matches(r, event, vm_name=vm_name, now=now)), None)


def same_vm(resource: str, vm_name: str) -> bool:
    """Whether ``resource`` names this VM, as the model compares names."""
    probe = Event("", EventType.FREEZE, EventStatus.SCHEDULED, (resource,), None)
    return probe.affects(vm_name)
