"""What the agent plans and does for one event, in words, from its stored steps.

One home for the wording: ``setui agent`` prints it and the dashboard shows it (for
example ``rule drain: prepare 'drain' running 0:12, approve after prepare``). Each step's
state is said as what it means for the event: a refused early approval is "not approved
early" (the platform starts the event at NotBefore), not a failure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from setui.agent.policy import Rule
from setui.core.timefmt import clock
from setui.store.agent import (
    DONE,
    FAILED,
    INTERRUPTED,
    RUNNING,
    SKIPPED,
    UNKNOWN,
    WAITING,
    Step,
)

__all__ = ["MATCH", "NOT_EARLY", "STEPS", "EventPlan", "StepView", "event_plan", "not_early",
           "plan_of", "plan_text", "plan_words", "step_words"]

MATCH = "match"  # the step row that records which rule an event falls under, and its plan
STEPS = ("prepare", "approve", "recover")
NOT_EARLY = "not approved early"
_APPROVE = {"now": "approve at once", "after-prepare": "approve after prepare",
            "before-not-before": "approve {0:g} s before NotBefore"}
# The approver's refusal of an event that reaches other VMs, under a rule that does not
# say other_vms = true (setui.approval.snapshot.other_vms, the agent's consent words).
_COUNTED = re.compile(r"starts for \d+ other VMs?: ")
_CONSENT = re.compile(r";? *(?:approving )?it needs other_vms = true in the rule"
                      r"(?: \(rule .*? does not say it\))?")


def plan_of(rule: Rule) -> str:
    """The rule's plan: ``prepare 'drain', approve after prepare, recover 'undrain'``."""
    pieces = []
    if rule.prepare is not None:
        pieces.append(f"prepare '{rule.prepare.name}'")
    if rule.approve != "never":
        text = _APPROVE[rule.approve].format(rule.approve_before)
        if rule.prepare is not None and rule.approve == "before-not-before":
            text += " if prepare succeeds"
        if rule.max_unavailable is not None:
            text += f" within max_unavailable {rule.max_unavailable} of its {rule.group}"
        pieces.append(text)
    if rule.recover is not None:
        pieces.append(f"recover '{rule.recover.name}'")
    if rule.notify:
        pieces.append("notify")
    return ", ".join(pieces) or "observe"


def not_early(detail: str) -> str | None:
    """An approval refused because the event also starts for other VMs and the rule does
    not say ``other_vms = true``, as what it means: ``not approved early: it also starts
    for web-1 (other_vms is not set)``. None for any other outcome."""
    reason = detail.removeprefix("refused: ").strip()
    if not detail.startswith("refused: ") or _CONSENT.search(reason) is None:
        return None
    reason = _CONSENT.sub(" (other_vms is not set)", _COUNTED.sub("starts for ", reason), 1)
    return f"{NOT_EARLY}: {reason.strip()}"


def step_words(name: str, piece: str, row: Step | None, now: datetime) -> str:
    """One step of the plan as it stands: ``piece`` (its words in the plan, "prepare
    'drain'") while it has not begun, else what its state means for the event."""
    if row is None:
        return piece
    state, detail = row.state, row.detail.strip()
    if state == RUNNING:
        ran = f" {clock((now - row.started).total_seconds())}" if row.started else ""
        return f"{'approving now' if name == 'approve' else piece + ' running'}{ran}"
    if state == WAITING:
        return f"{name} {detail}" if detail else f"{name} waiting"
    if name != "approve":  # a hook's end, in its own words ("prepare 'drain' exited 0")
        said = detail if detail.startswith(name) else (
            f"{name} {state}" + (f": {detail}" if detail else ""))
        if name == "prepare" and state in (FAILED, SKIPPED, INTERRUPTED):
            said += "; not approved: the platform starts the event at NotBefore"
        return said
    if state == DONE:
        if detail.startswith(("approved", "already approved", "dry run")):
            return detail
        return "approved" + (f" ({detail})" if detail else "")
    if state == FAILED:
        early = not_early(detail)
        if early is not None:
            return early
        return "approval failed" + (f": {detail.removeprefix('refused: ')}" if detail else "")
    if state == UNKNOWN:
        return ("approval outcome unknown (the request may have arrived)"
                + (f": {detail}" if detail else ""))
    if state == SKIPPED:
        if NOT_EARLY in detail:
            return detail
        return f"{NOT_EARLY}" + (f": {detail}" if detail else "")
    return f"{name} {state}" + (f": {detail}" if detail and state == INTERRUPTED else "")


@dataclass(frozen=True)
class StepView:
    """One step of an event's plan: its name ("prepare", "approve", "recover", "notify"),
    its state (None: not begun, or not a step the agent keeps), and its words."""

    name: str
    state: str | None
    words: str
    updated: datetime | None = None


@dataclass(frozen=True)
class EventPlan:
    """The plan for one event: its rule, whether the agent let go of it (the event
    changed under its rule: ``let_go`` says why), and each step."""

    rule: str
    steps: tuple[StepView, ...]
    let_go: str | None = None


def event_plan(steps: Sequence[Step], *, now: datetime) -> EventPlan | None:
    """The event's plan, each step in words; None when no rule matched it."""
    match = next((s for s in steps if s.step == MATCH), None)
    if match is None:
        return None
    rows = {s.step: s for s in steps}
    if match.state == SKIPPED:  # the event changed under its rule: the agent let go of it
        done = tuple(StepView(s.step, s.state, step_words(s.step, s.step, s, now), s.updated)
                     for s in steps if s.step in STEPS)
        return EventPlan(match.rule, done, match.detail)
    views = []
    for piece in match.detail.split(", "):
        name = piece.split(" ", 1)[0]
        row = rows.get(name) if name in STEPS else None
        views.append(StepView(name, row.state if row is not None else None,
                              step_words(name, piece, row, now),
                              row.updated if row is not None else None))
    return EventPlan(match.rule, tuple(views))


def plan_text(steps: Sequence[Step], *, now: datetime, held: bool = False) -> str:
    """The event's plan with each step's state in place; "" when no rule matched it."""
    plan = event_plan(steps, now=now)
    return "" if plan is None else plan_words(plan, held=held)


def plan_words(plan: EventPlan, *, held: bool = False) -> str:
    """An event's plan on one line: ``rule drain: prepare 'drain' exited 0, ...``."""
    if plan.let_go is not None:
        done = ", ".join(s.words for s in plan.steps)
        text = (f"rule {plan.rule} {plan.let_go}" + (f"; {done}" if done else "")
                + "; nothing more without a person")
    else:
        text = f"rule {plan.rule}: " + ", ".join(s.words for s in plan.steps)
    return f"HELD by a person; {text}" if held else text
