"""EventIds as people type them: a unique prefix of at least six characters.

The history and the audit log show ids cut to eight characters; an operator types
those, or the first few characters of a GUID read off another screen. One rule for
every command that accepts an EventId (``approve``, ``history --event``): an exact id
(case ignored) or a prefix that names exactly one id known from the current document
or the store. Anything else is refused with the ids it might have meant.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["MIN_PREFIX", "Resolution", "resolve"]

MIN_PREFIX = 6
_SUGGESTED = 5


@dataclass(frozen=True)
class Resolution:
    """The full id a typed one stands for, or why there is none (for people)."""

    typed: str
    event_id: str | None
    problem: str | None = None  # whole sentences: a caller may add its own after it


def _distinct(ids: Iterable[str]) -> list[str]:
    seen: dict[str, str] = {}
    for event_id in ids:
        seen.setdefault(event_id.casefold(), event_id)
    return list(seen.values())


def _did_you_mean(typed: str, ids: list[str], matching: list[str]) -> str:
    """The end of the sentence: the ids ``typed`` may have meant (those it starts, else
    the nearest: a typo) as a question, or a full stop."""
    pool = matching
    if not pool:
        width = max(len(typed), MIN_PREFIX)
        heads = {i.casefold()[:width]: i for i in reversed(ids)}
        near = difflib.get_close_matches(typed.casefold(), list(heads), n=_SUGGESTED,
                                         cutoff=0.75)
        pool = [heads[h] for h in near]
    if not pool:
        return "."
    shown = ", ".join(pool[:_SUGGESTED])
    more = f" and {len(pool) - _SUGGESTED} more" if len(pool) > _SUGGESTED else ""
    return f"; did you mean {shown}{more}?"


def resolve(typed: str, current: Iterable[str], known: Iterable[str] = ()) -> Resolution:
    """Resolve ``typed`` against the current document's ids (first) and the ids the
    store knows; never a guess: one candidate or a refusal."""
    text = typed.strip()
    ids = _distinct([*current, *known])
    folded = text.casefold()
    exact = [i for i in ids if i.casefold() == folded]
    if exact:
        return Resolution(typed, exact[0])
    matching = [i for i in ids if i.casefold().startswith(folded)] if text else []
    if len(text) < MIN_PREFIX:
        return Resolution(typed, None, f"{text!r} is too short to name an event: give the "
                          f"full EventId or at least {MIN_PREFIX} of its first characters"
                          + _did_you_mean(text, ids, matching))
    if len(matching) == 1:
        return Resolution(typed, matching[0])
    if matching:
        return Resolution(typed, None, f"{text!r} is the start of {len(matching)} EventIds; "
                          "give more characters" + _did_you_mean(text, ids, matching))
    return Resolution(typed, None, f"no event with an EventId starting {text!r} is in the "
                      "current document or the history" + _did_you_mean(text, ids, []))
