"""What the agent plans and does for one event, in a few words, from its stored steps.

One home for the wording: ``setui agent`` prints it and the dashboard shows it (for
example ``rule drain: prepare 'drain' running 0:12, approve after prepare``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from setui.agent.policy import Rule
from setui.core.timefmt import clock
from setui.store.agent import RUNNING, SKIPPED, Step

__all__ = ["MATCH", "STEPS", "plan_of", "plan_text"]

MATCH = "match"  # the step row that records which rule an event falls under, and its plan
STEPS = ("prepare", "approve", "recover")
_APPROVE = {"now": "approve at once", "after-prepare": "approve after prepare",
            "before-not-before": "approve {0:g} s before NotBefore"}


def plan_of(rule: Rule) -> str:
    """The rule's plan: ``prepare 'drain', approve after prepare, recover 'undrain'``."""
    pieces = []
    if rule.prepare is not None:
        pieces.append(f"prepare '{rule.prepare.name}'")
    if rule.approve != "never":
        text = _APPROVE[rule.approve].format(rule.approve_before)
        if rule.prepare is not None and rule.approve == "before-not-before":
            text += " if prepare succeeds"
        pieces.append(text)
    if rule.recover is not None:
        pieces.append(f"recover '{rule.recover.name}'")
    if rule.notify:
        pieces.append("notify")
    return ", ".join(pieces) or "observe"


def plan_text(steps: Sequence[Step], *, now: datetime, held: bool = False) -> str:
    """The event's plan with each step's state in place; "" when no rule matched it."""
    match = next((s for s in steps if s.step == MATCH), None)
    if match is None:
        return ""
    if match.state == SKIPPED:  # the event changed under its rule: the agent let go of it
        done = ", ".join(f"{s.step} {s.state}" for s in steps if s.step in STEPS)
        text = (f"rule {match.rule} {match.detail}" + (f"; {done}" if done else "")
                + "; nothing more without a person")
        return f"HELD by a person; {text}" if held else text
    rows = {s.step: s for s in steps}
    pieces = []
    for piece in match.detail.split(", "):
        name = piece.split(" ", 1)[0]
        row = rows.get(name)
        if row is None or name not in STEPS:
            pieces.append(piece)
        elif row.state == RUNNING and row.started is not None:
            pieces.append(f"{piece} running {clock((now - row.started).total_seconds())}")
        else:
            pieces.append(f"{name} {row.state}")
    text = f"rule {match.rule}: " + ", ".join(pieces)
    return f"HELD by a person; {text}" if held else text
