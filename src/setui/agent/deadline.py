"""The time a hook has: NotBefore, in its environment and as its time limit.

A drain that outlives the notice is cut by the platform anyway, mid-way and unannounced;
so a ``prepare`` hook is told its deadline (``SETUI_DEADLINE``, ``SETUI_SECONDS_LEFT``)
and stopped ``deadline_margin`` seconds before it, where the agent can still say so. The
time left is counted in the service's clock (the monitor's ``now``), the one NotBefore is
written in.

Only an event that is still coming has a deadline: a started one has no NotBefore, and a
``recover`` runs once the event is over. Then both variables are empty (the contrib
hooks read an empty value as "started: no time left") and the hook keeps its own timeout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from setui.core.model import Event
from setui.core.timefmt import iso, stamp

__all__ = ["MIN_HOOK_SECONDS", "Deadline", "Limit", "deadline_of", "limit_of"]

# Less than this after the margin, a prepare hook is not started: it could do nothing
# useful, and killing it at once would look like its own failure.
MIN_HOOK_SECONDS = 1.0


@dataclass(frozen=True)
class Deadline:
    """An event's NotBefore and the seconds left to it (None: it has none)."""

    not_before: datetime | None
    seconds_left: float | None  # never negative

    def environment(self) -> dict[str, str]:
        """``SETUI_DEADLINE`` (ISO 8601 UTC) and ``SETUI_SECONDS_LEFT`` (whole seconds,
        rounded down); both empty when the event has no deadline."""
        if self.not_before is None or self.seconds_left is None:
            return {"SETUI_DEADLINE": "", "SETUI_SECONDS_LEFT": ""}
        return {"SETUI_DEADLINE": iso(self.not_before) or "",
                "SETUI_SECONDS_LEFT": str(math.floor(self.seconds_left))}


def deadline_of(event: Event, step: str, now: datetime) -> Deadline:
    """The deadline a hook of ``step`` has for ``event`` at ``now``: NotBefore while the
    event is still Scheduled, none for a started event or a recover."""
    if step == "recover" or event.is_started or event.not_before is None:
        return Deadline(None, None)
    return Deadline(event.not_before, max(0.0, (event.not_before - now).total_seconds()))


@dataclass(frozen=True)
class Limit:
    """How long a hook may run: ``seconds``, and why (``by_deadline``: the deadline less
    the margin, shorter than the hook's own timeout). ``seconds`` is None when there is
    no time to start it at all."""

    seconds: float | None
    by_deadline: bool
    words: str = ""  # the deadline in words, for what the agent says when it cuts

    @property
    def runs(self) -> bool:
        return self.seconds is not None


def limit_of(timeout: float, deadline: Deadline, margin: float) -> Limit:
    """The hook's timeout clamped to the time left less ``margin``."""
    if deadline.seconds_left is None or deadline.not_before is None:
        return Limit(timeout, False)
    room = deadline.seconds_left - margin
    words = (f"{math.floor(deadline.seconds_left)} s left before NotBefore "
             f"{stamp(deadline.not_before, local=False)}, less deadline_margin {margin:g} s")
    if room >= timeout:
        return Limit(timeout, False, words)
    if room < MIN_HOOK_SECONDS:
        return Limit(None, True, words)
    return Limit(room, True, words)
