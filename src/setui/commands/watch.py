"""``setui watch``: one line per change, for a terminal, a log file or a pipe.

Run as a service, it keeps the incarnation history even when nobody is logged in.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from typing import IO, Any

from setui.config import Config
from setui.core.health import ConnectionState, Health, PollResult
from setui.core.model import Event
from setui.core.tracker import Change
from setui.session import run_until_stopped
from setui.textsafe import printable

__all__ = ["add_arguments", "change_record", "connection_record", "format_record", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options live in cli.py; kept for symmetry with the other commands."""


def _iso(when: datetime | None) -> str | None:
    if when is None:
        return None
    return when.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def change_record(change: Change, vm_name: str | None) -> dict[str, Any]:
    """The stable JSON shape of one change (``--json``)."""
    event: Event | None = change.event
    return {
        "time": _iso(change.seen_at),
        "incarnation": change.incarnation,
        "change": change.kind.value,
        "event_id": event.event_id if event else None,
        "event_type": event.event_type.value if event else None,
        "status": event.status.value if event else None,
        "not_before": _iso(event.not_before) if event else None,
        "resources": list(event.resources) if event else [],
        "this_vm": event.affects(vm_name) if event else False,
        "source": event.source.value if event and event.source else None,
        "duration": event.duration if event else None,
        "description": event.description if event else None,
        "detail": change.detail or None,
        "initial": change.initial,
    }


def connection_record(health: Health, when: datetime) -> dict[str, Any]:
    return {
        "time": _iso(when),
        "change": "connection",
        "state": health.state.value,
        "error": health.last_error,
        "failures": health.consecutive_failures,
        "latency_ms": round(health.latency * 1000, 1) if health.latency is not None else None,
        "clock_skew": health.clock_skew,
    }


def format_record(record: dict[str, Any]) -> str:
    """A record as one human line; every network string is made printable."""
    time = record["time"] or "-"
    if record["change"] == "connection":
        state = record["state"]
        text = {
            "enabling": "enabling scheduled events (the first answer can take up to 2 minutes)",
            "live": "connection live",
        }.get(state, f"connection {state}")
        if record["error"] and state != "live":
            text += f": {printable(record['error'], 300)}"
        return f"{time}  {text}"
    parts = [
        time,
        f"#{record['incarnation']}",
        f"{record['change']:<11}",
        printable(record["event_type"] or "-", 20),
        printable(record["status"] or "-", 20),
        printable(record["event_id"] or "-", 64),
    ]
    if record["not_before"]:
        parts.append(f"NotBefore {record['not_before']}")
    if record["resources"]:
        shown = ", ".join(printable(r, 64) for r in record["resources"][:5])
        more = len(record["resources"]) - 5
        parts.append(f"[{shown}{f', +{more} more' if more > 0 else ''}]")
    if record["this_vm"]:
        parts.append("(this VM)")
    if record["detail"]:
        parts.append(f"- {printable(record['detail'], 300)}")
    return "  ".join(parts)


class _Printer:
    def __init__(self, out: IO[str], as_json: bool) -> None:
        self.out = out
        self.as_json = as_json

    def emit(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False) if self.as_json else format_record(record)
        self.out.write(line + "\n")
        self.out.flush()


async def watch(config: Config, *, as_json: bool, record: bool, out: IO[str],
                err: IO[str]) -> int:
    from setui.core.poller import Poller
    from setui.session import make_client, open_store, resolve_vm_name

    printer = _Printer(out, as_json)
    store, problem = open_store(config) if record else (None, None)
    if problem:
        err.write(f"setui: not recording history: {problem}\n")
        err.flush()
    client = make_client(config)
    try:
        vm_name = await resolve_vm_name(client, config)
        poller = Poller(client, interval=config.interval)
        last_state: tuple[ConnectionState, str | None] | None = (poller.health.state, None)
        store_failed = False
        printer.emit(connection_record(poller.health, datetime.now(timezone.utc)))
        async for result in poller.results():
            state = (result.health.state, _error_kind(result))
            if state != last_state:
                printer.emit(connection_record(result.health, datetime.now(timezone.utc)))
                last_state = state
            for change in result.changes:
                printer.emit(change_record(change, vm_name))
            if store is not None and result.fresh and result.document is not None:
                store_failed = _record(store, result, config, err, store_failed)
    finally:
        await client.aclose()
        if store is not None:
            store.close()
    return 0


def _error_kind(result: PollResult) -> str | None:
    return result.error.kind if result.error is not None else None


def _record(store: Any, result: PollResult, config: Config, err: IO[str], failed: bool) -> bool:
    """Record a document; say once when the store fails and once when it recovers."""
    from setui.store import StoreError

    assert result.document is not None
    try:
        store.record_document(result.document, seen_at=result.seen_at or datetime.now(
            timezone.utc), endpoint=config.endpoint, changes=result.changes)
    except StoreError as exc:
        if not failed:
            err.write(f"setui: cannot record history: {exc}\n")
            err.flush()
        return True
    if failed:
        err.write("setui: recording history again\n")
        err.flush()
    return False


def run(args: argparse.Namespace) -> int:
    config: Config = args.config_resolved
    try:
        return run_until_stopped(watch(config, as_json=args.json, record=args.record,
                                        out=sys.stdout, err=sys.stderr))
    except KeyboardInterrupt:
        return 0
