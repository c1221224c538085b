"""The tries of one approval as they happen, and what they came to.

Each try either sends the POST or is held (the document could not be read again to
check the event before it), and a sent try is answered, or fails before a byte of it
left (it cannot have arrived), or fails after (it may have: a timeout, a connection lost
before any answer, an interruption). What the approval came to follows from that alone:
approved when a try was answered 2xx; unknown when none was and a try may have arrived;
failed otherwise. The log of the tries goes into the outcome's audit record, so no try
vanishes from the story.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from setui.core.errors import ImdsError
from setui.core.textsafe import printable
from setui.store import APPROVED, FAILED, UNKNOWN

__all__ = ["MAX_LOGGED", "Tries", "unread"]

MAX_LOGGED = 20  # tries kept in the record: the first and the last half of these
_TEXT = 300  # characters of a try's error kept in the record


class Tries:
    """What the tries of one approval came to so far (see the module docstring)."""

    def __init__(self, mono: Callable[[], float] = time.monotonic) -> None:
        self._mono = mono
        self.started = mono()
        self.log: list[dict[str, Any]] = []
        self.sent = 0  # POSTs sent (or begun)
        self.maybe: list[tuple[int, str]] = []  # (try, why) of the tries that may have arrived
        self.in_flight = False  # a POST is under way now
        self.status: int | None = None  # the accepting answer's
        self.latency: float | None = None  # the accepting try's

    @property
    def count(self) -> int:
        """Tries made, held ones included (the next is number ``count + 1``)."""
        return len(self.log)

    @property
    def elapsed(self) -> float:
        return self._mono() - self.started

    def sending(self) -> None:
        """A POST is about to go: from now until it ends it may arrive."""
        self.sent += 1
        self.in_flight = True

    def accepted(self, status: int, latency: float) -> None:
        self.in_flight = False
        self.status, self.latency = status, latency
        self.log.append({"try": self.count + 1, "status": status,
                         "latency_ms": round(latency * 1000, 1)})

    def failed(self, error: ImdsError | Exception) -> None:
        """The POST under way failed; ``error`` says whether it may still have arrived
        (anything but an ImdsError is setui's own failure: who knows what left)."""
        self.in_flight = False
        maybe = error.may_have_arrived if isinstance(error, ImdsError) else True
        entry: dict[str, Any] = {"try": self.count + 1, "status": _status(error),
                                 "kind": _kind(error), "error": _message(error)[:_TEXT]}
        if maybe:
            entry["may_have_arrived"] = True
            self.maybe.append((self.count + 1, _words(error)))
        self.log.append(entry)

    def held(self, why: str) -> None:
        """This try sent nothing: the event could not be checked before it."""
        self.log.append({"try": self.count + 1, "status": None, "held": why[:_TEXT]})

    def interrupted(self) -> None:
        """Stopped from outside: a POST under way when it came may have arrived."""
        if self.in_flight:
            self.in_flight = False
            self.maybe.append((self.count + 1, "interrupted while it was under way"))
            self.log.append({"try": self.count + 1, "status": None, "kind": "interrupted",
                             "may_have_arrived": True})

    def result(self) -> str:
        """:data:`~setui.store.APPROVED`, :data:`~setui.store.UNKNOWN` or
        :data:`~setui.store.FAILED`, from the tries so far."""
        if self.status is not None:
            return APPROVED
        return UNKNOWN if self.maybe else FAILED

    def said(self) -> str:
        """"2 tries in 0.6 s", for the messages."""
        return f"{self.count} tr{'ies' if self.count != 1 else 'y'} in {self.elapsed:.1f} s"

    def unknown(self) -> str:
        """Why the outcome is unknown: the first try that may have arrived, in words."""
        number, why = self.maybe[0]
        return (f"outcome unknown: try {number} of {self.sent} may have reached the service "
                f"({why}) and no answer says what became of it")

    def told(self, why: str = "") -> str | None:
        """What the approval came to in words (None: approved), for the outcome's
        record: the last try's failure and ``why`` it was the last; an unknown outcome
        first says which try may have arrived."""
        result = self.result()
        if result == APPROVED:
            return None
        last = self.log[-1]
        said = str(last.get("held") or last.get("error") or last.get("kind"))
        why = f" (approval {why})" if why else ""
        if result == FAILED:
            return said + why
        if last.get("try") == self.maybe[0][0]:  # the one that may have arrived was the last
            return self.unknown() + why
        status = f"HTTP {last['status']}, " if last.get("status") else ""
        return f"{self.unknown()}; then try {last['try']}: {status}{said}{why}"

    def recorded_status(self) -> int | None:
        """The status the outcome's record keeps: the accepting answer's; for a
        failure, the last answer's; none when the outcome is unknown (no answer tells)."""
        if self.result() == FAILED:
            return next((t["status"] for t in reversed(self.log) if t.get("status")), None)
        return self.status

    def details(self, ending: str) -> dict[str, Any]:
        """The outcome record's part: how the tries ended, what the approval came to,
        the POSTs sent, the time taken and what each try came to."""
        logged = self.log
        if len(logged) > MAX_LOGGED:
            half = MAX_LOGGED // 2
            logged = [*logged[:half], {"not_listed": len(logged) - MAX_LOGGED},
                      *logged[-half:]]
        return {"ending": ending, "outcome": self.result(), "attempts": self.sent,
                "elapsed_ms": round(self.elapsed * 1000, 1), "tries": logged}


def _status(error: BaseException) -> int | None:
    return error.status if isinstance(error, ImdsError) else None


def _kind(error: BaseException) -> str:
    return error.kind if isinstance(error, ImdsError) else "error"


def _message(error: BaseException) -> str:
    if not isinstance(error, ImdsError):
        return f"{type(error).__name__}: {error}"
    return error.message or str(error)


def _words(error: BaseException) -> str:
    """A try's failure in words, its HTTP status first when it had one."""
    status = _status(error)
    return f"HTTP {status}, {_message(error)}" if status else _message(error)


def unread(problem: ImdsError | None) -> str:
    """Why a send could not be checked: the document could not be read again."""
    said = problem.message if problem is not None else "no document"
    return f"the document could not be read again just before sending ({printable(said, 200)})"
