"""``setui history``: past incarnations, one event's whole life, one stored document.

Read-only: the store is opened with ``mode=ro``, so reviewing never changes the record
and works where the data directory is not writable. Times are UTC (marked ``Z``), as the
service's own NotBefore is. Everything from the network is printed through
:func:`printable`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from setui.core.model import Document, DocumentError, Event
from setui.textsafe import printable

if TYPE_CHECKING:  # sqlite3 loads only when a command runs, not for `setui --version`
    from setui.store import IncarnationRecord, Store, StoryEntry

__all__ = ["add_arguments", "data_dir", "incarnation_number", "iso", "open_readonly",
           "parse_since", "positive_int", "run", "when"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
# The largest number SQLite stores; a bigger one would crash the query, not find nothing.
LARGEST = 2**63 - 1


# -- shared by the headless commands ------------------------------------------------------
def when(moment: datetime | None) -> str:
    """``2024-05-14 09:30:00Z``: UTC, to the second."""
    if moment is None:
        return "-"
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def iso(moment: datetime | None) -> str | None:
    """ISO 8601 UTC with microseconds, for ``--json``."""
    if moment is None:
        return None
    return moment.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def data_dir(args: argparse.Namespace) -> Path | None:
    value = getattr(args, "data_dir", None)
    return Path(value).expanduser() if value is not None else None


def open_readonly(args: argparse.Namespace) -> Store | None:
    """The store for reading, or None when nothing has been recorded yet (no database, or
    an empty file left by a setui stopped before it wrote the schema)."""
    from setui.store import NothingRecorded, Store, default_data_dir

    directory = data_dir(args) or default_data_dir()
    try:
        return Store.open_dir(directory, readonly=True)
    except NothingRecorded:
        return None


def _whole(text: str) -> int:
    value = text.strip()
    if not re.fullmatch(r"[+-]?\d+", value):
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}")
    if len(value.lstrip("+-").lstrip("0")) > len(str(LARGEST)):
        raise argparse.ArgumentTypeError(f"too large: {printable(text, 40)} (at most {LARGEST})")
    return int(value)


def positive_int(text: str) -> int:
    """A count from the command line: 1 to 2**63-1 (what the database can compare)."""
    value = _whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    if value > LARGEST:
        raise argparse.ArgumentTypeError(f"must be at most {LARGEST}, got {value}")
    return value


def incarnation_number(text: str) -> int:
    """A DocumentIncarnation: 0 to 2**63-1, the range the parser accepts and stores."""
    value = _whole(text)
    if not 0 <= value <= LARGEST:
        raise argparse.ArgumentTypeError(
            f"an incarnation is a whole number from 0 to {LARGEST}, got {value}")
    return value


_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """``2h``, ``30m``, ``7d`` ago, or an ISO 8601 time (no zone = UTC)."""
    match = _RELATIVE.match(text)
    if match:
        seconds = float(match.group(1)) * _UNITS[match.group(2).lower()]
        try:
            return (now or datetime.now(timezone.utc)) - timedelta(seconds=seconds)
        except (OverflowError, ValueError):  # before year 1, or too big for a timedelta
            raise argparse.ArgumentTypeError(
                f"too long ago: {printable(text, 40)} reaches back before the year 1; "
                "give a shorter span or a date") from None
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a time: {text!r} (use 2h, 30m, 7d, or 2024-05-14T09:30 in UTC)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        return moment.astimezone(timezone.utc)
    except (OverflowError, ValueError):  # 0001-01-01T00:00+05:00 is before year 1 in UTC
        raise argparse.ArgumentTypeError(
            f"out of range: {printable(text, 40)} is before the year 1 in UTC; give a "
            "later time") from None


def add_storage_options(parser: argparse.ArgumentParser) -> None:
    """The common options again, on a sub-command, so they may follow it; SUPPRESS keeps
    a value given before the sub-command."""
    parser.add_argument("--data-dir", metavar="DIR", type=Path, default=argparse.SUPPRESS,
                        help="where history and the audit log live (env SETUI_DATA_DIR)")
    parser.add_argument("--endpoint", metavar="URL", default=argparse.SUPPRESS,
                        help=argparse.SUPPRESS)
    parser.add_argument("--api-version", metavar="V", default=argparse.SUPPRESS,
                        help=argparse.SUPPRESS)
    parser.add_argument("--config", metavar="FILE", type=Path, default=argparse.SUPPRESS,
                        help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="JSON with stable keys")


# -- arguments -----------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=positive_int, default=50, metavar="N",
                        help="at most N incarnations (default 50)")
    parser.add_argument("--since", type=parse_since, metavar="TIME",
                        help="only since TIME: 2h, 30m, 7d, or an ISO 8601 time in UTC")
    parser.add_argument("--event", metavar="EVENT_ID",
                        help="one event's whole life: first seen, started, gone, and how")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object per line, with stable keys")
    sub = parser.add_subparsers(dest="history_command", metavar="{show}")
    show = sub.add_parser("show", help="one stored document, and what changed in it",
                          description="Print one stored incarnation of the events document.")
    show.add_argument("incarnation", type=incarnation_number, metavar="INCARNATION")
    show.add_argument("--diff", action="store_true",
                      help="also what changed against the incarnation before it")
    add_storage_options(show)


def run(args: argparse.Namespace) -> int:
    return history_command(args, out=sys.stdout, err=sys.stderr)


def history_command(args: argparse.Namespace, *, out: IO[str], err: IO[str]) -> int:
    from setui.store import StoreError

    as_json = bool(getattr(args, "json", False))
    try:
        store = open_readonly(args)
    except StoreError as exc:
        err.write(f"setui history: {exc}\n")
        return EXIT_FAILED
    if store is None:
        if getattr(args, "history_command", None) == "show" or getattr(args, "event", None):
            err.write("setui history: nothing has been recorded yet\n")
            return EXIT_FAILED
        if not as_json:
            out.write("No history recorded yet. `setui watch` and the dashboard record "
                      "each new events document they see.\n")
        return EXIT_OK
    try:
        with store:
            if getattr(args, "history_command", None) == "show":
                return _show(store, args.incarnation, bool(args.diff), as_json, out, err)
            if getattr(args, "event", None):
                return _story(store, args.event, getattr(args, "since", None), as_json,
                              out, err)
            return _list(store, args.limit, getattr(args, "since", None), as_json, out)
    except StoreError as exc:
        err.write(f"setui history: {exc}\n")
        return EXIT_FAILED


# -- the list ------------------------------------------------------------------------------
def change_json(record: IncarnationRecord) -> list[dict[str, Any]]:
    return [c.to_json() for c in record.changes]


def record_json(record: IncarnationRecord) -> dict[str, Any]:
    return {
        "incarnation": record.incarnation, "first_seen": iso(record.first_seen),
        "last_seen": iso(record.last_seen), "endpoint": record.endpoint,
        "summary": record.summary, "changes": change_json(record),
    }


def _list(store: Store, limit: int, since: datetime | None, as_json: bool,
          out: IO[str]) -> int:
    records = store.history(limit=limit, since=since)
    if as_json:
        for record in records:
            out.write(json.dumps(record_json(record), ensure_ascii=False) + "\n")
        return EXIT_OK
    if not records:
        out.write("No incarnations recorded" + (" in that time" if since else "") + ".\n")
        return EXIT_OK
    endpoints = {r.endpoint for r in records}
    out.write(f"{'first seen (UTC)':<21} {'incarnation':>11}  what changed\n")
    for record in records:
        line = f"{when(record.first_seen):<21} {record.incarnation:>11}  "
        line += printable(record.summary, 300)
        if len(endpoints) > 1:
            line += f"  [{printable(record.endpoint, 80)}]"
        out.write(line + "\n")
    if len(records) == limit:
        out.write(f"(the {limit} newest; --limit N for more)\n")
    return EXIT_OK


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
    if entry.kind == "appeared":
        if entry.status == "Started":
            words = "first seen, already Started (no notice)"
        else:
            words = f"first seen: {entry.status or '?'}, NotBefore {entry.not_before or 'none'}"
        if entry.initial:
            words += " (already in the document when recording began)"
        return words
    if entry.kind == "started":
        return "started"
    if entry.kind == "completed":
        return "gone: completed (removed after it started)"
    if entry.kind == "cancelled":
        return "gone: cancelled by Azure (removed while still Scheduled)"
    if entry.kind == "last-seen":
        return f"still in the document ({entry.status or '?'}), last seen at this time"
    if entry.kind in ("rescheduled", "changed", "anomaly"):
        return f"{entry.kind}: {detail}" if detail else entry.kind
    return detail or entry.kind


def story_json(entry: StoryEntry) -> dict[str, Any]:
    return {
        "time": iso(entry.time), "kind": entry.kind, "event_id": entry.event_id,
        "incarnation": entry.incarnation, "event_type": entry.event_type,
        "status": entry.status, "not_before": entry.not_before or None,
        "detail": entry.detail or None, "source": entry.source,
        "audit_seq": entry.audit_seq, "endpoint": entry.endpoint, "initial": entry.initial,
        "words": story_words(entry),
    }


def _story(store: Store, event_id: str, since: datetime | None, as_json: bool,
           out: IO[str], err: IO[str]) -> int:
    story = store.event_story(event_id)
    if since is not None:
        story = [e for e in story if e.time >= since]
    if not story:
        err.write(f"setui history: no recorded history for event {printable(event_id, 80)}\n")
        return EXIT_FAILED
    if as_json:
        for entry in story:
            out.write(json.dumps(story_json(entry), ensure_ascii=False) + "\n")
        return EXIT_OK
    kinds = [e.event_type for e in story if e.event_type]
    name = story[0].event_id or event_id
    out.write(f"Event {printable(name, 80)}"
              + (f" ({printable(kinds[0], 20)})" if kinds else "") + "\n")
    for entry in story:
        number = f"#{entry.incarnation}" if entry.incarnation is not None else ""
        marker = "audit" if entry.source == "audit" else number
        out.write(f"{when(entry.time):<21} {marker:>7}  {printable(story_words(entry), 300)}\n")
    return EXIT_OK


# -- one document --------------------------------------------------------------------------
def _first_by_id(doc: Document | None) -> dict[str, Event]:
    found: dict[str, Event] = {}
    for event in doc.events if doc else ():
        found.setdefault(event.event_id, event)
    return found


def document_diff(current: Document, previous: Document | None) -> list[dict[str, Any]]:
    """Events added, removed and changed (field by field, raw values) between two docs."""
    before, after = _first_by_id(previous), _first_by_id(current)
    diff: list[dict[str, Any]] = []
    for event_id, event in after.items():
        old = before.get(event_id)
        if old is None:
            diff.append({"event_id": event_id, "change": "added", "fields": {}})
            continue
        fields = {name: [old.raw.get(name), event.raw.get(name)]
                  for name in sorted(set(old.raw) | set(event.raw))
                  if old.raw.get(name) != event.raw.get(name)}
        if fields:
            diff.append({"event_id": event_id, "change": "changed", "fields": fields})
    for event_id in before:
        if event_id not in after:
            diff.append({"event_id": event_id, "change": "removed", "fields": {}})
    return diff


def _show(store: Store, number: int, with_diff: bool, as_json: bool, out: IO[str],
          err: IO[str]) -> int:
    record = store.incarnation(number)
    if record is None:
        err.write(f"setui history: incarnation {number} is not in the history\n")
        return EXIT_FAILED
    previous = store.previous(record) if with_diff else None
    diff: list[dict[str, Any]] | None = None
    if with_diff:
        try:
            diff = document_diff(record.document(),
                                 previous.document() if previous else None)
        except DocumentError as exc:
            err.write(f"setui history: a stored document cannot be read: {exc}\n")
            return EXIT_FAILED
    if as_json:
        data = record_json(record)
        data["document"] = json.loads(record.raw_json)
        if with_diff:
            data["previous"] = record_json(previous) if previous else None
            data["diff"] = diff
        out.write(json.dumps(data, ensure_ascii=False) + "\n")
        return EXIT_OK
    out.write(f"Incarnation {record.incarnation}\n")
    out.write(f"  first seen  {when(record.first_seen)}\n")
    out.write(f"  last seen   {when(record.last_seen)}\n")
    out.write(f"  endpoint    {printable(record.endpoint, 200)}\n")
    out.write(f"  summary     {printable(record.summary, 300)}\n")
    pretty = json.dumps(json.loads(record.raw_json), indent=2, ensure_ascii=False)
    out.write("\n")
    for line in pretty.splitlines():
        out.write(printable(line) + "\n")
    if with_diff:
        _write_diff(record, previous, diff or [], out)
    return EXIT_OK


def _write_diff(record: IncarnationRecord, previous: IncarnationRecord | None,
                diff: list[dict[str, Any]], out: IO[str]) -> None:
    out.write("\n")
    if previous is None:
        out.write("No earlier incarnation is recorded: every event is new.\n")
    else:
        out.write(f"Changes since incarnation {previous.incarnation} "
                  f"(first seen {when(previous.first_seen)}):\n")
    for change in record.changes:
        what = " ".join(printable(x, 80) for x in (change.event_type, change.event_id) if x)
        line = f"  {change.kind:<11} {what}"
        if change.detail:
            line += f"  {printable(change.detail, 300)}"
        out.write(line.rstrip() + "\n")
    if not diff:
        out.write("  no event was added, removed or changed\n")
    for item in diff:
        mark = _MARKS[item["change"]]
        out.write(f"  {mark} {item['change']:<8} {printable(item['event_id'], 80)}\n")
        for name, (old, new) in item["fields"].items():
            out.write(f"      {printable(name, 40)}: {printable(_value(old), 200)} -> "
                      f"{printable(_value(new), 200)}\n")


_MARKS = {"added": "+", "removed": "-", "changed": "~"}


def _value(value: Any) -> str:
    return "(absent)" if value is None else json.dumps(value, ensure_ascii=False)
