"""Pure formatting for the dashboard: countdowns, impact, times, resources, urgency.

Nothing here touches a running app, so every rule can be tested on its own. Urgency is
always carried by words and symbols (``!!``, ``!``, ``▶``, ``▲``) as well as by the
styles of :class:`Palette`, so a terminal without colour (``NO_COLOR``, ``setui-mono``)
reads the same.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import IntEnum
from typing import NamedTuple

from textual.notifications import SeverityLevel

from setui.core import timefmt
from setui.core.health import ConnectionState, Health, PollResult
from setui.core.model import Event, is_this_vm
from setui.core.textsafe import printable
from setui.core.timefmt import time_of_day, utc_time
from setui.core.tracker import Change, ChangeKind

__all__ = [
    "CRITICAL_SECONDS",
    "THIS_VM",
    "WARNING_SECONDS",
    "Announcement",
    "Countdown",
    "Palette",
    "Urgency",
    "announcement",
    "approved_label",
    "combine",
    "connection_announcement",
    "countdown",
    "countdown_to",
    "impact",
    "poll_report",
    "resources_summary",
    "safe",
]

WARNING_SECONDS = 5 * 60  # under five minutes to NotBefore: warning
CRITICAL_SECONDS = 60  # under one minute: critical
THIS_VM = "▲"  # marks this VM among an event's resources, in the table and the timeline


class Urgency(IntEnum):
    """How loudly a row speaks; the symbol says it without colour."""

    CALM = 0
    WARNING = 1
    CRITICAL = 2
    STARTED = 3

    @property
    def symbol(self) -> str:
        return {Urgency.CALM: "", Urgency.WARNING: "!", Urgency.CRITICAL: "!!",
                Urgency.STARTED: "▶"}[self]


class Countdown(NamedTuple):
    text: str  # without the symbol: "T-14:32", "waiting", "started 0:42 ago"
    urgency: Urgency
    short: str = ""  # for 80 columns, where it differs: "0:42 ago" (the ▶ says started)

    def label(self, loud: bool = True, *, short: bool = False) -> str:
        """The text with its urgency symbol in front (``loud=False``: no symbol)."""
        text = (self.short or self.text) if short else self.text
        # Short started text needs its ▶ even on a quiet row: without it "0:42 ago" says
        # nothing.
        keep = loud or (short and self.urgency is Urgency.STARTED)
        symbol = self.urgency.symbol if keep else ""
        return f"{symbol} {text}" if symbol else text


@functools.lru_cache(maxsize=4096)
def _printable(text: str, limit: int | None) -> str:
    return printable(text, limit)


def safe(text: object, limit: int | None = None) -> str:
    """Network text on one line, controls escaped, cut to ``limit``: the rule of
    :func:`setui.core.textsafe.printable`. The dashboard shows the same types, statuses and
    names every second; short strings are escaped once and remembered."""
    if isinstance(text, str) and len(text) <= 256:
        return _printable(text, limit)
    return printable(text, limit)


def countdown(event: Event, now: datetime, *, started_at: datetime | None = None,
              started_exact: bool = True) -> Countdown:
    """The countdown cell of an event.

    ``started_at`` is when this session first saw it Started; ``started_exact`` is False
    when it was already Started in the first document seen (it started earlier).
    """
    if event.is_started:
        if started_at is None:
            return Countdown("started", Urgency.STARTED)
        ago = f"{'' if started_exact else '≥'}{timefmt.clock((now - started_at).total_seconds())}"
        return Countdown(f"started {ago} ago", Urgency.STARTED, f"{ago} ago")
    if not event.is_scheduled:
        return Countdown(f"status {safe(event.status, 20)}", Urgency.CALM)
    if event.not_before is None:
        return Countdown("no NotBefore", Urgency.CALM)
    return countdown_to(event.not_before, now)


def countdown_to(not_before: datetime, now: datetime) -> Countdown:
    """``T-4:59`` and how urgent that is; ``waiting`` once NotBefore has come (the
    service may start the event any moment): for this VM's events and the fleet's."""
    remaining = math.ceil((not_before - now).total_seconds())
    if remaining <= 0:
        return Countdown("waiting", Urgency.CRITICAL)
    if remaining < CRITICAL_SECONDS:
        level = Urgency.CRITICAL
    elif remaining < WARNING_SECONDS:
        level = Urgency.WARNING
    else:
        level = Urgency.CALM
    return Countdown(timefmt.countdown(remaining), level)


def impact(event: Event) -> str:
    """``5 s``, ``2 min``, ``unknown`` (-1 or absent), ``none`` (0)."""
    return event.impact


def resources_summary(resources: Sequence[str], vm_name: str | None, limit: int = 18) -> str:
    """``▲ web-0 +2`` when this VM is among them; else the names, or ``5 VMs``."""
    if type(resources) is tuple and len(resources) <= 64:  # an event's, asked every second
        return _resources_summary(resources, vm_name, limit)
    return _resources_summary.__wrapped__(resources, vm_name, limit)


@functools.lru_cache(maxsize=1024)
def _resources_summary(resources: Sequence[str], vm_name: str | None, limit: int) -> str:
    if not resources:
        return "none listed"
    mine = [r for r in resources if is_this_vm(r, vm_name)]
    others = len(resources) - len(mine)
    if mine:
        suffix = f" +{others}" if others else ""
        return f"{THIS_VM} {safe(mine[0], max(limit - 2 - len(suffix), 4))}{suffix}"
    names = ", ".join(safe(r, 40) for r in resources)
    if len(names) <= limit:
        return names
    if len(resources) == 1:
        return safe(resources[0], limit)
    suffix = f" +{len(resources) - 1}"
    if limit - len(suffix) >= 6:
        return safe(resources[0], limit - len(suffix)) + suffix
    return f"{len(resources)} VMs"


def approved_label(at: datetime, user: str, *, short: bool = False) -> str:
    """``approved 10:02:11 by alice`` (UTC); ``short``: ``✓ 10:02:11``."""
    when = utc_time(at)
    if short:
        return f"✓ {when}"
    return f"approved {when} by {safe(user, 24)}"


@dataclass(frozen=True)
class Palette:
    """Rich style strings for rows and lanes, from the current theme's variables.

    Built from ``App.theme_variables`` (setui's ``$setui-*`` variables, see
    ``setui.ui.themes``); an unusable value falls back to a plain text style.
    """

    urgent: str = "bold"
    soon: str = ""
    started: str = "bold reverse"
    secondary: str = "dim"
    gone: str = "dim italic"
    ok: str = ""
    alarm: str = "bold reverse"
    muted: str = "dim"
    accent: str = "bold"

    @classmethod
    def from_variables(cls, variables: Mapping[str, str]) -> Palette:
        def color(name: str) -> str:
            value = (variables.get(name) or "").strip()
            # "#RRGGBB" or "#RRGGBBAA": Rich wants the first seven characters.
            if value.startswith("#") and len(value) in (7, 9):
                try:
                    int(value[1:], 16)
                except ValueError:
                    return ""
                return value[:7]
            return ""

        def style(name: str, default: str) -> str:
            value = (variables.get(name) or "").strip()
            words = [w for w in value.split() if w in _STYLE_WORDS]
            if value == "none":
                return ""
            return " ".join(words) if words else default

        def both(name: str, default_style: str) -> str:
            return " ".join(p for p in (style(f"{name}-style", default_style), color(name)) if p)

        alarm_fg, alarm_bg = color("setui-alarm-foreground"), color("setui-alarm-background")
        alarm = style("setui-alarm-style", "bold")
        alarm += f" {alarm_fg} on {alarm_bg}" if alarm_fg and alarm_bg else " reverse"
        secondary = both("setui-secondary-row", "")
        return cls(
            urgent=both("setui-urgent", "bold"),
            soon=both("setui-soon", ""),
            started=both("setui-started", "bold reverse"),
            secondary=secondary or "dim",
            gone=both("setui-gone", "italic") or "dim italic",
            ok=color("setui-ok"),
            alarm=alarm.strip(),
            muted=color("text-muted") or secondary or "dim",
            accent=" ".join(p for p in ("bold", color("accent")) if p),
        )

    def for_urgency(self, level: Urgency) -> str:
        return {Urgency.CALM: "", Urgency.WARNING: self.soon, Urgency.CRITICAL: self.urgent,
                Urgency.STARTED: self.started}[level]


_STYLE_WORDS = frozenset({"bold", "dim", "italic", "underline", "reverse", "strike",
                          "blink", "overline"})


class Announcement(NamedTuple):
    """A notification: what the operator reads when something happens."""

    title: str
    text: str
    severity: SeverityLevel  # information, warning, error
    mine: bool  # about this VM: louder and longer


def announcement(change: Change, vm_name: str | None, now: datetime) -> Announcement | None:
    """New, started and gone events in words; None for the other kinds of change.

    Another VM's event is news, never an alarm: its severity is "information".
    """
    event = change.event
    if event is None:
        return None
    mine = event.affects(vm_name)
    who = "this VM" if mine else resources_summary(event.resources, vm_name, 30)
    kind = safe(event.event_type, 24)
    severity: SeverityLevel
    if change.kind is ChangeKind.APPEARED:
        title = "New event"
        if event.is_started:
            text, severity = f"{kind} for {who} appeared already started.", "error"
        elif event.not_before is not None:
            text = (f"{kind} for {who}: NotBefore {time_of_day(event.not_before, now)} UTC, "
                    f"{countdown(event, now).text}.")
            severity = "warning"
        else:
            text, severity = f"{kind} for {who}, with no NotBefore.", "warning"
    elif change.kind is ChangeKind.STARTED:
        title, text, severity = "Event started", f"{kind} for {who} has started.", "error"
    elif change.kind is ChangeKind.COMPLETED:
        title, severity = "Event completed", "information"
        text = f"{kind} for {who} is over: it left the document."
    elif change.kind is ChangeKind.CANCELLED:
        title, severity = "Event cancelled", "information"
        text = f"{kind} for {who} was cancelled by Azure: no impact will happen."
    elif change.kind is ChangeKind.GONE:
        # Never "cancelled": across a gap or past its NotBefore it may well have run.
        title, severity = "Event gone, not seen to end", "warning"
        text = (f"{kind} for {who} left the document unseen ({safe(change.detail, 200)}). "
                "Whether it ran is not known: check the VM.")
    else:
        return None
    return Announcement(title, text, severity if mine else "information", mine)


_BAD = (ConnectionState.RETRYING, ConnectionState.UNREACHABLE)  # STALE is told on the status


def connection_announcement(previous: ConnectionState, health: Health) -> Announcement | None:
    """Losing the service, and getting it back; not every retry in between."""
    if health.state in _BAD and previous not in _BAD:
        return Announcement(f"Connection {health.state.value}",
                            safe(health.last_error or "no answer", 300), "error", True)
    if health.state is ConnectionState.LIVE and previous in _BAD:
        return Announcement("Connection live", "The metadata service answers again.",
                            "information", True)
    return None


_SEVERITY: dict[SeverityLevel, int] = {"information": 0, "warning": 1, "error": 2}


def combine(items: Sequence[Announcement]) -> Announcement | None:
    """Several announcements of one answer as one notification: mine first, loudest wins."""
    if len(items) <= 1:
        return items[0] if items else None
    ordered = sorted(items, key=lambda a: (not a.mine, -_SEVERITY.get(a.severity, 0)))
    severity = max((a.severity for a in items), key=lambda s: _SEVERITY.get(s, 0))
    text = "\n".join(f"{a.title}: {a.text}" for a in ordered)
    return Announcement(f"{len(items)} changes", text, severity, any(a.mine for a in items))


def poll_report(result: PollResult, vm_name: str | None) -> Announcement:
    """What the poll ``r`` asked for answered, in one notice: the document it got, or why
    there was none and when the next try is."""
    if result.error is not None or not result.fresh:
        why = safe(result.health.last_error or "no answer", 200)
        wait = result.health.next_attempt_in
        # In the title: a notice shows a few lines, and the reason can be long.
        then = (f"next try in {max(0, round(wait))} s" if wait is not None
                else "trying again")
        return Announcement(f"Poll: no answer, {then}", f"{why}.", "warning", False)
    document = result.document
    if document is None:  # fresh but nothing parsed: say only what is known
        return Announcement("Poll", "The service answered.", "information", False)
    events = len(document.events)
    mine = sum(1 for e in document.events if e.affects(vm_name)) if vm_name else 0
    text = f"Incarnation {document.incarnation}, {events} event{'' if events == 1 else 's'}"
    if mine:
        text += f" ({mine} for this VM)"
    changes = len(result.changes)
    text += (f": {changes} change{'' if changes == 1 else 's'}." if changes
             else ": nothing new.")
    return Announcement("Poll: the service answered", text, "information", False)
