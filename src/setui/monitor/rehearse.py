"""A recorded incident as an emulator scenario: drill the runbook on what really happened.

The record becomes the scenario format the emulator reads (see
:mod:`setui.emulator.scenario`), with every time made relative to where the window opens
(``--from``, else the first incarnation): when each event appeared, its notice and every
reschedule, an early start as an approval from another VM just before it, how long it
stayed Started, and a cancellation. What the format cannot say is said in the file's
comments: a hole in the record plays as if nothing was missed; an event that went unseen
while Scheduled plays as starting at its NotBefore (it probably ran) or as cancelled when
it left before it.
"""

from __future__ import annotations

import json
from datetime import datetime

from setui.core.textsafe import needs_escape, printable
from setui.core.timefmt import duration as duration_text
from setui.emulator.scenario import MAX_SECONDS, parse_scenario
from setui.monitor.report import EventReport, Report

__all__ = ["APPROVAL_DELAY", "DEFAULT_DURATION", "default_duration", "scenario_text"]

APPROVAL_DELAY = 1  # seconds from the stand-in approval to Started, as the scenario says
DEFAULT_DURATION = 10.0  # the emulator's impact when DurationInSeconds is -1 or 0


def _string(text: str) -> str:
    """A TOML basic string: JSON's escapes, which TOML shares, and a TOML escape for every
    character the rest of setui's output escapes (:func:`setui.core.textsafe.needs_escape`:
    controls, bidi overrides, line separators), so the file is safe to show and still
    plays the same text. A lone surrogate (valid in a JSON escape, not in TOML) is
    written as the text of its escape."""
    clean = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return "".join(_toml_escape(c) if needs_escape(c) else c
                   for c in json.dumps(clean, ensure_ascii=False))


def _toml_escape(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _seconds(moment: datetime, t0: datetime) -> float:
    seconds = round((moment - t0).total_seconds(), 3)
    return min(max(seconds, 0.0), float(MAX_SECONDS))


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:.3f}".rstrip("0")


def _started_for(event: EventReport, end: datetime) -> float | None:
    """Seconds it stayed Started in the record (to the end, if it had not gone)."""
    if event.started_at is None:
        return None
    return max(0.0, ((event.gone_at or end) - event.started_at).total_seconds())


def default_duration(events: list[EventReport], end: datetime) -> float:
    """The impact to give events whose DurationInSeconds says none (-1, 0): no longer
    than the shortest time such an event stayed Started, so each can leave when it did
    (its tail makes up the rest)."""
    spans = [span for e in events if e.event is not None and (e.event.duration or 0) <= 0
             and (span := _started_for(e, end)) is not None]
    return max(0.001, round(min(spans, default=DEFAULT_DURATION), 3))


def _event_toml(event: EventReport, t0: datetime, end: datetime,
                no_duration: float) -> list[str]:
    source = event.event
    assert source is not None
    lines = ["", "[[events]]", f"# first seen {event.first_seen:%Y-%m-%d %H:%M:%S} UTC, "
             f"incarnation {event.first_incarnation}"]
    at = _seconds(event.first_seen, t0)
    lines += [f"id = {_string(event.event_id)}", f"type = {_string(event.event_type)}"]
    if event.appeared_started:
        lines.append('status = "Started"')
    lines.append(f"at = {_number(at)}")
    # An event older than the window starts there with the NotBefore it had then.
    notice_from = event.not_before
    for move in event.reschedules:
        if move.seen_at <= t0 and move.new is not None:
            notice_from = move.new
    if not event.appeared_started and notice_from is not None:
        lines.append(f"notice = {_number(max(0.0, _seconds(notice_from, t0) - at))}")
    elif not event.appeared_started:
        lines.append("notice = 0  # it had no NotBefore")
    resources = ", ".join(_string(r) for r in event.resources) or _string("vm-0")
    lines.append(f"resources = [{resources}]")
    duration = source.duration if source.duration is not None else -1
    lines.append(f"duration = {max(-1, min(duration, MAX_SECONDS))}")
    if source.source is not None:
        lines.append(f"source = {_string(str(source.source))}")
    if source.description is not None:
        lines.append(f"description = {_string(source.description)}")
    moves = [(_seconds(m.seen_at, t0), _seconds(m.new, t0)) for m in event.reschedules
             if m.new is not None and m.seen_at > t0]
    if moves and not event.appeared_started:
        items = ", ".join(f"{{ at = {_number(seen)}, notice = {_number(max(0.0, new - seen))} }}"
                          for seen, new in moves)
        lines.append(f"reschedule = [{items}]")
    impact = float(duration) if duration > 0 else no_duration
    started = event.started_at
    ahead = event.start_vs_not_before
    if started is not None and ahead is not None and ahead >= 1:
        approve = max(at, _seconds(started, t0) - APPROVAL_DELAY)
        lines.append(f"approve_at = {_number(approve)}  # it started before its NotBefore: "
                     "approved (here by another VM)")
    gone = event.gone_at
    if event.fate == "cancelled" and gone is not None:
        lines.append(f"cancel_at = {_number(_seconds(gone, t0))}")
    elif gone is not None and started is not None:
        span = (gone - started).total_seconds()
        tail = max(0.0, span - impact)
        lines.append(f"tail = {_number(round(tail, 3))}  # Started for {duration_text(span)}")
    elif gone is not None:  # went unseen while Scheduled
        if event.last_not_before is not None and gone > event.last_not_before:
            tail = max(0.0, (gone - event.last_not_before).total_seconds() - impact)
            lines.append(f"tail = {_number(round(tail, 3))}  # gone unseen after its "
                         "NotBefore: played as started then, gone when it was missed")
        else:
            lines.append(f"cancel_at = {_number(_seconds(gone, t0))}  # gone unseen before "
                         "its NotBefore: played as cancelled")
    elif started is not None:  # still there at the end of the window
        tail = max(0.0, (end - started).total_seconds() - impact)
        lines.append(f"tail = {_number(round(tail, 3))}  # still Started at the end")
    return lines


def scenario_text(report: Report, *, name: str, vm_name: str | None) -> str:
    """The report's events as a scenario file (TOML), checked by the emulator's own parser
    before it is returned: what is written is what plays."""
    t0 = report.start
    events = [e for e in report.events if e.event is not None]
    vm = vm_name or next((r for e in events for r in e.resources), None) or "vm-0"
    lines = [
        f"# Exported by `setui history export-scenario` from {printable(report.endpoint, 300)}",
        f"# Times are seconds from {t0:%Y-%m-%d %H:%M:%S} UTC, where the window opens.",
    ]
    if report.holes:
        lines.append("# The record has holes (nothing was recording); this plays them as if "
                     "nothing was missed:")
        lines += [f"#   {h.start:%Y-%m-%d %H:%M:%S} to {h.end:%H:%M:%S} UTC"
                  for h in report.holes]
    lines += [
        f"name = {_string(name)}",
        f"description = {_string(f'recorded {t0:%Y-%m-%d %H:%M} UTC, {len(events)} events')}",
        f"vm_name = {_string(vm)}",
        f"approval_delay = {APPROVAL_DELAY}",
    ]
    impact = default_duration(events, report.end)
    lines.append(f"default_duration = {_number(impact)}")
    for event in events:
        lines += _event_toml(event, t0, report.end, impact)
    text = "\n".join(lines) + "\n"
    parse_scenario(text, source=name)  # raises ScenarioError, in words, if it cannot play
    return text
