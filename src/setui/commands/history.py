"""``setui history``: past incarnations, one event's whole life, one stored document.

Read-only: what the agent recorded, through its API when it answers; else the store,
opened with ``mode=ro``, so reviewing never changes the record and works where the data
directory is not writable. One code path either way (store.reading.Record). Times are
UTC, as the service's own NotBefore is, written by :mod:`setui.core.timefmt`. Everything
from the network is printed through :func:`printable`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta, timezone
from typing import IO, TYPE_CHECKING, Any

from setui.commands.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    READS_THE_AGENT,
    add_json_option,
    positive_int,
    read_record,
    when,
    whole_number,
    would_overwrite,
)
from setui.core.clock import utc_now
from setui.core.diff import (
    DocumentDiff,
    EventDiff,
    diff_documents,
    field_time,
    machine_value,
    shown_value,
)
from setui.core.holes import Hole, with_holes
from setui.core.impact import IMPACT_SOURCE, Impact, impact_words
from setui.core.model import MAX_INCARNATION, DocumentError, parse_iso
from setui.core.textsafe import printable
from setui.core.timefmt import duration, iso, stamp

if TYPE_CHECKING:  # sqlite3 loads only when a command runs, not for `setui --version`
    from setui.store import ChangeRecord, IncarnationRecord, StoryEntry
    from setui.store.reading import Record

__all__ = ["add_arguments", "history_command", "incarnation_number", "parse_since", "run"]


def incarnation_number(text: str) -> int:
    """A DocumentIncarnation: 0 to 2**63-1, the range the parser accepts and stores."""
    value = whole_number(text)
    if not 0 <= value <= MAX_INCARNATION:
        raise argparse.ArgumentTypeError(
            f"an incarnation is a whole number from 0 to {MAX_INCARNATION}, got {value}")
    return value


_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """``2h``, ``30m``, ``7d`` ago, or an ISO 8601 time (no zone = UTC), read as the
    documents' own times are, the same on every Python."""
    match = _RELATIVE.match(text)
    if match:
        seconds = float(match.group(1)) * _UNITS[match.group(2).lower()]
        try:
            return (now or utc_now()) - timedelta(seconds=seconds)
        except (OverflowError, ValueError):  # before year 1, or too big for a timedelta
            raise argparse.ArgumentTypeError(
                f"too long ago: {printable(text, 40)} reaches back before the year 1; "
                "give a shorter span or a date") from None
    try:
        moment = parse_iso(text.strip())
    except ValueError:  # shaped like a time, but no such day, hour or zone
        moment = None
    if moment is None:
        raise argparse.ArgumentTypeError(
            f"not a time: {text!r} (use 2h, 30m, 7d, or 2024-05-14T09:30 in UTC)")
    try:
        return moment.astimezone(timezone.utc)
    except (OverflowError, ValueError):  # 0001-01-01T00:00+05:00 is before year 1 in UTC
        raise argparse.ArgumentTypeError(
            f"out of range: {printable(text, 40)} is before the year 1 in UTC; give a "
            "later time") from None


# -- arguments -----------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = READS_THE_AGENT
    parser.add_argument("--limit", type=positive_int, default=50, metavar="N",
                        help="at most N incarnations (default 50)")
    parser.add_argument("--since", type=parse_since, metavar="TIME",
                        help="only since TIME: 2h, 30m, 7d, or an ISO 8601 time in UTC")
    parser.add_argument("--event", metavar="EVENT_ID",
                        help="one event's whole life: first seen, started, gone, and how; the "
                             "full EventId or a unique prefix of at least 6 characters")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object per line, with stable keys")
    sub = parser.add_subparsers(dest="history_command", metavar="{show,export-scenario}")
    show = sub.add_parser("show", help="one stored document, and what changed in it",
                          description="Print one stored incarnation of the events document.")
    show.add_argument("incarnation", type=incarnation_number, metavar="INCARNATION")
    show.add_argument("--diff", action="store_true",
                      help="first what changed against the incarnation before it")
    add_json_option(show)
    export = sub.add_parser(
        "export-scenario", help="the record as a scenario the emulator plays",
        description="Write the recorded events as an emulator scenario (times relative to "
                    "the first incarnation), to rehearse a real incident with `setui demo "
                    "--scenario FILE` or `setui emulator --scenario FILE`.")
    export.add_argument("file", metavar="FILE", help="where to write (.toml); - for standard "
                        "output")
    export.add_argument("--force", action="store_true",
                        help="replace FILE if it exists (without it, an existing file is "
                             "left alone and the export refused)")
    export.add_argument("--from", dest="since", type=parse_since, metavar="TIME",
                        help="from TIME: 2h, 30m, 7d ago, or an ISO 8601 time in UTC")
    export.add_argument("--to", dest="until", type=parse_since, metavar="TIME",
                        help="up to TIME (default: the end of the record)")
    export.add_argument("--vm-name", metavar="NAME", default=argparse.SUPPRESS,
                        help="this VM's name in the scenario (default: the configured one, "
                             "else the one the record keeps, else the first resource)")


def run(args: argparse.Namespace) -> int:
    return history_command(args, out=sys.stdout, err=sys.stderr)


def history_command(args: argparse.Namespace, *, out: IO[str], err: IO[str]) -> int:
    from setui.store.errors import RecordError

    as_json = bool(getattr(args, "json", False))
    try:
        store = read_record(args, err, "setui history")
    except RecordError as exc:
        err.write(f"setui history: {exc}\n")
        return EXIT_FAILED
    if store is None:
        if getattr(args, "history_command", None) in ("show", "export-scenario") \
                or getattr(args, "event", None):
            err.write("setui history: nothing has been recorded yet\n")
            return EXIT_FAILED
        if not as_json:
            out.write("No history recorded yet. `setui watch` and the dashboard record "
                      "each new events document they see.\n")
        return EXIT_OK
    try:
        with contextlib.closing(store):
            missing = store.missing_records()
            if missing is not None:
                err.write(f"setui history: {printable(missing, 500)}\n")
                return EXIT_FAILED
            if getattr(args, "history_command", None) == "export-scenario":
                return _export_scenario(store, args, out, err)
            if getattr(args, "history_command", None) == "show":
                return _show(store, args.incarnation, bool(args.diff), as_json, out, err)
            if getattr(args, "event", None):
                return _story(store, args.event, getattr(args, "since", None), as_json,
                              out, err)
            return _list(store, args.limit, getattr(args, "since", None), as_json, out)
    except RecordError as exc:
        err.write(f"setui history: {exc}\n")
        return EXIT_FAILED


# -- the list ------------------------------------------------------------------------------
def change_json(record: IncarnationRecord) -> list[dict[str, Any]]:
    return [{**c.to_json(), "not_before": iso(stored_time(c.not_before))}
            for c in record.changes]


def stored_time(not_before: str) -> datetime | None:
    """A NotBefore as the store keeps it (the service's text, "" once started), read."""
    return field_time("NotBefore", not_before)


def record_json(record: IncarnationRecord) -> dict[str, Any]:
    return {
        "incarnation": record.incarnation, "first_seen": iso(record.first_seen),
        "last_seen": iso(record.last_seen), "endpoint": record.endpoint,
        "summary": record.summary, "changes": change_json(record),
    }


def hole_json(hole: Hole) -> dict[str, Any]:
    """A hole as ``--json`` gives it: its own keys, so no reader takes it for a record.
    An open one (nothing records now) runs until the moment the command ran."""
    return {"not_recording_from": iso(hole.start), "not_recording_until": iso(hole.end),
            "seconds": round(hole.seconds), "open": hole.open, "endpoint": hole.endpoint}


def _with_holes(store: Record, records: list[IncarnationRecord], since: datetime | None,
                complete: bool) -> Iterator[IncarnationRecord | Hole | Impact]:
    """The records, newest first, with the record's holes among them (core.holes): the
    same holes whatever is listed, each whole; and the stalls and boots the agent
    measured (core.impact), each where it happened."""
    endpoints = sorted({r.endpoint for r in records})
    marks: list[Hole | Impact] = [
        hole for endpoint in endpoints
        for hole in store.holes(endpoint=endpoint) if hole.overlaps(since, None)]
    marks += [impact for endpoint in endpoints
              for impact in store.impacts(endpoint=endpoint, since=since)]
    marks.sort(key=lambda mark: mark.start)
    return with_holes(records, marks, complete=complete)


def impact_line(impact: Impact) -> str:
    """A stall or a boot in the list, where it happened: measured by the agent."""
    return f"{when(impact.at):<23} {'-':>11}  ** measured: {impact_words(impact, local=False)} **"


def impact_record_json(impact: Impact) -> dict[str, Any]:
    """A stall or a boot as ``--json`` lists it: keys of its own (``impact``, ``at``), so no
    reader takes it for an incarnation or a hole."""
    return {"impact": impact.kind, "at": iso(impact.at), "seconds": round(impact.measured, 3),
            "event_id": impact.event_id, "event_type": impact.event_type,
            "endpoint": impact.endpoint, "words": impact_words(impact, local=False)}


def _list(store: Record, limit: int, since: datetime | None, as_json: bool,
          out: IO[str]) -> int:
    records = store.history(limit=limit, since=since)
    # Fewer than asked: the list reaches back to --since or to the start of the record.
    complete = len(records) < limit
    if as_json:
        for item in _with_holes(store, records, since, complete) if records else ():
            data = hole_json(item) if isinstance(item, Hole) else (
                impact_record_json(item) if isinstance(item, Impact) else record_json(item))
            out.write(json.dumps(data, ensure_ascii=True) + "\n")
        return EXIT_OK
    if not records:
        out.write("No incarnations recorded" + (" in that time" if since else "") + ".\n")
        return EXIT_OK
    several = len({r.endpoint for r in records}) > 1
    out.write(f"{'first seen':<23} {'incarnation':>11}  what changed\n")
    for item in _with_holes(store, records, since, complete):
        if isinstance(item, Hole):
            line = hole_line(item)
        elif isinstance(item, Impact):
            line = impact_line(item)
        else:
            line = f"{when(item.first_seen):<23} {item.incarnation:>11}  "
            line += printable(item.summary, 300)
        if several:
            line += f"  [{printable(item.endpoint, 80)}]"
        out.write(line + "\n")
    if not complete:
        out.write(f"(the {limit} newest; --limit N for more)\n")
    return EXIT_OK


def hole_line(hole: Hole) -> str:
    """A hole in the record, as the list writes it: whatever happened then was not seen."""
    length = duration(hole.seconds)
    if hole.open:
        words = (f"-- nothing has recorded since then ({length} until now): changes since "
                 "were not seen --")
    else:
        words = (f"-- nothing was recording until {when(hole.end)} ({length}): changes in "
                 "that time were not seen --")
    return f"{when(hole.start):<23} {'-':>11}  {words}"


# -- one event's life ------------------------------------------------------------------------
def story_words(entry: StoryEntry) -> str:
    """One story line in words: what happened to the event at that moment.

    Audit records are an operator's acts and are told as such: their kinds share names
    with the history's (an operator's ``cancelled`` is not Azure's), so the source is
    checked first.
    """
    detail = entry.detail
    if entry.source == "audit":
        return detail or f"audit record: {entry.kind}"
    if entry.source == IMPACT_SOURCE:
        return f"measured: {detail}"
    if entry.kind == "appeared":
        if entry.status == "Started":
            words = "first seen, already Started (no notice)"
        else:
            moment = stored_time(entry.not_before)
            shown = stamp(moment, local=False) if moment is not None else "none"
            words = f"first seen: {entry.status or '?'}, NotBefore {shown}"
        if entry.initial:
            words += " (already in the document when recording began)"
        return words
    if entry.kind == "started":
        return f"started ({detail})" if detail else "started"
    if entry.kind == "completed":
        return "gone: completed (removed after it started)" + (f"; {detail}" if detail else "")
    if entry.kind == "cancelled":
        return "gone: cancelled by Azure (removed while still Scheduled)"
    if entry.kind == "gone":
        # Seen across a gap or past its NotBefore: never told as "cancelled".
        return f"gone, not seen to end ({detail}); whether it ran is not known"
    if entry.kind == "last-seen":
        return f"still in the document ({entry.status or '?'}), last seen at this time"
    if entry.kind in ("rescheduled", "changed", "anomaly"):
        return f"{entry.kind}: {detail}" if detail else entry.kind
    return detail or entry.kind


def story_json(entry: StoryEntry) -> dict[str, Any]:
    return {
        "time": iso(entry.time), "kind": entry.kind, "event_id": entry.event_id,
        "incarnation": entry.incarnation, "event_type": entry.event_type,
        "status": entry.status, "not_before": iso(stored_time(entry.not_before)),
        "detail": entry.detail or None, "source": entry.source,
        "audit_seq": entry.audit_seq, "endpoint": entry.endpoint, "initial": entry.initial,
        "words": story_words(entry),
    }


def _story(store: Record, event_id: str, since: datetime | None, as_json: bool,
           out: IO[str], err: IO[str]) -> int:
    from setui.core.eventids import resolve

    story = store.event_story(event_id)
    if not story and "\\" in event_id:
        # The id as setui prints it, escapes and all (\x9b, \u202e, \ud800): look for
        # the id those escapes stand for.
        shown = _unescaped(event_id)
        if shown is not None:
            story = store.event_story(shown)
    if not story:  # a unique prefix of an id the store knows (core.eventids)
        found = resolve(event_id, [], store.event_ids(event_id.strip()[:3], limit=500))
        if found.event_id is None:
            err.write(f"setui history: {printable(found.problem, 600)}\n")
            return EXIT_FAILED
        event_id = found.event_id
        story = store.event_story(event_id)
    if since is not None:
        story = [e for e in story if e.time >= since]
    if not story:
        err.write(f"setui history: no recorded history for event {printable(event_id, 80)}\n")
        return EXIT_FAILED
    if as_json:
        for entry in story:
            out.write(json.dumps(story_json(entry), ensure_ascii=True) + "\n")
        return EXIT_OK
    kinds = [e.event_type for e in story if e.event_type]
    name = story[0].event_id or event_id
    out.write(f"Event {printable(name, 80)}"
              + (f" ({printable(kinds[0], 20)})" if kinds else "") + "\n")
    for entry in story:
        number = f"#{entry.incarnation}" if entry.incarnation is not None else ""
        marker = {"audit": "audit", IMPACT_SOURCE: "agent"}.get(entry.source, number)
        out.write(f"{when(entry.time):<23} {marker:>7}  {printable(story_words(entry), 300)}\n")
    return EXIT_OK


def _unescaped(text: str) -> str | None:
    """``EV-\\u202e`` -> ``EV-\u202e``: the escapes setui.core.textsafe prints, undone."""
    import codecs

    try:
        return codecs.decode(text.encode("ascii", "backslashreplace"), "unicode_escape")
    except (UnicodeError, ValueError):
        return None


# -- one document --------------------------------------------------------------------------
def _diff_json(diff: DocumentDiff) -> list[dict[str, Any]]:
    """The core's diff as ``--json`` gives it: fields sorted by name, ``[old, new]`` with
    null for a field one side lacks (the text output says which was absent)."""
    return [{"event_id": item.event_id, "change": item.change,
             "fields": {name: [machine_value(name, old), machine_value(name, new)]
                        for name, (old, new) in sorted(item.fields.items())}}
            for item in diff.events]


def _show(store: Record, number: int, with_diff: bool, as_json: bool, out: IO[str],
          err: IO[str]) -> int:
    record = store.incarnation(number)
    if record is None:
        err.write(f"setui history: incarnation {number} is not in the history\n")
        return EXIT_FAILED
    previous = store.previous(record) if with_diff else None
    diff: DocumentDiff | None = None
    if with_diff:
        try:
            diff = diff_documents(record.document(),
                                  previous.document() if previous else None)
        except DocumentError as exc:
            err.write(f"setui history: a stored document cannot be read: {exc}\n")
            return EXIT_FAILED
    if as_json:
        data = record_json(record)
        data["document"] = json.loads(record.raw_json)
        if with_diff:
            data["previous"] = record_json(previous) if previous else None
            data["diff"] = _diff_json(diff) if diff else []
        out.write(json.dumps(data, ensure_ascii=True) + "\n")
        return EXIT_OK
    out.write(f"Incarnation {record.incarnation}\n")
    out.write(f"  first seen  {when(record.first_seen)}\n")
    out.write(f"  last seen   {when(record.last_seen)}\n")
    out.write(f"  endpoint    {printable(record.endpoint, 200)}\n")
    out.write(f"  summary     {printable(record.summary, 300)}\n")
    if with_diff:  # what changed first: it is what the reader came for
        _write_diff(record, previous, diff.events if diff else (), out)
    pretty = json.dumps(json.loads(record.raw_json), indent=2, ensure_ascii=False)
    out.write("\nThe document:\n" if with_diff else "\n")
    for line in pretty.splitlines():
        out.write(printable(line) + "\n")
    return EXIT_OK


def _write_diff(record: IncarnationRecord, previous: IncarnationRecord | None,
                diff: Sequence[EventDiff], out: IO[str]) -> None:
    """What changed, one entry per event: what the history told of it, then its fields
    side by side (a reschedule is told once: by its NotBefore's two values)."""
    out.write("\n")
    if previous is None:
        out.write("No earlier incarnation is recorded: every event is new.\n")
    else:
        out.write(f"Changes since incarnation {previous.incarnation} "
                  f"(first seen {when(previous.first_seen)}):\n")
    told: dict[str, list[ChangeRecord]] = {}
    about_document: list[ChangeRecord] = []
    for change in record.changes:
        if change.event_id is None:
            about_document.append(change)
        else:
            told.setdefault(change.event_id, []).append(change)
    for change in about_document:
        out.write(f"  ! {change.kind:<11} {printable(change.detail, 300)}".rstrip() + "\n")
    items = {item.event_id: item for item in diff}
    for event_id in [*told, *(i for i in items if i not in told)]:
        changes, item = told.get(event_id, []), items.get(event_id)
        kinds = ", ".join(dict.fromkeys(c.kind for c in changes)) or (item.change if item
                                                                      else "")
        kind = next((c.event_type for c in changes if c.event_type), None) \
            or (str(item.event.event_type) if item else "")
        mark = _MARKS[item.change] if item else " "
        out.write(f"  {mark} {kinds:<11} "
                  + " ".join(printable(x, 80) for x in (kind, event_id) if x) + "\n")
        fields = sorted(item.fields.items()) if item else []
        for change in changes:
            if change.detail and not (fields and change.kind in _SAID_BY_FIELDS):
                out.write(f"      {printable(change.detail, 300)}\n")
        for name, (old, new) in fields:
            out.write(f"      {printable(name, 40)}: {printable(shown_value(name, old), 200)} "
                      f"-> {printable(shown_value(name, new), 200)}\n")
    if not diff and not record.changes:
        out.write("  no event was added, removed or changed\n")


_MARKS = {"added": "+", "removed": "-", "changed": "~"}
# Changes whose words only restate fields that the diff shows side by side.
_SAID_BY_FIELDS = frozenset({"rescheduled", "changed"})


# -- the record as a scenario ----------------------------------------------------------------
def _export_scenario(store: Record, args: argparse.Namespace, out: IO[str],
                     err: IO[str]) -> int:
    from pathlib import Path

    from setui.emulator.scenario import ScenarioError
    from setui.monitor.rehearse import scenario_text
    from setui.monitor.replay import load_recording
    from setui.monitor.report import build_report

    since, until = getattr(args, "since", None), getattr(args, "until", None)
    if since is not None and until is not None and since > until:
        err.write("setui history export-scenario: --from is after --to\n")
        return EXIT_USAGE
    if would_overwrite(args, err, "setui history export-scenario"):
        return EXIT_FAILED
    recording = load_recording(store, since=since, until=until)
    if recording is None:
        err.write("setui history export-scenario: nothing was recorded in that time\n")
        return EXIT_FAILED
    report = build_report(recording, since=since, until=until)
    target = str(args.file)
    name = "recorded" if target == "-" else (Path(target).stem or "recorded")
    config = getattr(args, "config_resolved", None)
    try:
        text = scenario_text(report, name=name, vm_name=getattr(args, "vm_name", None)
                             or getattr(config, "vm_name", None)
                             or recording.vm_name_at(recording.end))
    except ScenarioError as exc:
        err.write(f"setui history export-scenario: the record cannot be played: {exc}\n")
        return EXIT_FAILED
    if target == "-":
        out.write(text)
        return EXIT_OK
    from setui.system.atomicfile import write_atomically

    try:
        write_atomically(Path(target), text, mode=0o644)
    except OSError as exc:
        err.write(f"setui history export-scenario: cannot write {printable(target, 200)}: "
                  f"{exc.strerror or exc}\n")
        return EXIT_FAILED
    count = len(report.events)
    err.write(f"wrote {count} event{'s' if count != 1 else ''} to {printable(target, 200)}; "
              f"play it with `setui demo --scenario {printable(target, 200)}`\n")
    return EXIT_OK
