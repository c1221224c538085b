"""The fleet view as pure functions: which lines, in which order, and each line's text.

Groups (scale set, else placement group, else resource group) in order of their most
urgent line; in a group, started events, then VMs whose agents are not answering, then
events by NotBefore. Every label value is network text: it goes through
:func:`setui.ui.format.safe` and into :class:`rich.text.Text` as plain text, never markup.
Urgency is said with symbols as well as styles, as on the VM dashboard.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import NamedTuple

from rich.text import Text

from setui.core.timefmt import age, time_of_day
from setui.fleet.model import Fleet, FleetEvent, FleetGroup, FleetVm, VmState
from setui.ui.format import (
    Countdown,
    Palette,
    Urgency,
    countdown_to,
    safe,
)

__all__ = [
    "EventLine",
    "HeaderLine",
    "Line",
    "VmLine",
    "approve_command",
    "build_lines",
    "event_countdown",
    "haystack",
    "line_text",
    "resources_text",
    "vm_words",
]


# Named tuples, not dataclasses: a fleet's refresh makes tens of thousands of these.
class HeaderLine(NamedTuple):
    group: FleetGroup
    vms: int
    events: int
    problems: int


class EventLine(NamedTuple):
    group: FleetGroup
    event: FleetEvent


class VmLine(NamedTuple):
    group: FleetGroup
    vm: FleetVm


Line = HeaderLine | EventLine | VmLine


def haystack(line: EventLine | VmLine, fleet: Fleet) -> str:
    """The text the filter looks in: every name a line shows or hides in its details.
    Made only while a filter is typed: thirty thousand of them cost a tenth of a second."""
    if isinstance(line, VmLine):
        vm = line.vm
        return " ".join((vm.name, vm.group.label, vm.state.value, vm.instance,
                         *vm.event_ids)).lower()
    event = line.event
    names = [fleet.vms[key].name for key in event.reporters if key in fleet.vms]
    return " ".join((event.event_id, event.event_type, event.status, event.source,
                     event.group.label, *event.resources, *event.approved_by,
                     *names)).lower()


def build_lines(fleet: Fleet, *, text: str = "", group: FleetGroup | None = None) -> list[Line]:
    """Every line to show, headers included; ``text`` keeps lines that contain it (any
    case), ``group`` keeps that group only. A header counts its whole group."""
    wanted = text.strip().lower()
    events: dict[FleetGroup, list[EventLine]] = {}
    for event in fleet.events:  # already most urgent first: started ones lead each group
        events.setdefault(event.group, []).append(EventLine(event.group, event))
    vms_in: dict[FleetGroup, int] = {}
    problems: dict[FleetGroup, list[VmLine]] = {}
    for vm in fleet.vms.values():
        vms_in[vm.group] = vms_in.get(vm.group, 0) + 1
    for vm in fleet.problem_vms():
        problems.setdefault(vm.group, []).append(VmLine(vm.group, vm))
    order = sorted(set(events) | set(problems), key=lambda g: (_group_rank(events.get(g, []),
                                                               problems.get(g, [])), g))
    lines: list[Line] = []
    for each in order:
        if group is not None and each != group:
            continue
        mine = events.get(each, [])
        bad = problems.get(each, [])
        started = 0  # a prefix: counted without looking at the (many) other events
        while started < len(mine) and mine[started].event.is_started:
            started += 1
        body: list[EventLine | VmLine] = [*mine[:started], *bad, *mine[started:]]
        if wanted:
            body = [line for line in body if wanted in haystack(line, fleet)]
            if not body:
                continue
        lines.append(HeaderLine(each, vms_in.get(each, 0), len(mine), len(bad)))
        lines.extend(body)
    return lines


def _group_rank(events: Sequence[Line], problems: Sequence[Line]) -> tuple[object, ...]:
    first = events[0] if events else None
    if isinstance(first, EventLine) and first.event.is_started:
        return first.event.sort_key()
    if problems:
        return (1,)
    if isinstance(first, EventLine):
        return first.event.sort_key()
    return (4,)


def event_countdown(event: FleetEvent, now: datetime) -> Countdown:
    """The countdown of a fleet event; ``?`` when only agents that stopped answering
    report it (what they said is old)."""
    mark = "?" if event.stale else ""
    if event.is_started:
        return Countdown(f"started{mark}", Urgency.STARTED)
    if event.status != "Scheduled":
        return Countdown(f"{safe(event.status, 16) or 'no status'}{mark}", Urgency.CALM)
    if event.not_before is None:
        return Countdown(f"no NotBefore{mark}", Urgency.CALM)
    text, urgency, _ = countdown_to(event.not_before, now)
    return Countdown(f"{text}{mark}", urgency)


def vm_words(vm: FleetVm, now: float) -> str:
    """What is known of a VM's agent, in words; never more than is known."""
    if vm.state is VmState.GONE:
        return (f"not reported since {_since(vm.reported_at, now)} ("
                f"{age(now - vm.reported_at)}): its agent, or the scrape of it, stopped; its "
                "events now are unknown")
    if vm.state is VmState.STALE and vm.last_success:
        return (f"stale: its agent's last good answer from IMDS is "
                f"{age(now - vm.last_success)} old")
    if vm.state is VmState.WAITING:
        return "its agent has had no good answer from IMDS yet"
    if vm.state is VmState.UNKNOWN:
        return "unknown: its agent exports no setui_last_success_timestamp_seconds"
    return "live"


_VM_SYMBOL = {VmState.GONE: "✖", VmState.STALE: "◐", VmState.WAITING: "◌",
              VmState.UNKNOWN: "?", VmState.LIVE: "●"}


def _cell(text: str, width: int) -> str:
    if len(text) > width:
        return text[:max(width - 1, 0)] + "…"
    return text.ljust(width)


def resources_text(event: FleetEvent, limit: int) -> str:
    """The VMs an event lists, in at most ``limit`` characters: as many names as fit, then
    ``+N`` for the rest, those no agent names included; ``3 VMs, no agent`` when no
    reporter lists itself (it fits the narrow layout's 20 columns)."""
    names = [safe(name, 40) for name in event.resources]
    total = event.listed_count
    if not names:
        if not total:
            return "none listed"
        return f"{total} VM{'s' * (total != 1)}, no agent"
    shown: list[str] = []
    for index, name in enumerate(names):
        rest = total - index - 1
        tail = f" +{rest}" if rest else ""
        candidate = ", ".join([*shown, name])
        if len(candidate) + len(tail) > limit and shown:
            break
        shown.append(name)
    rest = total - len(shown)
    return ", ".join(shown) + (f" +{rest}" if rest else "")


# The event line's columns: countdown, type, status (wide), resources, approvers, EventId.
_COUNTDOWN, _APPROVED, _EVENT_ID = 14, 14, 36  # an EventId is a GUID: 36 characters
_WIDE = 100  # from here on the status has a column


def line_text(line: Line, now: datetime, width: int, palette: Palette) -> Text:
    """One line of the table, cut to ``width`` cells."""
    if isinstance(line, HeaderLine):
        text = Text(f"{safe(line.group.label, 60)}", style="bold")
        counts = f"  {line.vms} VM{'s' * (line.vms != 1)} · {line.events} event" \
                 f"{'s' * (line.events != 1)}"
        text.append(counts, style=palette.muted)
        if line.problems:
            text.append(f" · {line.problems} not answering", style=palette.soon or "bold")
    elif isinstance(line, VmLine):
        vm = line.vm
        text = Text(f"  {_VM_SYMBOL[vm.state]} ", style=palette.soon or "bold")
        text.append(_cell(f"VM {safe(vm.name, 40)}", 24), style="bold")
        text.append(vm_words(vm, now.timestamp()),
                    style=palette.urgent if vm.state is VmState.GONE else palette.soon)
    else:
        event = line.event
        count = event_countdown(event, now)
        style = palette.secondary if event.stale else palette.for_urgency(count.urgency)
        narrow = width < _WIDE
        kind = 10 if narrow else 12
        # Wide, the resources take what the others leave (at least 20), so a GUID EventId
        # is whole from 113 columns on: a fixed width would cut it at 120 columns beside
        # a half-empty cell.
        others = 2 + _COUNTDOWN + 1 + kind + 1 + 10 + 1 + 1 + _APPROVED + 1 + _EVENT_ID
        room = 20 if narrow else max(20, width - others)
        text = Text("  ")
        text.append(_cell(count.label(), _COUNTDOWN), style=style)
        text.append(" ")
        text.append(_cell(safe(event.event_type, 12), kind))
        text.append(" ")
        if not narrow:
            text.append(_cell(safe(event.status, 12), 10))
            text.append(" ")
        text.append(_cell(resources_text(event, room), room), style="bold")
        text.append(" ")
        approved = ("✓ " + ", ".join(safe(a, 24) for a in event.approved_by)
                    if event.approved_by else "")
        text.append(_cell(approved, _APPROVED if not narrow else 12), style=palette.ok)
        text.append(" ")
        text.append(safe(event.event_id, 64), style=palette.muted)
    text.truncate(width, overflow="ellipsis")
    return text


def _since(seconds: float, now: float) -> str:
    """``10:14:32 UTC`` the same day as ``now``, else ``Nov 29 10:14 UTC``."""
    try:
        moment = datetime.fromtimestamp(seconds, tz=timezone.utc)
        return time_of_day(moment, datetime.fromtimestamp(now, tz=timezone.utc)) + " UTC"
    except (OverflowError, OSError, ValueError):
        return "an unknown time"


def approve_command(event: FleetEvent) -> str:
    """What to run on one of the event's VMs to approve it there: quoted for a shell, so
    an ID with odd characters cannot become a command of its own."""
    return f"setui approve {shlex.quote(safe(event.event_id, 128))}"


def utc(seconds: float) -> str:
    """``10:02:03 UTC`` for a Unix time; ``unknown`` for none."""
    try:
        return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return "unknown"
