"""``setui watch``: one line per change, for a terminal, a log file or a pipe.

Run as a service, it keeps the incarnation history even when nobody is logged in.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import Callable
from datetime import datetime
from typing import IO, TYPE_CHECKING, Any

from setui.config import Config
from setui.core.health import ConnectionState, Health, PollResult
from setui.core.model import Document, Event, parse_iso
from setui.core.timefmt import iso, signed_countdown, stamp
from setui.core.tracker import Change
from setui.gctune import freeze_heap_once
from setui.monitor import Monitor
from setui.session import ThisVm, make_client, open_store, run_until_stopped
from setui.systemd import ERR, INFO, NOTICE, WARNING, Notifier, for_journal, under_journal
from setui.textsafe import printable

if TYPE_CHECKING:
    from setui.core.client import ImdsClient

__all__ = ["RECORD_KEYS", "add_arguments", "change_record", "connection_record",
           "format_record", "line_countdown", "run"]

# Every --json record has exactly these keys, in this order, whatever its kind: a field
# that does not apply is null, [] or false, so a consumer never meets a missing key.
RECORD_KEYS = (
    "time", "change", "incarnation", "event_id", "event_type", "status", "not_before",
    "resources", "this_vm", "source", "duration", "description", "detail", "initial",
    "state", "error", "failures", "latency_ms", "clock_skew", "certain", "missed",
)
_FALSE_WHEN_BLANK = frozenset({"this_vm", "initial"})
_BLANK = {"resources": None, "certain": True, "missed": 0}


def _blank(key: str) -> Any:
    if key == "resources":
        return []  # a new list each time: records are handed out and may be changed
    if key in _BLANK:
        return _BLANK[key]
    return False if key in _FALSE_WHEN_BLANK else None


def _record_of(**values: Any) -> dict[str, Any]:
    unknown = set(values) - set(RECORD_KEYS)
    if unknown:  # a new field must join RECORD_KEYS, or the key set stops being stable
        raise KeyError(f"not in RECORD_KEYS: {sorted(unknown)}")
    return {key: values[key] if key in values else _blank(key) for key in RECORD_KEYS}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options live in cli.py; kept for symmetry with the other commands."""


def change_record(change: Change, vm_name: str | None) -> dict[str, Any]:
    """The stable JSON shape of one change (``--json``)."""
    event: Event | None = change.event
    return _record_of(
        time=iso(change.seen_at),
        incarnation=change.incarnation,
        change=change.kind.value,
        event_id=event.event_id if event else None,
        event_type=event.event_type.value if event else None,
        status=event.status.value if event else None,
        not_before=iso(event.not_before) if event else None,
        resources=list(event.resources) if event else [],
        # Not known while this VM's name is not: null rather than a guess.
        this_vm=(event.affects(vm_name) if vm_name else None) if event else False,
        source=event.source.value if event and event.source else None,
        duration=event.duration if event else None,
        description=event.description if event else None,
        detail=change.detail or None,
        initial=change.initial,
        certain=change.certain,
        missed=change.missed,
    )


def connection_record(health: Health, when: datetime) -> dict[str, Any]:
    """The stable JSON shape of a connection state change: the same keys as a change."""
    return _record_of(
        time=iso(when),
        change="connection",
        state=health.state.value,
        error=health.last_error,
        failures=health.consecutive_failures,
        latency_ms=round(health.latency * 1000, 1) if health.latency is not None else None,
        clock_skew=health.clock_skew,
    )


_COUNTDOWN_WIDTH = 10
_KIND_WIDTH = 17  # "appeared at start", the longest words in the kind column
_TYPE_WIDTH = 13
_STATUS_WIDTH = 9  # "Scheduled"
_ID_WIDTH = 36  # a GUID, as the service makes them
_TIME_WIDTH = 23  # "2026-11-24 03:12:05 UTC"


def _parse(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return parse_iso(text)
    except ValueError:
        return None


def shown_time(text: str | None) -> str:
    """A record's ISO time as the lines write every time (:mod:`setui.core.timefmt`)."""
    moment = _parse(text)
    return stamp(moment, local=False) if moment is not None else (text or "-")


def _line_time(text: str | None) -> str:
    """A record's time to the second, so every line's columns start at the same place."""
    return shown_time(text).ljust(_TIME_WIDTH)


def line_countdown(not_before: str | None, at: str | None) -> str:
    """NotBefore as seen from the line's own time: ``T-4:59`` ahead, ``T+0:05`` past,
    ``-`` when there is none (or either time is unreadable)."""
    target, now = _parse(not_before), _parse(at)
    if target is None or now is None:
        return "-"
    seconds = (target - now).total_seconds()
    return signed_countdown(seconds)


def format_record(record: dict[str, Any], *, with_time: bool = True) -> str:
    """A record as one human line, its columns aligned: time, what happened ("appeared at
    start" for an event already there when watch began), countdown to NotBefore,
    incarnation, type, status, EventId, then the rest. Every network string is made
    printable. Without the time for a log that stamps lines itself (the journal)."""
    lead = [_line_time(record["time"])] if with_time else []
    if record["change"] == "connection":
        state = record["state"]
        text = {
            "enabling": "enabling scheduled events (the first answer can take up to 2 minutes)",
            "live": "live",
        }.get(state, state)
        if record["error"] and state != "live":
            text += f": {printable(record['error'], 300)}"
        return "  ".join([*lead, f"{'connection':<{_KIND_WIDTH}}", text])
    kind = f"{record['change']} at start" if record["initial"] else record["change"]
    parts = [
        *lead,
        f"{kind:<{_KIND_WIDTH}}",
        line_countdown(record["not_before"], record["time"]).rjust(_COUNTDOWN_WIDTH),
        f"#{record['incarnation']}".ljust(6),
        f"{printable(record['event_type'] or '-', 20):<{_TYPE_WIDTH}}",
        f"{printable(record['status'] or '-', 20):<{_STATUS_WIDTH}}",
        f"{printable(record['event_id'] or '-', 64):<{_ID_WIDTH}}",
    ]
    if record["not_before"]:
        parts.append(f"NotBefore {shown_time(record['not_before'])}")
    if record["resources"]:
        shown = ", ".join(printable(r, 64) for r in record["resources"][:5])
        more = len(record["resources"]) - 5
        parts.append(f"[{shown}{f', +{more} more' if more > 0 else ''}]")
    if record["this_vm"]:
        parts.append("(this VM)")
    if record["certain"] is False:
        parts.append("(uncertain: seen across a gap)")
    if record["detail"]:
        parts.append(f"- {printable(record['detail'], 300)}")
    return "  ".join(parts).rstrip()


class _Printer:
    """Writes records as lines. Under systemd's journal the journal stamps each line, so
    a text line carries no time of its own and starts with its priority (``<4>`` for a
    connection problem, ``<5>`` for news about an event, ``<6>`` otherwise)."""

    def __init__(self, out: IO[str], as_json: bool, journal: bool = False) -> None:
        self.out = out
        self.as_json = as_json
        self.journal = journal

    def emit(self, record: dict[str, Any]) -> None:
        # ensure_ascii: network text can hold C1 controls (U+009B is a CSI) and bidi
        # overrides; escaped as \u009b they cannot act on a terminal, and pure ASCII
        # also survives a stdout redirected in a legacy code page (cp1252 on Windows).
        if self.as_json:
            line = json.dumps(record, ensure_ascii=True)
        elif self.journal:
            line = for_journal(format_record(record, with_time=False), _priority(record))
        else:
            line = format_record(record)
        self.out.write(line + "\n")
        self.out.flush()


def _priority(record: dict[str, Any]) -> int:
    if record["change"] == "connection":
        return INFO if record["state"] in ("live", "enabling") else WARNING
    if record["change"] in ("started", "gone") or record["certain"] is False:
        return NOTICE if not record["this_vm"] else WARNING
    return NOTICE if record["this_vm"] else INFO


async def watch(config: Config, *, as_json: bool, record: bool, out: IO[str],
                err: IO[str]) -> int:
    notifier = Notifier.from_env()
    journal = under_journal(err)
    printer = _Printer(out, as_json, journal=under_journal(out))
    store, problem = open_store(config) if record else (None, None)
    if problem:
        _say(err, f"setui: not recording history: {problem}", journal, WARNING)

    def store_problem(brief: str | None, full: str | None) -> None:
        if full is not None:
            _say(err, f"setui: cannot record history: {full}", journal, ERR)
            notifier.status(f"NOT recording history: {brief}")
        else:
            _say(err, "setui: recording history again", journal, NOTICE)

    client = make_client(config)
    this_vm = ThisVm(config.vm_name)
    learning: asyncio.Future[None] | None = None
    try:
        await this_vm.learn(client, tries=1)  # the first answer's lines know it, mostly
        monitor = Monitor(client, endpoint=config.endpoint, interval=config.interval,
                          store=store, record=record, vm_name=this_vm.name,
                          command="setui watch", on_store_problem=store_problem)
        if this_vm.name is None:
            learning = asyncio.ensure_future(_learn_vm_name(
                this_vm, client, monitor, lambda line: _say(err, line, journal, NOTICE)))
        elif this_vm.source == "IMDS":
            _say(err, f"setui: {this_vm}", journal, INFO)
        last_state: tuple[ConnectionState, str | None] | None = (monitor.health().state, None)
        printer.emit(connection_record(monitor.health(), monitor.now()))
        # Ready before the first answer: the first call can take two minutes, longer
        # than systemd waits for a start. The watchdog pings from this loop, so a loop
        # that stops turning gets the recorder restarted.
        notifier.ready(_status(monitor.health(), None, store is not None and record))
        pinger = asyncio.ensure_future(notifier.keep_alive())
        updates = monitor.updates()
        try:
            async for update in updates:
                result = update.result
                state = (result.health.state, _error_kind(result))
                if state != last_state:
                    # The answer's own time, the one its changes carry: lines stay in
                    # order (the time now would be later than the changes below it).
                    printer.emit(connection_record(result.health,
                                                   result.seen_at or monitor.now()))
                    last_state = state
                    notifier.status(_status(result.health, result.document,
                                            monitor.recorder is not None
                                            and monitor.recorder.problem is None))
                for change in result.changes:
                    printer.emit(change_record(change, this_vm.name))
                # Start-up is done once the first answer is printed: its objects (the
                # monitor, the client, the store) leave the collector's walks.
                freeze_heap_once()
        finally:
            pinger.cancel()
            if learning is not None:
                learning.cancel()
            notifier.stopping()
            # Every queued write reaches the store, and the session is closed, before
            # the store is.
            await updates.aclose()
            await monitor.aclose()
            notifier.close()
    finally:
        await client.aclose()
        if store is not None:
            store.close()
    return 0


async def _learn_vm_name(this_vm: ThisVm, client: ImdsClient, monitor: Monitor,
                        say: Callable[[str], None]) -> None:
    """Off the polling's path: ask IMDS for this VM's name until it answers, then tell the
    monitor and say where the name came from."""
    say("setui: this VM's name is not known yet (IMDS did not give it): events are not "
        "marked as this VM's until it is; asking again")
    if await this_vm.learn(client) is not None:
        monitor.vm_name = this_vm.name
        say(f"setui: {this_vm}")


def _say(err: IO[str], line: str, journal: bool, priority: int) -> None:
    err.write((for_journal(line, priority) if journal else line) + "\n")
    err.flush()


def _status(health: Health, document: Document | None, recording: bool) -> str:
    """One line for ``systemctl status``."""
    words = [f"connection {health.state.value}"]
    if document is not None:
        words.append(f"incarnation {document.incarnation}, {len(document.events)} event"
                     f"{'' if len(document.events) == 1 else 's'}")
    words.append("recording history" if recording else "NOT recording history")
    return "; ".join(words)


def _error_kind(result: PollResult) -> str | None:
    return result.error.kind if result.error is not None else None


def _tolerant(stream: IO[str]) -> None:
    """Make a text stream write what its encoding lacks as escapes instead of raising:
    an EventId in Chinese must not end `setui watch > log` on a cp1252 console."""
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None:
        with contextlib.suppress(ValueError, OSError):  # a stream that cannot: leave it
            reconfigure(errors="backslashreplace")


def run(args: argparse.Namespace) -> int:
    config: Config = args.config_resolved
    _tolerant(sys.stdout)
    _tolerant(sys.stderr)
    try:
        return run_until_stopped(watch(config, as_json=args.json, record=args.record,
                                        out=sys.stdout, err=sys.stderr))
    except KeyboardInterrupt:
        return 0
