"""``setui watch``: one line per change, for a terminal, a log file or a pipe.

Where the agent answers (the VM's service), watch prints what the agent sees, from its
pushes, and records nothing itself: the agent is the VM's one poller and recorder.
Without one (or ``--standalone``) it polls IMDS and records the history itself.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from setui.commands.common import agent_for
from setui.core.clock import utc_now
from setui.core.health import ConnectionState, Health, PollResult
from setui.core.model import Document, Event, EventStatus, parse_iso
from setui.core.textsafe import printable
from setui.core.timefmt import iso, signed_countdown, stamp
from setui.core.tracker import Change, ChangeKind, Tracker
from setui.monitor import Monitor
from setui.session import ThisVm, make_client, open_store, run_until_stopped
from setui.settings.config import Config
from setui.system.gctune import freeze_heap_once
from setui.system.logs import configure as configure_logs
from setui.system.systemd import ERR, INFO, NOTICE, WARNING, Notifier, for_journal, under_journal

if TYPE_CHECKING:
    from setui.core.client import ImdsClient
    from setui.monitor.state import EventLife

__all__ = ["RECORD_KEYS", "add_arguments", "change_record", "connection_record",
           "format_record", "line_countdown", "opening_changes", "run"]

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
    start" for an event already there when watch began, or when the record began, with
    no life known from before), countdown to NotBefore,
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


def opening_changes(changes: Sequence[Change], lives: Mapping[str, EventLife]) -> list[Change]:
    """What the first document a watch hears is told as: an event whose life is known
    from before it (the record's, as the agent or a restarted monitor took it up) by
    that life, "appeared" when it was first seen and "started" when it started, each as
    surely as the record knows it; "appeared at start" only for one whose life begins
    now, or began with the record itself."""
    told: list[Change] = []
    for change in changes:
        life = lives.get(change.event_id or "") \
            if change.kind is ChangeKind.APPEARED and change.initial else None
        if life is None or change.event is None or life.first_seen >= change.seen_at:
            told.append(change)
            continue
        told.extend(_life_changes(change.event, life, change.incarnation))
    return sorted(told, key=lambda c: c.seen_at)


def _life_changes(event: Event, life: EventLife, incarnation: int) -> list[Change]:
    """An event's life as the lines a watch would have printed while it happened."""
    if life.appeared_started:
        first = event
    else:  # as it was announced: Scheduled, with the NotBefore it first had
        first = replace(event, status=EventStatus.SCHEDULED, not_before=life.announced)
    told = [Change(ChangeKind.APPEARED, life.first_incarnation, life.first_seen, first,
                   detail="appeared already started" if life.appeared_started else "",
                   initial=life.initial, certain=life.initial or life.appeared_certain)]
    if life.started_at is not None and not life.appeared_started:
        told.append(Change(ChangeKind.STARTED, life.started_incarnation or incarnation,
                           life.started_at, event, first, certain=life.started_exact))
    return told


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


class _Lines:
    """What watch prints as states come, whoever polls: a connection line when the
    state (or the kind of failure) changes, then a line per change; and the systemd
    status beside it."""

    def __init__(self, printer: _Printer, notifier: Notifier,
                 vm_name: Callable[[], str | None]) -> None:
        self.printer = printer
        self.notifier = notifier
        self.vm_name = vm_name
        self.last: tuple[ConnectionState, str | None] | None = None

    def show(self, health: Health, when: datetime, changes: Sequence[Change], *,
             kind: str | None = None, document: Document | None = None,
             recording: bool = False) -> None:
        if (health.state, kind) != self.last:
            # The answer's own time, the one its changes carry: lines stay in order (the
            # time now would be later than the changes below it).
            self.printer.emit(connection_record(health, when))
            self.last = (health.state, kind)
            self.notifier.status(_status(health, document, recording))
        for change in changes:
            self.printer.emit(change_record(change, self.vm_name()))


async def watch(config: Config, *, as_json: bool, record: bool, out: IO[str],
                err: IO[str], agent: Path | None = None) -> int:
    """Print one line per change until stopped: the agent's, through its socket
    ``agent`` when given (recording nothing here), else polling IMDS."""
    notifier = Notifier.from_env()
    printer = _Printer(out, as_json, journal=under_journal(out))
    if agent is not None:
        return await _watch_agent(config, agent, printer, notifier, err)
    journal = under_journal(err)
    configure_logs(err, journal)  # the poller's own errors, as the agent writes them
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
        lines = _Lines(printer, notifier, lambda: this_vm.name)
        lines.show(monitor.health(), monitor.now(), ())
        # Ready before the first answer: the first call can take two minutes, longer
        # than systemd waits for a start. The watchdog pings from this loop, so a loop
        # that stops turning gets the recorder restarted.
        notifier.ready(_status(monitor.health(), None, store is not None and record))
        pinger = asyncio.ensure_future(notifier.keep_alive())
        updates = monitor.updates()
        try:
            async for update in updates:
                result = update.result
                lines.show(result.health, result.seen_at or monitor.now(),
                           opening_changes(result.changes, monitor.state.lives),
                           kind=_error_kind(result), document=result.document,
                           recording=monitor.recorder is not None
                           and monitor.recorder.problem is None)
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


async def _watch_agent(config: Config, path: Path, printer: _Printer, notifier: Notifier,
                       err: IO[str]) -> int:
    """The agent's pushes as watch's lines: no request to IMDS, nothing recorded here.
    When the agent goes (a restart), the lines say the state is stale, watch attaches
    again as soon as it answers, and what changed meanwhile is told as seen across a gap."""
    from setui.api.attach import attached_words
    from setui.api.client import ApiError, StatePush, Subscription, Tick, VmPush
    from setui.core.backoff import Backoff

    journal = under_journal(err)
    name: list[str | None] = [config.vm_name]
    lines = _Lines(printer, notifier, lambda: name[0])
    tracker: Tracker | None = None  # the documents heard, for what changed while away
    last = Health()
    pause = Backoff(base=0.5, cap=5.0)
    misses = 0
    notifier.ready("attached to the agent")
    pinger = asyncio.ensure_future(notifier.keep_alive())
    try:
        while True:
            sub: Subscription | None = None
            try:
                sub = await Subscription.open(path, timeout=5.0)
            except ApiError as exc:
                misses += 1
                if misses == 1:
                    _say(err, f"setui: the agent does not answer ({exc.message}): trying "
                              "again", journal, WARNING)
            if sub is None:
                await asyncio.sleep(pause.delay(misses))
                continue
            misses = 0
            name[0] = config.vm_name or sub.hello.agent.vm_name
            _say(err, f"setui: {attached_words(sub, utc_now())}: its lines; this watch "
                      "records nothing (the agent does)", journal, INFO)
            try:
                state = sub.state
                document = state.state.document
                if tracker is None:  # what is there now, told by the lives the agent knows
                    tracker = Tracker()
                    changes = opening_changes(tracker.update(document, state.now),
                                              state.state.lives) if document else []
                else:  # what changed while this watch was not attached
                    changes = tracker.update(document, state.now, gap=_AWAY) \
                        if document else []
                health = state.state.health.at(time.monotonic())
                lines.show(health, state.now, changes, document=document,
                           recording=state.recording.recording)
                last = health
                freeze_heap_once()  # start-up is done: the first answer is printed
                async for push in sub:
                    if isinstance(push, StatePush):
                        state = push.state
                        if state.state.document is not None:
                            tracker.update(state.state.document, state.now)
                        last = state.state.health.at(time.monotonic())
                        lines.show(last, state.now, state.changes,
                                   document=state.state.document,
                                   recording=state.recording.recording)
                    elif isinstance(push, Tick):
                        last = push.health.at(time.monotonic())
                        lines.show(last, push.now, ())
                    elif isinstance(push, VmPush):  # learned by the agent after it greeted
                        name[0] = config.vm_name or push.vm.vm_name or name[0]
            except ApiError as exc:
                gone = replace(last, state=ConnectionState.STALE,
                               last_error=f"the agent went away ({exc.message}): "
                                          "reconnecting")
                lines.show(gone, utc_now(), (), kind="agent")
            finally:
                await sub.aclose()
    finally:
        pinger.cancel()
        notifier.stopping()
        notifier.close()


# Why changes are told as seen across a gap after the agent came back.
_AWAY = "this watch was not attached to the agent in between"


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
    # Where the agent answers, watch is a reader of it: one poller and one recorder per
    # VM. Asked once here; a restart of the agent later is waited out, not a fall back to
    # polling beside it.
    agent = agent_for(args, sys.stderr, "setui watch")
    if agent is not None:
        agent.close()
    try:
        return run_until_stopped(watch(config, as_json=args.json, record=args.record,
                                        out=sys.stdout, err=sys.stderr,
                                        agent=agent.path if agent is not None else None))
    except KeyboardInterrupt:
        return 0
