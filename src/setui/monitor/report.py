"""What happened to each event, from the record: the facts a postmortem needs.

Built from a :class:`~setui.monitor.replay.Recording`: the lives come from folding the
stored changes into a :class:`MonitorState` (so "started" and "went" carry the same
certainty as everywhere else: the gap rules were applied when the changes were stored),
the reschedules from the stored changes, the approvals, refusals and holds (who held the
agent's automation, from when to when) from the audit log, the agent's hook runs; each
event's notice (core.notice) and what the agent measured of it (core.impact),
and the stalls and boots with no event. Nothing is rendered here: ``setui report`` writes
it as Markdown or JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from setui.core.holes import MIN_HOLE, Hole
from setui.core.impact import Impact
from setui.core.model import DocumentError, Event
from setui.core.notice import DEFAULT_TERMINATE_NOTICE, AdvanceNotice, measure_notice, unwatched
from setui.monitor.replay import Recording
from setui.monitor.state import MonitorState
from setui.store.agent import holds_of
from setui.store.records import (
    APPROVE_ATTEMPT,
    APPROVE_OUTCOME,
    APPROVED,
    FAILED,
    REFUSED,
    UNKNOWN,
    AuditRecord,
    Hold,
    HookRun,
)

__all__ = ["EventReport", "OperatorAction", "Report", "Reschedule", "build_report"]


@dataclass(frozen=True)
class Reschedule:
    seen_at: datetime
    incarnation: int
    old: datetime | None
    new: datetime | None


@dataclass(frozen=True)
class OperatorAction:
    """An operator's act from the audit log: an approval's outcome, or a refusal."""

    at: datetime
    kind: str  # "approved", "approval failed", "approval outcome unknown", "refused"
    user: str
    ssh_client: str | None
    host: str
    detail: str  # HTTP status, the service's error, or setui's reason
    seq: int


@dataclass
class EventReport:
    event_id: str
    event_type: str
    resources: tuple[str, ...]
    first_seen: datetime
    first_incarnation: int
    initial: bool  # already there when the record began: it may be older
    appeared_started: bool
    not_before: datetime | None  # as first announced
    reschedules: list[Reschedule] = field(default_factory=list)
    last_not_before: datetime | None = None  # the last one it had while Scheduled
    acts: list[OperatorAction] = field(default_factory=list)
    started_at: datetime | None = None
    started_certain: bool = True
    gone_at: datetime | None = None
    fate: str | None = None  # completed, cancelled, gone; None: still there at the end
    fate_certain: bool = True
    fate_detail: str = ""
    event: Event | None = field(default=None, repr=False)  # as first seen
    appeared_certain: bool = True  # seen to appear as it happened, not across a gap
    notice: AdvanceNotice | None = None
    impacts: list[Impact] = field(default_factory=list)  # what the agent measured of it
    # Whether anything it did would have been measured: a stall or a boot tied to it, or
    # the agent's heartbeat running while it was under way; None: it never started.
    impact_measured: bool | None = None
    # Whether it reaches this VM, by the name the record kept (None: not known); the
    # agent measures and tells a short notice only for this VM's events (agent.notice).
    this_vm: bool | None = None
    holds: list[Hold] = field(default_factory=list)  # a person's holds on the agent's steps
    hook_runs: list[HookRun] = field(default_factory=list)  # the agent's, oldest first

    @property
    def approvals(self) -> list[OperatorAction]:
        return [a for a in self.acts if a.kind == "approved"]

    @property
    def start_vs_not_before(self) -> float | None:
        """Seconds the start came before its NotBefore (negative: after it)."""
        if self.started_at is None or self.last_not_before is None or self.appeared_started:
            return None
        return (self.last_not_before - self.started_at).total_seconds()


@dataclass(frozen=True)
class Report:
    endpoint: str
    start: datetime
    end: datetime
    incarnations: tuple[int, ...]
    holes: tuple[Hole, ...]  # each whole, also where it reaches past the report
    sessions_known: bool
    events: tuple[EventReport, ...]
    unannounced: tuple[Impact, ...] = ()  # stalls and boots with no event, in the window
    measured: bool = False  # the agent's heartbeat ran at some time in the window
    # Since when it has run without a break to the window's end; None: not running then.
    measuring_since: datetime | None = None
    # When it ran in the window, each run without a break, oldest first; the last one's
    # end is None when it runs to the window's end.
    measuring_spans: tuple[tuple[datetime, datetime | None], ...] = ()

    @property
    def short_notice(self) -> tuple[EventReport, ...]:
        """The events of this VM (or of a VM whose name the record does not know)
        announced with less notice than documented: the ones the agent tells."""
        return tuple(e for e in self._short if e.this_vm is not False)

    @property
    def short_notice_other_vms(self) -> tuple[EventReport, ...]:
        """Other VMs' events announced with less notice than documented: not told."""
        return tuple(e for e in self._short if e.this_vm is False)

    @property
    def _short(self) -> tuple[EventReport, ...]:
        return tuple(e for e in self.events if e.notice is not None and e.notice.short)


def build_report(recording: Recording, *, since: datetime | None = None,
                 until: datetime | None = None,
                 terminate_notice: float = DEFAULT_TERMINATE_NOTICE) -> Report:
    """The report of the events whose life touched ``since`` .. ``until`` (default: the
    whole record); a Terminate's notice is held against ``terminate_notice``."""
    start = since or recording.records[0].first_seen
    end = until or recording.end
    state = recording.state_at(end, MonitorState())
    events: dict[str, EventReport] = {}
    for record in recording.records:
        if record.first_seen > end:
            break
        try:
            document = record.document()
        except (DocumentError, ValueError):
            continue
        for change in record.changes:
            event = document.event(change.event_id) if change.event_id else None
            if event is None:
                continue  # it left: its life's end comes from the folded state
            report = events.get(event.event_id)
            if report is None:
                report = events[event.event_id] = EventReport(
                    event_id=event.event_id, event_type=str(event.event_type),
                    resources=tuple(event.resources), first_seen=record.first_seen,
                    first_incarnation=record.incarnation, initial=change.initial,
                    appeared_started=event.is_started, not_before=event.not_before,
                    last_not_before=event.not_before, event=event,
                    appeared_certain=change.kind == "appeared" and change.certain
                    and not _after_hole(recording, record.first_seen))
            if change.kind == "rescheduled":
                report.reschedules.append(Reschedule(record.first_seen, record.incarnation,
                                                     report.last_not_before, event.not_before))
            if event.is_scheduled and event.not_before is not None:
                report.last_not_before = event.not_before
    for event_id, report in events.items():
        life = state.lives.get(event_id)
        if life is not None:
            report.started_at = life.started_at
            report.started_certain = life.started_exact
            report.gone_at, report.fate = life.gone_at, life.fate
            report.fate_certain = life.fate_certain
            if life.not_before is not None:
                report.last_not_before = life.not_before
        for note in (g for g in state.gone if g.event.event_id == event_id):
            report.fate_detail = note.detail
            break
    _add_acts(events, recording.audit, end)
    by_key = {event_id.casefold(): report for event_id, report in events.items()}
    for hold in holds_of(r for r in recording.audit if r.time <= end):
        if (report := by_key.get(hold.event_id.casefold())) is not None:
            report.holds.append(hold)
    for run in recording.hook_runs:
        if run.started <= end and (report := by_key.get(run.event_id.casefold())) is not None:
            # Ended after the report's end: still running then, as far as it tells.
            report.hook_runs.append(run if run.ended is None or run.ended <= end else
                                    replace(run, ended=None, exit_status=None,
                                            timed_out=False))
    chosen = [r for r in events.values()
              if r.first_seen <= end and (r.gone_at is None or r.gone_at >= start)]
    chosen.sort(key=lambda r: (r.first_seen, r.event_id))
    for report in chosen:
        _measure(report, recording, end, terminate_notice)
        vm_name = recording.vm_name_at(report.first_seen)
        if vm_name and report.event is not None:
            report.this_vm = report.event.affects(vm_name)
    holes = tuple(h for h in recording.holes if h.overlaps(start, end))
    incarnations = tuple(r.incarnation for r in recording.records
                         if start <= r.first_seen <= end)
    unannounced = tuple(i for i in recording.impacts
                        if i.event_id is None and start <= i.at <= end)
    # Inclusive: a session that has just begun spans a moment, and its heartbeat runs.
    measured = any(begin <= end and until >= start for begin, until in recording.measuring)
    return Report(recording.endpoint, start, end, incarnations, holes,
                  recording.sessions_known, tuple(chosen), unannounced, measured,
                  recording.measured_since(end), _runs(recording, start, end))


def _runs(recording: Recording, start: datetime, end: datetime
          ) -> tuple[tuple[datetime, datetime | None], ...]:
    """When the agent's heartbeat ran in ``start`` .. ``end``, each run without a break
    (none over ``MIN_HOLE``, as Recording.measured_since joins them); the end of a run
    that reaches ``end`` is None."""
    runs: list[list[datetime]] = []
    for begin, until in sorted(recording.measuring):
        if begin > end:
            break
        if runs and begin <= runs[-1][1] + MIN_HOLE:
            runs[-1][1] = max(runs[-1][1], until)
        else:
            runs.append([begin, until])
    return tuple((begin, None if until >= end else until) for begin, until in runs
                 if until >= start)


def _after_hole(recording: Recording, moment: datetime) -> bool:
    """Whether ``moment`` is the first sighting after a hole: what appeared then may have
    appeared in the hole (a store from before a gap's appearing was kept as uncertain)."""
    return any(abs((hole.end - moment).total_seconds()) <= MIN_HOLE.total_seconds()
               for hole in recording.holes)


def _measure(report: EventReport, recording: Recording, end: datetime,
             terminate_notice: float) -> None:
    """The event's notice, and what the agent measured of it."""
    report.notice = measure_notice(
        report.event_type, first_seen=report.first_seen, announced=report.not_before,
        appeared_started=report.appeared_started,
        unseen=unwatched(initial=report.initial, certain=report.appeared_certain),
        started_at=report.started_at, started_exact=report.started_certain,
        terminate=terminate_notice)
    wanted = report.event_id.casefold()
    report.impacts = [i for i in recording.impacts
                      if i.event_id is not None and i.event_id.casefold() == wanted
                      and i.at <= end]
    if report.started_at is not None:
        report.impact_measured = bool(report.impacts) or recording.measured_over(
            report.started_at, min(report.gone_at or end, end))


# An approval's outcome (store.records) as the report names its act.
_ACTS = {APPROVED: "approved", FAILED: "approval failed", UNKNOWN: "approval outcome unknown"}


def _add_acts(events: dict[str, EventReport], audit: tuple[AuditRecord, ...],
              end: datetime) -> None:
    attempts = {r.seq: r for r in audit if r.action == APPROVE_ATTEMPT}
    for record in audit:
        report = events.get(record.event_id or "")
        if report is None or record.time > end:
            continue
        if record.action == APPROVE_OUTCOME:
            attempt = attempts.get(record.attempt_seq or -1) or record
            detail = (f"HTTP {record.status}" if record.error is None
                      else f"{record.error}")
            report.acts.append(OperatorAction(
                record.time, _ACTS[record.result or FAILED], attempt.user,
                attempt.ssh_client, attempt.host, detail, record.seq))
        elif record.action == REFUSED:
            report.acts.append(OperatorAction(
                record.time, "refused", record.user, record.ssh_client, record.host,
                record.error or "no reason", record.seq))
        elif record.action == APPROVE_ATTEMPT and record.outcome_unknown:
            report.acts.append(OperatorAction(
                record.time, _ACTS[UNKNOWN], record.user, record.ssh_client, record.host,
                "sent; setui stopped before recording the answer", record.seq))

