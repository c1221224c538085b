"""``setui events [--json]``: the current events, once, most urgent first.

What an operator runs before ``setui approve`` (full EventIds to copy, countdowns, which
events are this VM's, which were approved from here and by whom, and which were sent an
approval whose outcome is unknown) and what scripts read.
One GET; the countdowns are counted on the service's clock (its Date header), as every
other front end counts them. What it read goes into the history, as ``approve``'s reading
does, so the history knows this moment was seen. Exit 0 with the list (empty included),
1 when the document cannot be read.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import IO, TYPE_CHECKING, Any

from setui.commands.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    agent_for,
    agent_vm,
    open_readonly,
    record_reading,
    when,
)
from setui.core.clock import ServiceClock, utc_now
from setui.core.model import Document, Event, is_this_vm
from setui.core.order import sort_key
from setui.core.textsafe import printable
from setui.core.timefmt import iso, signed_countdown
from setui.session import ONE_SHOT_TRIES, ThisVm
from setui.store.records import APPROVED, UNKNOWN

if TYPE_CHECKING:
    from setui.api.client import AgentClient
    from setui.core.client import ImdsClient
    from setui.store import AuditRecord
    from setui.store.reading import Record

__all__ = ["add_arguments", "countdown", "event_json", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = (
        "Where the agent answers on its socket (setui agent, the VM's service), the events "
        "are the agent's: no request to IMDS, nothing recorded here. stderr says 'attached "
        "to the agent (pid N, up ...)', and that its state is stale when its connection is "
        "not live (--json: the key 'attached'). --standalone reads IMDS itself.")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object (ASCII, stable keys) instead of a table")
    parser.add_argument("--vm-name", metavar="NAME", default=argparse.SUPPRESS,
                        help="this VM's name in Resources (default: the agent's, else "
                             "asked from IMDS; not known if it does not answer)")


def countdown(moment: datetime | None, now: datetime) -> str:
    """How far NotBefore is (core.timefmt): ``T-14:32``, ``T+0:05`` once passed."""
    if moment is None:
        return "-"
    return signed_countdown((moment - now).total_seconds())


def event_json(event: Event, vm_name: str | None, now: datetime,
               approval: AuditRecord | None) -> dict[str, Any]:
    """One event for ``--json``: always the same keys. ``approval``: as
    ``AuditLog.approvals(unknown=True)`` gives it; ``approved_*`` only for an accepted one."""
    seconds = None if event.not_before is None else round(
        (event.not_before - now).total_seconds(), 1)
    outcome = _outcome(approval)
    if outcome != APPROVED:
        approval = None
    return {
        "event_id": event.event_id,
        "event_type": event.event_type.value,
        "status": event.status.value,
        "not_before": iso(event.not_before),
        "seconds_to_not_before": seconds,
        "this_vm": event.affects(vm_name) if vm_name else None,  # not known: null
        "resources": list(event.resources),
        "source": event.source.value if event.source is not None else None,
        "duration": event.duration,
        "description": event.description,
        "approved_by": approval.user if approval is not None else None,
        "approved_at": iso(approval.time) if approval is not None else None,
        "approved_record": approval.seq if approval is not None else None,
        "approval_outcome": outcome,
    }


def _outcome(approval: AuditRecord | None) -> str | None:
    """"approved", "unknown" (sent, and nobody knows what the service made of it), or
    None when no approval from this VM stands."""
    if approval is None:
        return None
    return APPROVED if approval.result == APPROVED else UNKNOWN


def _table(events: list[Event], vm_name: str | None, now: datetime,
           approvals: dict[str, AuditRecord]) -> list[str]:
    header = ("EVENT ID", "TYPE", "STATUS", "NOT BEFORE (UTC)", "IN", "THIS VM", "APPROVED",
              "RESOURCES")
    rows = [header]
    for event in events:
        approval = approvals.get(event.event_id)
        approved = "-" if approval is None else \
            f"{when(approval.time)} by {printable(approval.user, 24)}"
        if _outcome(approval) == UNKNOWN:
            approved = f"approval outcome unknown: sent {approved}"
        names = [printable(r, 40) + (" (this VM)" if is_this_vm(r, vm_name) else "")
                 for r in event.resources]
        resources = ", ".join(names[:6]) + (f" and {len(names) - 6} more"
                                             if len(names) > 6 else "")
        rows.append((printable(event.event_id, 80), printable(event.event_type.value, 16),
                     printable(event.status.value, 16),
                     when(event.not_before) if event.not_before else "-",
                     countdown(event.not_before, now),
                     "?" if not vm_name else "yes" if event.affects(vm_name) else "-",
                     approved, resources or "(none listed)"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
            + "  " + row[-1] for row in rows]


@dataclass(frozen=True)
class _Reading:
    """The events now, as one source (IMDS or the agent) has them."""

    document: Document
    now: datetime  # the service's time
    endpoint: str
    this_vm: ThisVm
    record: Record | None  # where approvals are read: the agent's, or the store's
    attached: dict[str, Any] | None  # the agent's, for --json: null standalone

    def approvals(self, err: IO[str]) -> dict[str, AuditRecord]:
        """Who approved which event, from the audit log (then closed); empty, and said,
        if it cannot tell."""
        from setui.store.errors import RecordError

        if self.record is None:
            return {}
        try:
            with contextlib.closing(self.record):
                return self.record.approvals([e.event_id for e in self.document.events],
                                             unknown=True)
        except RecordError as exc:
            err.write(f"setui events: who approved what is not known: "
                      f"{printable(exc.message, 300)}\n")
            return {}


async def _from_imds(args: argparse.Namespace, err: IO[str],
                     make_client: Callable[[str, str], ImdsClient] | None,
                     wall: Callable[[], datetime]) -> _Reading | int:
    """One GET, kept in the history; the store read for approvals."""
    from setui.core.endpoint import DEFAULT_API_VERSION, DEFAULT_ENDPOINT
    from setui.core.errors import ImdsError
    from setui.store.errors import RecordError

    if make_client is None:
        from setui.core.client import ImdsClient

        make_client = ImdsClient
    config = getattr(args, "config_resolved", None)
    try:
        client = make_client(getattr(args, "endpoint", None) or DEFAULT_ENDPOINT,
                             getattr(args, "api_version", None) or DEFAULT_API_VERSION)
    except ValueError as exc:
        err.write(f"setui events: {exc}\n")
        return EXIT_USAGE
    try:
        try:
            result = await client.fetch()
        except ImdsError as exc:
            err.write(f"setui events: cannot read the events document: "
                      f"{printable(exc.message or str(exc), 300)}\n")
            return EXIT_FAILED
        document = result.document
        if document is None:
            err.write("setui events: the service answered without a document\n")
            return EXIT_FAILED
        service = ServiceClock(wall=wall)
        service.observe(result.server_date, result.received_mono)
        now = service.now()
        this_vm = ThisVm(getattr(args, "vm_name", None) or getattr(config, "vm_name", None))
        await this_vm.learn(client, tries=ONE_SHOT_TRIES)
    finally:
        await client.aclose()
    problem = record_reading(args, document, seen_at=now, endpoint=client.endpoint,
                             vm_name=this_vm.name)
    if problem is not None:
        err.write(f"setui events: not recorded in the history: {printable(problem, 300)}\n")
    try:
        record = open_readonly(args)
    except RecordError as exc:
        err.write(f"setui events: who approved what is not known: "
                  f"{printable(exc.message, 300)}\n")
        record = None
    return _Reading(document, now, client.endpoint, this_vm, record, None)


def _from_agent(args: argparse.Namespace, agent: AgentClient, err: IO[str],
                wall: Callable[[], datetime], as_json: bool) -> _Reading | int:
    """The agent's state: no request to IMDS, nothing recorded here (the agent records)."""
    from setui.api.attach import attached_words, not_live
    from setui.api.client import ApiError

    config = getattr(args, "config_resolved", None)
    info = agent.hello.agent
    try:
        state, _plan = agent.state()
    except ApiError as exc:
        agent.close()
        err.write(f"setui events: cannot read the agent's state: "
                  f"{printable(exc.message, 300)}\n")
        return EXIT_FAILED
    mono = time.monotonic()
    health = state.state.health.at(mono)
    stale = not_live(health, mono)
    words = attached_words(agent, wall())
    if not as_json:
        err.write(f"setui events: {words}\n")
        if stale is not None:
            err.write(f"setui events: {stale}\n")
    document = state.state.document
    if document is None:
        agent.close()
        err.write("setui events: the agent has no events document yet"
                  + (f": {stale}" if stale else "") + "\n")
        return EXIT_FAILED
    service = ServiceClock(wall=wall)
    service.observe(state.now, mono)
    this_vm = agent_vm(agent, getattr(args, "vm_name", None)
                       or getattr(config, "vm_name", None))
    age = health.age(mono)
    attached = {"pid": info.pid, "since": iso(info.since), "words": words,
                "connection": health.state.value, "live": stale is None,
                "last_answer_seconds_ago": None if age is None else round(age, 1),
                "error": health.last_error, "problem": stale}
    return _Reading(document, service.now(), info.endpoint, this_vm, agent, attached)


async def list_events(args: argparse.Namespace, *, out: IO[str], err: IO[str],
                      make_client: Callable[[str, str], ImdsClient] | None = None,
                      wall: Callable[[], datetime] = utc_now) -> int:
    """Everything ``setui events`` does, with its streams injected for tests: from the
    agent when it answers, else from IMDS; the same output either way."""
    as_json = bool(getattr(args, "json", False))
    agent = agent_for(args, err, "setui events")
    reading = (_from_agent(args, agent, err, wall, as_json) if agent is not None
               else await _from_imds(args, err, make_client, wall))
    if isinstance(reading, int):
        return reading
    document, now, vm_name = reading.document, reading.now, reading.this_vm.name
    events = sorted(document.events, key=lambda e: sort_key(e, vm_name))
    approvals = reading.approvals(err)
    if as_json:
        out.write(json.dumps({
            "time": iso(now), "endpoint": reading.endpoint,
            "incarnation": document.incarnation, "vm_name": vm_name,
            "events": [event_json(e, vm_name, now, approvals.get(e.event_id))
                       for e in events], "attached": reading.attached},
            ensure_ascii=True) + "\n")
        return EXIT_OK
    out.write(f"Incarnation {document.incarnation} at {when(now)}, "
              f"{printable(reading.endpoint, 100)}; "
              f"{f'this VM: {printable(vm_name, 80)}' if vm_name else reading.this_vm}\n")
    if not events:
        out.write("No scheduled events.\n")
        return EXIT_OK
    out.write("\n".join(_table(events, vm_name, now, approvals)) + "\n")
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    return asyncio.run(list_events(args, out=sys.stdout, err=sys.stderr))
