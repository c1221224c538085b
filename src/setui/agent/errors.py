"""The agent's errors, said without flooding and told when they last.

A failure that repeats (a store that cannot be written, a textfile that cannot be
replaced, the event loop's own complaints) would say a line per poll, thousands of lines
that bury the first one; so each kind of error is said by setui.system.logs' one rule: at
once the first time, then once per ``window`` (a minute) with how many more there were.
The lines are the agent's own records (``agent: error``), not log lines: they go where
its decisions go, in the same format, JSON included. A kind that keeps failing for a
window is an error state: told once (the agent notifies through the
policy's URLs), and told again when it works again: when the caller says so, or after
two windows without an error of it. Kinds that already speak for themselves (the
connection's state, the history's recording) are only tracked.

Plain state, no I/O: the agent prints and notifies what it returns. ``state`` is what a
client of the agent could be shown; :meth:`AgentErrors.acting` what keeps the agent from
acting now (``/healthz`` says it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from setui.store.errors import StoreError
from setui.system.logs import WINDOW, Limiter

__all__ = ["WINDOW", "WORK", "AgentErrors", "ErrorReports", "Failing", "StoreFault",
           "acting_kind", "in_words"]

# WINDOW (setui.system.logs: a minute between two lines of one kind) is also how long a kind
# keeps failing before it is told.
# The kinds that stop the agent acting: its work at each poll (deciding, keeping what it
# decided, checking holds), and the steps of one event.
WORK = "the agent's work"
_STEPS = "the steps of event "


def acting_kind(event_id: str) -> str:
    """The kind of the errors of one event's steps."""
    return f"{_STEPS}{event_id}"


class StoreFault(Exception):
    """The store did not take what a step needed it to: nothing was done, and the step is
    tried again at the next poll. The message says what, in words."""


def in_words(exc: BaseException) -> str:
    """An exception in words: a store's own message says what failed and where; anything
    else (a bug) is named by its type."""
    if isinstance(exc, (StoreError, StoreFault)):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


@dataclass
class Failing:
    """A kind of error under way: since when, how often, what it said last."""

    kind: str
    since: float  # the monotonic clock's
    last: str
    last_at: float
    count: int = 1
    told: bool = False  # the error state was told (notified)
    quiet: bool = False  # its caller says it: its end is said only if it was told

    def lasted(self, now: float) -> float:
        return now - self.since


@dataclass(frozen=True)
class ErrorReports:
    """What a turn of the loop owes: lines with counts, error states to tell, and error
    states that are over."""

    lines: tuple[str, ...] = ()
    tell: tuple[Failing, ...] = ()
    over: tuple[Failing, ...] = ()


class AgentErrors:
    """``failed()`` and ``ok()`` as things happen; ``due()`` at every turn of the loop."""

    def __init__(self, *, window: float = WINDOW,
                 mono: Callable[[], float] = time.monotonic) -> None:
        self.window = window
        self.mono = mono
        self.state: dict[str, Failing] = {}
        self._lines: Limiter[str] = Limiter(window=window, mono=mono)

    def failed(self, kind: str, message: str, *, quiet: bool = False) -> str | None:
        """One error of ``kind``; the line to print now, or None when it is counted for
        later (``quiet``: the caller said it its own way)."""
        now = self.mono()
        failing = self.state.get(kind)
        if failing is None:
            self.state[kind] = Failing(kind, now, message, now, quiet=quiet)
        else:
            failing.count += 1
            failing.last, failing.last_at = message, now
        if quiet:
            return None
        held = self._lines.offer(kind, message)
        return None if held is None else message + _more(held)

    def acting(self) -> list[Failing]:
        """The errors that keep the agent from acting now, oldest first: its work at each
        poll, and each event's steps (each ends when it works again)."""
        return sorted((f for f in self.state.values()
                       if f.kind == WORK or f.kind.startswith(_STEPS)),
                      key=lambda f: f.since)

    def ok(self, kind: str) -> Failing | None:
        """``kind`` works again; what it was, when it was failing."""
        self._lines.forget(kind)
        return self.state.pop(kind, None)

    def due(self) -> ErrorReports:
        """The lines owed (a count, once a window), the error states to tell now (a window
        long, not told yet), and those over (two windows without an error)."""
        now = self.mono()
        lines = [message + _more(held) for message, held in self._lines.due()]
        tell: list[Failing] = []
        over: list[Failing] = []
        for failing in list(self.state.values()):
            if now - failing.last_at >= 2 * self.window:
                self._lines.forget(failing.kind)
                over.append(self.state.pop(failing.kind))
            elif not failing.told and failing.lasted(now) >= self.window:
                failing.told = True
                tell.append(failing)
        return ErrorReports(tuple(lines), tuple(tell), tuple(over))


def _more(held: int) -> str:
    """What a line adds for the errors of its kind held back since the last line."""
    if not held:
        return ""
    return f" (and {held} more time{'s' if held != 1 else ''} since the last line about it)"
