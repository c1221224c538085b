"""What the hooks beside this file share: the event they run for, the time left before it,
a command bounded by that time, and the events that hold a change in place.

Python 3.8 or newer and its standard library only: what a VM has. setui agent runs a hook
with the event in SETUI_* variables (and as JSON on stdin, which these hooks do not read).
Keep this file in the same directory as the hooks, owned by root and writable by root
alone, like them.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import NoReturn, TypeVar

EXIT_OK = 0
EXIT_FAILED = 1  # a command failed; its own output, above the hook's last line, says why
EXIT_USAGE = 2  # an option, a variable or a missing tool: fix the setup, then run it again
EXIT_DEADLINE = 3  # the work did not finish before the event's NotBefore

STEPS = ("prepare", "recover")
EVENT_TYPES = ("Freeze", "Reboot", "Redeploy", "Preempt", "Terminate")
_EVENT_ID = re.compile(r"[0-9A-Za-z-]{1,64}")  # a GUID, as the service writes it
_EVENT_TYPE = re.compile(r"[A-Za-z]{1,32}")
NAME = os.path.basename(sys.argv[0]) or "hook"


class HookError(Exception):
    """What stops a hook: a message for the operator and the exit status that goes with it."""

    def __init__(self, message: str, status: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def shown(text: str, limit: int = 80) -> str:
    """Text from the environment or a command, quoted and escaped: never a control
    character on the operator's terminal or in the agent's log, never a page of it."""
    return ascii(text if len(text) <= limit else text[:limit] + "...")


def say(text: str) -> None:
    print(f"{NAME}: {text}", flush=True)


# -- the event ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Event:
    event_id: str
    event_type: str
    step: str


def event_from(environ: Mapping[str, str], step: str) -> Event:
    """The event setui agent runs this hook for, checked; HookError (usage) if the variables
    are missing or not what they should be."""
    event_id = environ.get("SETUI_EVENT_ID", "")
    if not _EVENT_ID.fullmatch(event_id):
        why = "is not set" if not event_id else f"is {shown(event_id)}, not an EventId"
        raise HookError(f"SETUI_EVENT_ID {why}: this hook is run by setui agent, or by hand "
                        "with SETUI_EVENT_ID (and SETUI_SECONDS_LEFT for prepare) set",
                        EXIT_USAGE)
    event_type = environ.get("SETUI_EVENT_TYPE", "")
    if not _EVENT_TYPE.fullmatch(event_type):
        event_type = "unknown"  # never one that --skip-types names
    told = environ.get("SETUI_HOOK")
    if told and told != step:
        # The policy's words run this hook as one step, its argument says another.
        raise HookError(f"setui agent runs this as its {shown(told)} hook, but its argument "
                        f"says {step}: fix the policy", EXIT_USAGE)
    return Event(event_id, event_type, step)


def event_types(text: str) -> list[str]:
    """``--skip-types Freeze,Redeploy``: the types named, refused when one is not a type
    (a typo would otherwise drain a Freeze)."""
    known = {t.casefold(): t for t in EVENT_TYPES}
    named = [word.strip() for word in text.split(",") if word.strip()]
    unknown = [word for word in named if word.casefold() not in known]
    if unknown or not named:
        raise argparse.ArgumentTypeError(
            f"not an event type: {shown(', '.join(unknown) or text)} "
            f"(one or more of {', '.join(EVENT_TYPES)}, with commas)")
    return [known[word.casefold()] for word in named]


# -- the time left --------------------------------------------------------------------------
class Deadline:
    """The event's NotBefore as a point on this process's monotonic clock, so that the VM's
    clock being stepped (as it is after a freeze) moves nothing."""

    def __init__(self, seconds_left: float, source: str) -> None:
        self._end = time.monotonic() + max(0.0, seconds_left)
        self.source = source

    def left(self) -> float:
        return max(0.0, self._end - time.monotonic())


def deadline_from(environ: Mapping[str, str], now: datetime | None = None) -> Deadline:
    """The time left before the event, from what setui agent says, best first:
    SETUI_SECONDS_LEFT (counted in the service's clock), SETUI_DEADLINE (ISO 8601 UTC),
    SETUI_NOT_BEFORE (ISO 8601 UTC; RFC 1123, as the service writes it, from a setui before
    times were written one way); the last two against this VM's clock. An empty value
    means the event has no NotBefore: it has started, no time is left.
    """
    now = now or datetime.now(timezone.utc)
    for name, parse in (("SETUI_SECONDS_LEFT", _seconds), ("SETUI_DEADLINE", _iso),
                        ("SETUI_NOT_BEFORE", _iso_or_rfc1123)):
        text = environ.get(name)
        if text is None:
            continue
        if not text.strip():
            return Deadline(0.0, f"{name} is empty: the event has started")
        value = parse(text.strip())
        if value is None:
            raise HookError(f"{name} is {shown(text)}, which is not {_SHAPES[name]}",
                            EXIT_USAGE)
        left = value if isinstance(value, float) else (value - now).total_seconds()
        return Deadline(left, name)
    raise HookError("none of SETUI_SECONDS_LEFT, SETUI_DEADLINE or SETUI_NOT_BEFORE is set: "
                    "the time left before the event is not known", EXIT_USAGE)


_SHAPES = {"SETUI_SECONDS_LEFT": "a whole number of seconds",
           "SETUI_DEADLINE": "a UTC time like 2024-05-14T09:30:00Z",
           "SETUI_NOT_BEFORE": "a UTC time like 2024-05-14T09:30:00Z (or Mon, 11 Apr 2022 "
                               "22:26:58 GMT)"}


def _seconds(text: str) -> float | None:
    return float(text) if text.isdigit() and len(text) <= 9 else None


def _iso(text: str) -> datetime | None:
    for shape in ("%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M:%S.%f%z"):
        try:
            return datetime.strptime(text, shape)
        except ValueError:
            continue
    return None


def _iso_or_rfc1123(text: str) -> datetime | None:
    return _iso(text) or _rfc1123(text)


def _rfc1123(text: str) -> datetime | None:
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):  # Python before 3.10 fails with TypeError
        return None
    return when if when is not None and when.tzinfo is not None else None


# -- commands -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Ran:
    status: int | None  # None: stopped at its time limit
    seconds: float
    output: str = ""

    @property
    def ok(self) -> bool:
        return self.status == 0


def run(argv: list[str], *, timeout: float | None, capture: bool = False,
        limit: int = 1 << 20) -> Ran:
    """``argv`` without a shell, shown first; its output passes through to ours (stdout
    kept instead, up to ``limit`` bytes, when ``capture``); stopped at ``timeout`` seconds.
    A command that cannot be started is a HookError (usage)."""
    say(f"$ {shlex.join(argv)}")
    began = time.monotonic()
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, timeout=timeout,
                              stdout=subprocess.PIPE if capture else None)
    except subprocess.TimeoutExpired:
        return Ran(None, time.monotonic() - began)
    except OSError as exc:
        raise HookError(f"cannot run {shown(argv[0])}: {exc.strerror or exc}",
                        EXIT_USAGE) from None
    output = (done.stdout or b"")[:limit].decode("utf-8", "replace")
    return Ran(done.returncode, time.monotonic() - began, output)


# -- what holds a change in place -----------------------------------------------------------
def holds_in(text: str) -> list[str]:
    """The EventIds written in a marker (commas or lines between them), in order; anything
    else in it is ignored."""
    return [word for word in re.split(r"[\s,]+", text) if _EVENT_ID.fullmatch(word)]


def listed(holds: Iterable[str]) -> str:
    return ", ".join(holds) or "none"


@contextlib.contextmanager
def one_at_a_time() -> Iterator[None]:
    """No other run of this hook on this VM is inside at the same time: the agent runs two
    events' hooks side by side, and each reads the marker, changes it and writes it back.
    The lock is taken on the hook's own file (flock needs only read access), so it needs
    no place to write; it goes with the process, however that ends."""
    with open(os.path.realpath(sys.argv[0]), "rb") as own:
        fcntl.flock(own.fileno(), fcntl.LOCK_EX)
        yield


# -- the whole run --------------------------------------------------------------------------
def add_common_options(parser: argparse.ArgumentParser, *, margin: float) -> None:
    parser.add_argument("step", choices=STEPS,
                        help="prepare before the event, recover after it")
    parser.add_argument("--skip-types", metavar="TYPES", type=event_types, default=[],
                        help="event types to leave alone, with commas (e.g. Freeze: a pause "
                             "of seconds that keeps memory); the hook then exits 0 at once")
    parser.add_argument("--margin", metavar="SECONDS", type=float, default=margin,
                        help=f"finish this long before the event (default {margin:g}; keep "
                             "it above the rule's deadline_margin)")


Setup = TypeVar("Setup")


def main(parser: argparse.ArgumentParser, check: Callable[[argparse.Namespace], Setup],
         act: Callable[[Setup, Event], int], *, passes_on: bool = False) -> NoReturn:
    """Parse (with ``passes_on``, the words after ``--`` are ``args.passed_on``); find the
    event; ``check`` the setup (before any skip: a broken setup is found at the first
    event, not at the first one that matters); skip what ``--skip-types`` names; ``act``.
    Exits with its status, or with a HookError's message and status."""
    words = sys.argv[1:]
    cut = words.index("--") if "--" in words else len(words)
    args = parser.parse_args(words[:cut])
    args.passed_on = words[cut + 1:]
    if args.passed_on and not passes_on:
        parser.error("nothing is taken after --")
    if not 0 <= args.margin <= 3600:
        parser.error("--margin must be 0 to 3600 seconds")
    try:
        event = event_from(os.environ, args.step)
        setup = check(args)
        if event.event_type in args.skip_types:
            say(f"{event.event_type} {event.event_id}: skipped (--skip-types "
                f"{','.join(args.skip_types)}); nothing changed")
            sys.exit(EXIT_OK)
        sys.exit(act(setup, event))
    except HookError as exc:
        print(f"{NAME}: {exc.message}", file=sys.stderr, flush=True)
        sys.exit(exc.status)
