"""``setui report``: what happened to each event, as Markdown for a postmortem or JSON.

Per event: its type and resources, when it was first seen, its NotBefore and every
reschedule, the notice it gave against the documented minimum, who held the agent's
automation for it (from when to when), each run of the agent's hooks (step, start, end,
exit), who approved it and when (and how long after it appeared), when it started against
its NotBefore, what the agent
measured of it (a stall, a boot), when it went and how sure that is, the refusals; the
holes in the record, when nothing was recording; and the stalls and boots with no event.
Read-only: the agent's record through its API when it answers, else the store. Text from
the network or the audit log is made printable and its Markdown neutralised, so the
report pastes as it is.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import re
import sys
from datetime import datetime, timezone
from typing import IO, TYPE_CHECKING, Any

from setui.commands.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    READS_THE_AGENT,
    read_record,
)
from setui.commands.history import parse_since
from setui.core.impact import BOOT, STALL, Impact, clocks_words, impact_words
from setui.core.notice import DEFAULT_TERMINATE_NOTICE, AdvanceNotice, notice_words
from setui.core.textsafe import printable
from setui.core.timefmt import duration, iso, stamp
from setui.store.story import hold_words, hook_run_words

if TYPE_CHECKING:
    from setui.monitor.report import EventReport, OperatorAction, Report
    from setui.store.records import Hold, HookRun

__all__ = ["add_arguments", "hold_json", "hook_run_json", "markdown", "report_command",
           "report_json", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = READS_THE_AGENT
    parser.add_argument("--from", dest="since", type=parse_since, metavar="TIME",
                        help="events alive from TIME: 2h, 30m, 7d ago, or ISO 8601 in UTC")
    parser.add_argument("--to", dest="until", type=parse_since, metavar="TIME",
                        help="up to TIME (default: the end of the record)")
    parser.add_argument("--format", choices=("md", "json"), default="md",
                        help="Markdown (default) or JSON with stable keys")


def run(args: argparse.Namespace) -> int:
    return report_command(args, out=sys.stdout, err=sys.stderr)


def report_command(args: argparse.Namespace, *, out: IO[str], err: IO[str]) -> int:
    from setui.monitor.replay import load_recording
    from setui.monitor.report import build_report
    from setui.store.errors import RecordError

    since, until = getattr(args, "since", None), getattr(args, "until", None)
    if since is not None and until is not None and since > until:
        err.write("setui report: --from is after --to\n")
        return EXIT_USAGE
    try:
        store = read_record(args, err, "setui report")
        if store is None:
            err.write("setui report: nothing has been recorded yet\n")
            return EXIT_FAILED
        with contextlib.closing(store):
            recording = load_recording(store, since=since, until=until)
            # Read to its end, the record may have stopped being kept there: nothing
            # has recorded since (an agent that crashed, a watch stopped). The recording
            # ends where the record does; the report of it says that hole too.
            since_end = [h for h in store.holes(endpoint=recording.endpoint) if h.open] \
                if recording is not None and until is None else []
    except RecordError as exc:
        err.write(f"setui report: {exc}\n")
        return EXIT_FAILED
    if recording is None:
        err.write("setui report: nothing was recorded in that time\n")
        return EXIT_FAILED
    config = getattr(args, "config_resolved", None)
    report = build_report(recording, since=since, until=until,
                          terminate_notice=getattr(config, "terminate_notice",
                                                   DEFAULT_TERMINATE_NOTICE))
    if since_end and not any(h.open for h in report.holes):
        report = dataclasses.replace(report, holes=(*report.holes, *since_end))
    if getattr(args, "format", "md") == "json":
        out.write(json.dumps(report_json(report), ensure_ascii=True, indent=2) + "\n")
    else:
        out.write(markdown(report))
    return EXIT_OK


# -- Markdown --------------------------------------------------------------------------------
# What makes markup inside a line: emphasis, code, links and images (their brackets:
# parentheses alone are none), HTML and autolinks, tables, strikethrough, a heading's
# closing #s. Nothing here starts a line, so list and heading markers are not needed;
# escaping more only shows backslashes where the report is read as text.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>#|~])")


def md(text: object, limit: int = 200) -> str:
    """Network or audit text for Markdown: printable, and none of it read as markup."""
    return _MD_SPECIAL.sub(r"\\\1", printable(text, limit))


def _who(act: OperatorAction) -> str:
    where = f" from {md(act.ssh_client, 60)}" if act.ssh_client else ""
    return f"{md(act.user, 40)}{where} on {md(act.host, 60)}"


def _after(moment: datetime, since: datetime) -> str:
    seconds = (moment - since).total_seconds()
    return f"{duration(seconds)} after it appeared" if seconds >= 0 else "before it appeared"


def _started(event: EventReport) -> str:
    if event.started_at is None:
        return "not seen to start"
    if event.appeared_started:
        return (f"already Started when first seen, {stamp(event.started_at)}: when it "
                "started is not known")
    text = stamp(event.started_at)
    if not event.started_certain:
        text += " (seen then: it started sometime in a gap before)"
    ahead = event.start_vs_not_before
    if ahead is not None:
        if abs(ahead) < 1:
            text += ", at its NotBefore"
        elif ahead > 0:
            text += f", {duration(ahead)} before its NotBefore"
        else:
            text += f", {duration(-ahead)} after its NotBefore"
    return text


_FATES = {
    "completed": "completed: it left the document after it started",
    "cancelled": "cancelled by Azure: it left while still Scheduled, its NotBefore ahead",
    "gone": "gone, not seen to end: whether it ran is not known",
}


def _went(event: EventReport) -> str:
    if event.fate is None or event.gone_at is None:
        return "still in the document at the end of the report"
    sure = "certain" if event.fate_certain else "not certain"
    text = f"{stamp(event.gone_at)}, {_FATES.get(event.fate, md(event.fate))} ({sure})"
    if event.fate_detail:
        text += f"; {md(event.fate_detail, 300)}"
    return text


def _event_md(event: EventReport) -> list[str]:
    lines = [f"## {md(event.event_type, 24)} {md(event.event_id, 80)}", ""]
    resources = ", ".join(md(r, 60) for r in event.resources[:50]) or "none listed"
    if len(event.resources) > 50:
        resources += f" and {len(event.resources) - 50} more"
    first = f"{stamp(event.first_seen)}, incarnation {event.first_incarnation}"
    if event.initial:
        first += " (already there when the record began: it may be older)"
    lines += [f"- **Resources:** {resources}", f"- **First seen:** {first}"]
    if event.appeared_started:
        lines.append("- **NotBefore:** none: it appeared already Started (no notice)")
    else:
        lines.append(f"- **NotBefore:** {stamp(event.not_before)}, as first announced")
    for move in event.reschedules:
        lines.append(f"- **Rescheduled:** NotBefore {stamp(move.old, local=False)} -> "
                     f"{stamp(move.new, local=False)}, seen {stamp(move.seen_at)}, "
                     f"incarnation {move.incarnation}")
    if event.notice is not None:
        lines.append(f"- **Notice:** {md(notice_words(event.notice), 300)}")
    for hold in event.holds:
        lines.append(f"- **Held:** {md(hold_words(hold), 400)} (audit #{hold.seq}"
                     + (f", #{hold.release_seq})" if hold.release_seq is not None else ")"))
    lines += [f"- **Hook run:** {md(hook_run_words(run), 400)}" for run in event.hook_runs]
    approvals = [a for a in event.acts if a.kind != "refused"]
    if not approvals:
        lines.append("- **Approved:** not by anyone through setui on this VM")
    for act in approvals:
        lines.append(f"- **{act.kind[:1].upper()}{act.kind[1:]}:** by {_who(act)}, "
                     f"{stamp(act.at)}, {_after(act.at, event.first_seen)} "
                     f"({md(act.detail, 200)}; audit #{act.seq})")
    lines.append(f"- **Started:** {_started(event)}")
    lines += [f"- **Impact:** {md(impact_words(i), 300)} ({md(clocks_words(i), 200)})"
              for i in event.impacts]
    if not event.impacts and event.impact_measured is not None:
        so_far = " so far" if event.fate is None else ""  # still under way at the end
        lines.append("- **Impact:** " + (
            f"none measured{so_far}: no stall over 0.5s and no boot while the agent's "
            "heartbeat ran" if event.impact_measured else
            "not measured: no setui agent kept a heartbeat all the while it was under way"))
    lines.append(f"- **Went:** {_went(event)}")
    for act in (a for a in event.acts if a.kind == "refused"):
        lines.append(f"- **Refused:** approval by {_who(act)}, {stamp(act.at)}, refused by "
                     f"setui, nothing sent: {md(act.detail, 200)} (audit #{act.seq})")
    return [*lines, ""]


def _heartbeat_runs(report: Report) -> str:
    """When the agent's heartbeat ran in the window, every run of it: "; the agent's
    heartbeat ran from A to B and has run since C" (nothing to add without runs)."""
    def run(begin: datetime, end: datetime) -> str:
        same_day = begin.astimezone(timezone.utc).date() == end.astimezone(timezone.utc).date()
        return f"from {stamp(begin)} to {stamp(end, date=not same_day)}"

    ended = [run(begin, end) for begin, end in report.measuring_spans if end is not None]
    since = report.measuring_since
    if since is None:
        return f"; the agent's heartbeat ran {', '.join(ended)}" if ended else ""
    earlier = f"ran {', '.join(ended)} and " if ended else ""
    return f" so far; the agent's heartbeat {earlier}has run since {stamp(since)}"


def markdown(report: Report) -> str:
    """The report as Markdown that pastes into a postmortem as it is."""
    lines = [f"# Scheduled events: {stamp(report.start)} to {stamp(report.end)}", ""]
    lines.append(f"- **Endpoint:** {md(report.endpoint, 200)}")
    if report.incarnations:
        lines.append(f"- **Incarnations recorded:** {len(report.incarnations)} "
                     f"({report.incarnations[0]} to {report.incarnations[-1]})")
    else:
        lines.append("- **Incarnations recorded:** none in that time")
    lines.append(f"- **Events:** {len(report.events)}")
    for head, short in (("Less notice than documented:**", report.short_notice),
                        ("Less notice than documented, other VMs' events** (the agent "
                         "tells only this VM's):", report.short_notice_other_vms)):
        if short:
            lines.append(f"- **{head} {len(short)} event{'s' * (len(short) != 1)}: "
                         + ", ".join(f"{md(e.event_type, 24)} {md(e.event_id, 80)}"
                                     for e in short))
    if not report.measured:
        lines.append("- **Stalls and boots:** not measured (no setui agent kept a heartbeat "
                     "in that time)")
    elif not report.unannounced:
        lines.append("- **Stalls and boots with no event announced:** none measured"
                     + _heartbeat_runs(report))
    else:
        lines.append("- **Stalls and boots with no event announced:**")
        lines += [f"  - {md(impact_words(i), 300)} ({md(clocks_words(i), 200)})"
                  for i in report.unannounced]
    if not report.sessions_known:
        lines.append("- **Holes in the record:** not known (this store predates recording "
                     "sessions)")
    elif not report.holes:
        lines.append("- **Holes in the record:** none: something was recording throughout")
    else:
        lines.append("- **Holes in the record** (nothing was recording; what changed then "
                     "was not seen):")
        lines += [f"  - {stamp(h.start)} to "
                  f"{'now' if h.open else stamp(h.end)} ({duration(h.seconds)})"
                  for h in report.holes]
    lines.append("")
    for event in report.events:
        lines += _event_md(event)
    if not report.events:
        lines += ["No event was alive in that time.", ""]
    return "\n".join(lines)


# -- JSON ------------------------------------------------------------------------------------
def _act_json(act: OperatorAction) -> dict[str, Any]:
    return {"time": iso(act.at), "kind": act.kind, "user": act.user,
            "ssh_client": act.ssh_client, "host": act.host, "detail": act.detail,
            "audit_seq": act.seq}


def notice_json(notice: AdvanceNotice | None) -> dict[str, Any] | None:
    """An event's notice for machines: seconds, null where not known, and why."""
    if notice is None:
        return None
    return {"seconds": notice.seconds, "to_started_seconds": notice.to_start,
            "minimum_seconds": notice.minimum, "short": notice.short,
            "appeared_started": notice.appeared_started, "unknown": notice.unknown,
            "words": notice_words(notice)}


def impact_json(impact: Impact) -> dict[str, Any]:
    """A stall or a boot for machines; ``seconds``: the impact's length (core.impact)."""
    return {"kind": impact.kind, "at": iso(impact.at), "seconds": impact.measured,
            "monotonic_seconds": impact.seconds if impact.kind == STALL else None,
            "wall_seconds": impact.wall_seconds, "boottime_seconds": impact.boottime_seconds,
            "booted_at": iso(impact.booted_at), "first_poll": iso(impact.first_poll),
            "last_poll_exact": impact.exact if impact.kind == BOOT else None,
            "event_id": impact.event_id, "event_type": impact.event_type,
            "announced_seconds": impact.announced, "tie": impact.tie,
            "words": impact_words(impact, local=False)}


def hold_json(hold: Hold) -> dict[str, Any]:
    """A person's hold on the agent's automation for an event; ``to``: null while held."""
    return {"holder": hold.holder, "from": iso(hold.since), "to": iso(hold.until),
            "released_by": hold.released_by, "audit_seq": hold.seq,
            "release_audit_seq": hold.release_seq}


def hook_run_json(run: HookRun) -> dict[str, Any]:
    """One run of the agent's hook; ``end`` null: its end is not recorded."""
    return {"step": run.step, "rule": run.rule, "command": run.command,
            "start": iso(run.started), "end": iso(run.ended),
            "exit_status": run.exit_status, "timed_out": run.timed_out,
            "words": hook_run_words(run)}


def _event_json(event: EventReport) -> dict[str, Any]:
    return {
        "event_id": event.event_id, "event_type": event.event_type,
        "resources": list(event.resources), "first_seen": iso(event.first_seen),
        "first_incarnation": event.first_incarnation, "initial": event.initial,
        "appeared_started": event.appeared_started, "not_before": iso(event.not_before),
        "reschedules": [{"time": iso(m.seen_at), "incarnation": m.incarnation,
                         "from": iso(m.old), "to": iso(m.new)} for m in event.reschedules],
        "approvals": [_act_json(a) for a in event.acts if a.kind != "refused"],
        "refusals": [_act_json(a) for a in event.acts if a.kind == "refused"],
        "holds": [hold_json(h) for h in event.holds],
        "hook_runs": [hook_run_json(r) for r in event.hook_runs],
        # A certainty only about what happened: null beside a start or a fate not seen.
        "started_at": iso(event.started_at),
        "started_certain": event.started_certain if event.started_at is not None else None,
        "started_before_not_before_seconds": event.start_vs_not_before,
        "gone_at": iso(event.gone_at), "fate": event.fate,
        "fate_certain": event.fate_certain if event.fate is not None else None,
        "fate_detail": event.fate_detail or None,
        "notice": notice_json(event.notice),
        "impacts": [impact_json(i) for i in event.impacts],
        "impact_measured": event.impact_measured,
    }


def report_json(report: Report) -> dict[str, Any]:
    """Stable keys; times ISO 8601 UTC; ``null`` where nothing is known."""
    return {
        "endpoint": report.endpoint, "from": iso(report.start), "to": iso(report.end),
        "incarnations": list(report.incarnations),
        "holes_known": report.sessions_known,
        "holes": [{"from": iso(h.start), "to": iso(h.end), "open": h.open}
                  for h in report.holes],
        "events": [_event_json(e) for e in report.events],
        "short_notice": [e.event_id for e in report.short_notice],
        "short_notice_other_vms": [e.event_id for e in report.short_notice_other_vms],
        "impacts_measured": report.measured,
        "impacts_measured_since": iso(report.measuring_since),
        "impacts_measured_spans": [{"from": iso(begin), "to": iso(end)}
                                   for begin, end in report.measuring_spans],
        "impacts_without_event": [impact_json(i) for i in report.unannounced],
    }
