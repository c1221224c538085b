"""``setui approve EVENT_ID ...``: show, confirm, record, post, report.

The preview says what approval means: the event starts for every VM in its Resources,
not only this one, so a loud warning names the others. Without ``--yes`` the operator
answers ``Approve? [y/N]``; anything but yes (an empty line, end of input, Ctrl-C) is no,
and is recorded as a cancel. An event that lists other VMs, or not this one, asks for
the word "yes", and ``--yes`` alone refuses it (``--allow-other-vms``). What is posted is
what was shown: the Approver re-reads the document just before the POST and before each
retry, and a change is shown and asked again (with ``--yes``: named, exit 1). Exit
status: 0 all approved, 1 refused, failed or of unknown outcome, 2 usage, 3 declined by
the operator.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING

from setui.approval.outcome import ApprovalOutcome, Progress
from setui.commands.approveroutes import AttachedRoute, Route, StandaloneRoute, attached
from setui.commands.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, data_dir, reach_agent
from setui.core.clock import utc_now
from setui.core.model import Document, Event, is_this_vm
from setui.core.textsafe import printable, some_names
from setui.core.timefmt import duration, signed_countdown, stamp
from setui.settings.config import Config
from setui.system.identity import Identity

if TYPE_CHECKING:  # sqlite3 and httpx load only when approving, not for `setui --version`
    from setui.api.approving import AgentApprover
    from setui.api.client import AgentClient
    from setui.approval.approver import Approver
    from setui.core.client import ImdsClient
    from setui.store import Store
    from setui.store.reading import Record

__all__ = ["ApproveRequest", "add_arguments", "approve_command", "preview", "run"]

EXIT_DECLINED = 3  # the operator said no: nothing was refused, nothing failed
_ROUNDS = 3  # times an event that changed under the prompt is shown and asked again


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = (
        "Where the agent answers on its socket (setui agent, the VM's service), the agent's "
        "document is shown and the approval runs in the agent, as who the kernel says you "
        "are (root and group setui, or the approvers its config names), each try printed as "
        "it ends; this command asks IMDS nothing and writes no audit log of its own. Where "
        "the agent should answer and does not (a socket given that is not there, or the "
        "agent installed as the service), nothing is approved: --standalone approves from "
        "this process, into its own audit log, not the agent's.")
    parser.add_argument("event_ids", nargs="+", metavar="EVENT_ID",
                        help="the EventId(s) to approve, as in the current document: "
                             "the full id or a unique prefix of at least 6 characters")
    parser.add_argument("--yes", "-y", action="store_true",
                        help="do not ask for confirmation (for scripts); refuses events that "
                             "list other VMs or not this one, unless --allow-other-vms")
    parser.add_argument("--allow-other-vms", action="store_true",
                        help="with --yes: also approve events that list other VMs, or do "
                             "not list this one")
    parser.add_argument("--again", action="store_true",
                        help="with --yes: approve even an event already approved (or being "
                             "approved) from this VM")
    parser.add_argument("--vm-name", metavar="NAME", default=argparse.SUPPRESS,
                        help="this VM's name in Resources (default: the agent's, else "
                             "asked from IMDS; not known if it does not answer)")


@dataclass(frozen=True)
class ApproveRequest:
    event_ids: tuple[str, ...]
    endpoint: str
    api_version: str
    data_dir: Path | None = None
    history_days: int | None = 90
    vm_name: str | None = None
    read_only: bool = False
    yes: bool = False
    audit_forward: str | None = None  # None: SETUI_AUDIT_FORWARD, else auto
    allow_other_vms: bool = False
    again: bool = False
    store_timeout: float | None = None  # SQLite's busy wait; None: the store's own


def run(args: argparse.Namespace) -> int:
    config = getattr(args, "config_resolved", None)
    from setui.core.endpoint import DEFAULT_API_VERSION, DEFAULT_ENDPOINT

    request = ApproveRequest(
        event_ids=tuple(args.event_ids),
        endpoint=getattr(args, "endpoint", None) or DEFAULT_ENDPOINT,
        api_version=getattr(args, "api_version", None) or DEFAULT_API_VERSION,
        data_dir=data_dir(args),
        history_days=getattr(config, "history_days", 90),
        vm_name=getattr(args, "vm_name", None) or getattr(config, "vm_name", None),
        read_only=bool(getattr(config, "read_only", False)),
        yes=bool(args.yes),
        audit_forward=getattr(config, "audit_forward", None),
        allow_other_vms=bool(getattr(args, "allow_other_vms", False)),
        again=bool(getattr(args, "again", False)),
    )
    agent, code = _reach(getattr(args, "config_resolved", None), sys.stderr)
    if code is not None:
        return code
    try:
        return asyncio.run(approve_command(request, stdin=sys.stdin, out=sys.stdout,
                                           err=sys.stderr, agent=agent))
    except KeyboardInterrupt:
        return EXIT_FAILED  # said by the command: what it knows of what was sent


def _reach(config: Config | None, err: IO[str]) -> tuple[AgentClient | None, int | None]:
    """The agent to approve through; or None to approve from this process, where that
    goes around no agent; or an exit code, having said why not: the agent should answer
    (a socket given on purpose, or the agent installed as the service) and does not, and
    --standalone was not given. Told to run standalone where there is an agent, it says
    that the approval is not in the agent's audit log."""
    config = config or Config()
    if os.name != "posix":  # no Unix socket API off POSIX: no agent to go around
        return None, None
    found = reach_agent(config)
    if found.around is not None:
        err.write(f"setui approve: not approved: {printable(found.around, 700)}\n")
        return None, EXIT_USAGE if found.wrong else EXIT_FAILED
    if found.told and (found.given or found.service is not None):
        err.write("setui approve: standalone (--standalone): this process approves, and the "
                  "approval is recorded in your own audit log, not in the agent's audit "
                  "log\n")
    return found.client, None


# -- the preview -------------------------------------------------------------------------------
def _not_before(moment: datetime | None, now: datetime) -> str:
    """NotBefore as every front end writes it, and the countdown to it (core.timefmt)."""
    if moment is None:
        return "(none)"
    return f"{stamp(moment)}, {signed_countdown((moment - now).total_seconds())}"


def preview(event: Event, vm_name: str | None, now: datetime) -> list[str]:
    """The lines that show one event before it is approved."""
    source = f" ({printable(event.source.value, 20)})" if event.source is not None else ""
    lines = [
        f"  type         {printable(event.event_type.value, 40)}{source}",
        f"  status       {printable(event.status.value, 40)}",
        f"  NotBefore    {_not_before(event.not_before, now)}",
        f"  impact       {printable(event.impact, 20)}",
    ]
    shown = [printable(r, 80) + (" (this VM)" if is_this_vm(r, vm_name) else "")
             for r in event.resources]
    lines.append(f"  resources    {', '.join(shown) if shown else '(none listed)'}")
    if event.description:
        lines.append(f"  description  {printable(event.description, 200)}")
    others = [r for r in event.resources if not is_this_vm(r, vm_name)]
    if others:
        plural = "s" if len(others) != 1 else ""
        lines.append(f"  WARNING: approving starts this event for {len(others)} other VM"
                     f"{plural} too: {some_names(others, limit=10, width=80)}")
    if vm_name and event.resources and not event.affects(vm_name):
        lines.append(f"  NOTE: this VM ({printable(vm_name, 80)}) is not in its Resources")
    return lines


def _ask(stdin: IO[str] | None, out: IO[str], question: str = "Approve?", *,
         typed: bool = False) -> bool:
    """The operator's answer; ``typed``: only the word "yes" approves (the event reaches
    beyond this VM)."""
    out.write(f"{question} Type yes to approve: " if typed else f"{question} [y/N] ")
    out.flush()
    if stdin is None:
        out.write("\n")
        return False
    try:
        answer = stdin.readline()
    except (OSError, ValueError, KeyboardInterrupt):
        answer = ""
    if not answer.endswith("\n"):
        out.write("\n")  # end of input: keep the next line off the prompt
    if typed:
        return answer.strip().lower() == "yes"
    return answer.strip().lower() in ("y", "yes")


# -- the command --------------------------------------------------------------------------------
async def approve_command(request: ApproveRequest, *, stdin: IO[str] | None, out: IO[str],
                          err: IO[str], identity: Identity | None = None,
                          make_client: Callable[[str, str], ImdsClient] | None = None,
                          wall: Callable[[], datetime] | None = None,
                          agent: AgentClient | None = None) -> int:
    """Everything ``setui approve`` does, with its streams injected for tests; through
    ``agent`` when given (attached), else standalone."""
    now = wall or utc_now
    ids = tuple(i.strip() for i in request.event_ids)
    if not ids or any(not i for i in ids):
        err.write("setui approve: an EventId cannot be empty\n")
        if agent is not None:
            agent.close()
        return EXIT_USAGE
    route = attached(agent, request.read_only, now, err) if agent is not None else \
        standalone(request, identity, make_client, now, err)
    if isinstance(route, int):
        return route
    try:
        return await _approve(request, ids, route, stdin, out, err)
    except (asyncio.CancelledError, KeyboardInterrupt):
        err.write(f"setui approve: {route.interrupted()}\n")
        raise
    finally:
        await route.aclose()


def standalone(request: ApproveRequest, identity: Identity | None,
               make_client: Callable[[str, str], ImdsClient] | None,
               now: Callable[[], datetime], err: IO[str]) -> StandaloneRoute | int:
    from setui.approval.approver import Approver

    if make_client is None:
        from setui.core.client import ImdsClient

        make_client = ImdsClient
    try:
        client = make_client(request.endpoint, request.api_version)
    except ValueError as exc:
        err.write(f"setui approve: {exc}\n")
        return EXIT_USAGE
    store, problem = _open_store(request)
    approver = Approver(client, None if store is None else store.audit_log,
                        endpoint=client.endpoint, identity=identity,
                        read_only=request.read_only, store_problem=problem, wall=now)
    return StandaloneRoute(client, store, approver, now)


def _open_store(request: ApproveRequest) -> tuple[Store | None, str | None]:
    from setui.store import Store, StoreError

    wait = {} if request.store_timeout is None else {"timeout": request.store_timeout}
    try:
        return Store.open_dir(request.data_dir, history_days=request.history_days,
                              forward=request.audit_forward, **wait), None
    except StoreError as exc:
        return None, str(exc)


async def _approve(request: ApproveRequest, ids: tuple[str, ...], route: Route,
                   stdin: IO[str] | None, out: IO[str], err: IO[str]) -> int:
    document, fetch_problem = await route.read()
    seen_at = route.clock.now()
    try:
        return await _decide(request, ids, route, document, fetch_problem, stdin, out, err)
    finally:
        route.keep(document, seen_at, err)


def _resolve(ids: tuple[str, ...], document: Document | None, record: Record | None,
             err: IO[str]) -> list[str] | None:
    """Full EventIds for what was typed (core.eventids); None, having said why, when any
    is unknown or ambiguous: then nothing is sent and nothing recorded (a typo is not an
    approval attempt)."""
    from setui.core.eventids import resolve
    from setui.store.errors import RecordError

    current = [e.event_id for e in document.events] if document is not None else []
    full: list[str] = []
    for typed in ids:
        known: list[str] = []
        if record is not None:
            with contextlib.suppress(RecordError):
                known = record.event_ids(typed[:3], limit=500)
        found = resolve(typed, current, known)
        if found.event_id is None and document is None:
            # Without a document a typo cannot be told from a real event: the id goes on
            # as typed, and is refused (and recorded) for want of a document.
            full.append(typed)
            continue
        if found.event_id is None:
            err.write(f"setui approve: {printable(found.problem, 600)} Nothing was "
                      "approved; `setui events` lists the current events.\n")
            return None
        full.append(found.event_id)
    return full


async def _decide(request: ApproveRequest, typed: tuple[str, ...], route: Route,
                  document: Document | None, fetch_problem: str | None,
                  stdin: IO[str] | None, out: IO[str], err: IO[str]) -> int:
    from setui.approval.snapshot import confirmed, find_event, other_vms

    approver, now = route.approver, route.clock.now
    if route.record is not None:  # an event that left is refused with when and how
        approver.story = route.record.event_story
    if fetch_problem:
        err.write(f"setui approve: cannot read the events document: "
                  f"{printable(fetch_problem, 300)}\n")
    resolved = _resolve(typed, document, route.record, err)
    if resolved is None:
        return EXIT_FAILED
    ids = tuple(dict.fromkeys(resolved))
    this_vm = await route.this_vm(request.vm_name)
    vm_name = this_vm.name
    if vm_name is None:  # then every event reaches beyond this VM, as far as setui knows
        err.write(f"setui approve: {this_vm}\n")
    approver.vm_name = vm_name
    # What its claims are keyed by; not known: the endpoint, as before (store.vmkeys).
    approver.vm_id = this_vm.vm_id
    progress = _progress(out)
    # --yes approves only what concerns this VM alone, unless the operator opted in;
    # asked interactively, such an event needs the word "yes".
    allow = request.allow_other_vms or not request.yes
    again = request.again
    # The agent's refusal of who asks (who may approve, what to do) is said once, by the
    # report below, not beside each event too.
    whoever = route.approver.why_not() if isinstance(route, AttachedRoute) \
        and not request.read_only else None
    for _round in range(_ROUNDS):
        going: list[str] = []
        refused: dict[str, str] = {}
        typed_yes = False
        claims: list[str] = []
        for number, event_id in enumerate(ids, 1):
            event = find_event(document, event_id)
            reason = approver.refusal(event_id, document, allow_other_vms=allow)
            title = event.event_id if event else event_id
            out.write(f"Event {number} of {len(ids)}: {printable(title, 80)}\n")
            if event is not None:
                out.write("\n".join(preview(event, vm_name, now())) + "\n")
            if reason is not None:
                if reason != whoever:
                    out.write(f"  REFUSED: {printable(reason, 300)}\n")
                refused[event_id] = reason
                continue
            going.append(event_id)
            assert event is not None
            typed_yes = typed_yes or other_vms(event, vm_name) is not None
            claim = None if request.yes else approver.claim(event.event_id)
            if claim is not None:
                claims.append(f"  NOTE: {printable(claim.describe(), 300)}")
        for line in claims:
            out.write(line + "\n")
        if document is not None:
            out.write(f"(incarnation {document.incarnation}, endpoint "
                      f"{printable(route.endpoint, 100)})\n")
        if not going:
            return _report(_unrecorded(approver, await approver.approve(
                list(ids), document, allow_other_vms=allow, progress=progress), err), out)
        if not request.yes:
            question = "Approve again?" if claims else "Approve?"
            if not _ask(stdin, out, question, typed=typed_yes):
                if not approver.record_cancel(going, document) and approver.store_error:
                    err.write("setui approve: cancelled, and it could not be recorded in the "
                              f"audit log: {printable(approver.store_error, 400)}\n")
                _refuse(approver, refused, document, err)
                out.write("Cancelled: nothing was approved.\n")
                return EXIT_DECLINED
            again = again or bool(claims)
        assert document is not None
        shown = {i: c for i in going if (c := confirmed(document, i)) is not None}
        outcomes = _unrecorded(approver, await approver.approve(
            list(ids), document, confirmed_as=shown, allow_other_vms=allow, again=again,
            progress=progress), err)
        log = approver.audit_log
        if log is not None and log.witness_problem:  # records written, end unvouched
            err.write(f"setui approve: warning: {printable(log.witness_problem, 400)}\n")
        if log is not None and log.forward_problem:  # kept here; the copy did not leave
            err.write("setui approve: warning: the audit record is kept on this VM but its "
                      f"copy did not leave it: {printable(log.forward_problem, 300)} "
                      "(it is sent again with the next record; `setui audit` marks it)\n")
        retry = [o for o in outcomes if o.ask_again]
        if request.yes or not retry:
            code = _report(outcomes, out)
            if request.yes and any(o.refused and o.ask_again and not o.changes
                                   for o in outcomes):  # an earlier approval claims it
                out.write("--again sends anyway.\n")
            return code
        # What was confirmed is not what would be approved now: say what changed (or who
        # approved it already), show the events as they are, and ask again.
        _report(outcomes, out)
        out.write("The events above were not approved as confirmed; they are shown again "
                  "as they are now.\n\n")
        document, problem = await route.read()
        if document is None:
            err.write(f"setui approve: cannot read the events document: "
                      f"{printable(problem, 300)}\n")
            return EXIT_FAILED
        ids = tuple(o.event_id for o in retry)
    out.write("The events kept changing: nothing more was approved.\n")
    return EXIT_FAILED


def _progress(out: IO[str]) -> Callable[[Progress], None]:
    """Each try that did not approve, as it happens, in the words of what became of it (a
    refusal, no answer, the document unread so nothing sent): the service asked to try
    again, and an approval may take up to 70 s of tries."""
    def said(update: Progress) -> None:
        out.write(f"{printable(update.event_id, 80)}: try {update.attempt}: "
                  f"{printable(update.last_error, 300)}; trying again in "
                  f"{duration(update.next_in)}\n")
        out.flush()
    return said


def _refuse(approver: Approver | AgentApprover, reasons: dict[str, str],
            document: Document | None, err: IO[str]) -> None:
    for event_id, reason in reasons.items():
        _unrecorded(approver, approver.record_refusal([event_id], document, reason), err)


def _unrecorded(approver: Approver | AgentApprover, outcomes: list[ApprovalOutcome],
                err: IO[str]) -> list[ApprovalOutcome]:
    """Say which refusals the audit log failed to keep: the operator would otherwise
    believe the log tells the whole story. ``store_error`` is set only by a failed write
    to an open, writable store, so an unrecorded refusal with it set is such a failure;
    one whose message names the error already (nothing was sent because the attempt
    could not be written) is not said twice."""
    problem = approver.store_error
    if problem:
        for outcome in outcomes:
            if outcome.refused and outcome.record_seq is None and problem not in outcome.message:
                err.write(f"setui approve: {printable(outcome.event_id, 80)} was refused, and "
                          "it could not be recorded in the audit log: "
                          f"{printable(problem, 400)}\n")
    return outcomes


def _report(outcomes: list[ApprovalOutcome], out: IO[str]) -> int:
    for outcome in outcomes:
        record = f" (audit record {outcome.record_seq})" if outcome.record_seq else ""
        out.write(f"{printable(outcome.event_id, 80)}: {printable(outcome.message, 400)}"
                  f"{record}\n")
    if any(o.approved for o in outcomes):
        out.write("An approved event may still wait for other VMs or tenants on the host; "
                  "watch for it to become Started.\n")
    if any(o.unknown for o in outcomes):
        out.write("An approval of unknown outcome may have reached the service: `setui "
                  "events` shows whether the event started; it stays claimed, and only "
                  "--again sends it again.\n")
    return EXIT_OK if outcomes and all(o.approved for o in outcomes) else EXIT_FAILED
