"""The dashboard's change log: what just happened, newest first, in a line each.

What ``setui watch`` prints (an event appeared, was rescheduled, started, left), and,
attached to the agent, what the agent did (a step begun or ended: a hook's end, an
approval, a wait and its reason), who approved, who held and released it, and an event
of this VM announced with less notice than documented. No textual: the dashboard's pane
and its whole view draw it (setui.ui.widgets.window). Every text from the service or
the agent is made printable and bounded here; the widgets escape nothing further, as
they build :class:`rich.text.Text` and never markup.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from setui.agent.plan import MATCH, step_words
from setui.core.impact import Impact, impact_words
from setui.core.model import Document, Event
from setui.core.notice import measure_notice, notice_words
from setui.core.textsafe import printable
from setui.core.timefmt import signed_countdown, time_of_day
from setui.core.tracker import Change, ChangeKind
from setui.monitor.state import EventLife, GoneEvent
from setui.store.agent import DONE, HOLD, PLANNED, RELEASE, RUNNING, Step
from setui.store.records import AuditRecord

__all__ = ["MAX_ENTRIES", "ChangeLog", "Hold", "LogEntry", "event_name"]

MAX_ENTRIES = 500  # the newest kept: a window for the last hours, not a history
_DETAIL = 300  # characters of a change's or a step's words


def event_name(event: Event | None, event_id: str | None) -> str:
    """``Reboot F020BA2E``: the type and the EventId's first eight characters."""
    short = printable(event_id or (event.event_id if event else "") or "-", 64)[:8]
    if event is None:
        return short
    return f"{printable(event.event_type.value, 20)} {short}"


@dataclass(frozen=True, order=True)
class LogEntry:
    """One line of the log: when, what kind of thing ("appeared", "prepare", "held"),
    of which event (its name), the rest in words; ``mine``: this VM's."""

    at: datetime
    seq: int  # the order taken in, for entries of the same moment
    what: str = field(compare=False)
    name: str = field(compare=False)
    text: str = field(compare=False)
    mine: bool = field(compare=False, default=False)


@dataclass(frozen=True)
class Hold:
    """Who holds the agent for an event, and since when (the audit log's record)."""

    user: str
    since: datetime


class ChangeLog:
    """The entries, kept in time order (at most :data:`MAX_ENTRIES`); ``version`` moves
    whenever they change, so a view redraws only then."""

    def __init__(self) -> None:
        self._entries: list[LogEntry] = []
        self._seq = 0
        self.version = 0
        self._steps: dict[tuple[str, str], tuple[str, str]] = {}
        self._audit_seen: set[int] = set()  # the audit records taken in, by seq
        self._impacts_seen: set[tuple[str, datetime]] = set()
        self.holds: dict[str, Hold] = {}

    def entries(self) -> list[LogEntry]:
        """Newest first."""
        return self._entries[::-1]

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, at: datetime, what: str, name: str, text: str, *, mine: bool = False) -> None:
        self._seq += 1
        bisect.insort(self._entries, LogEntry(at, self._seq, what, name,
                                              printable(text, _DETAIL), mine))
        del self._entries[:-MAX_ENTRIES]
        self.version += 1

    # -- what the service said ------------------------------------------------------------
    def took(self, changes: Iterable[Change], vm_name: str | None) -> None:
        """The changes of one answer, as watch says them (an event there before the
        dashboard was: "appeared at start")."""
        for change in changes:
            event = change.event
            mine = event is not None and bool(vm_name) and event.affects(vm_name)
            what = f"{change.kind.value}{' at start' if change.initial else ''}"
            words = []
            if change.kind is ChangeKind.APPEARED and event is not None:
                if event.not_before is not None:
                    seconds = (event.not_before - change.seen_at).total_seconds()
                    words.append(f"NotBefore {time_of_day(event.not_before, change.seen_at)}"
                                 f" UTC ({signed_countdown(seconds)})")
                if event.is_started and not change.detail:
                    words.append("already started")
            if mine:
                words.append("this VM")
            if change.detail:
                words.append(change.detail)
            if not change.certain:
                words.append("uncertain: seen across a gap")
            name = event_name(event, change.event_id) if event is not None else "-"
            self.add(change.seen_at, what, name, "; ".join(words), mine=mine)
            if mine and event is not None and change.kind is ChangeKind.APPEARED \
                    and not change.initial and change.certain:
                self._notice(event, change.seen_at)

    def known(self, lives: Mapping[str, EventLife], gone: Sequence[GoneEvent],
              document: Document | None, vm_name: str | None) -> None:
        """What the agent saw before this dashboard attached: each event's appearance,
        start and end from its life as the agent keeps it (taken once, on attaching)."""
        events = {e.event_id: e for e in document.events} if document is not None else {}
        events.update({g.event.event_id: g.event for g in gone
                       if g.event.event_id not in events})
        for event_id, life in lives.items():
            event = events.get(event_id)
            name = event_name(event, event_id)
            mine = event is not None and bool(vm_name) and event.affects(vm_name)
            words = []
            if life.announced is not None:
                words.append(f"NotBefore {time_of_day(life.announced, life.first_seen)} UTC")
            if mine:
                words.append("this VM")
            if life.initial:
                words.append("already there when the agent began")
            self.add(life.first_seen, "appeared", name, "; ".join(words), mine=mine)
            if life.started_at is not None and life.started_at != life.first_seen:
                self.add(life.started_at, "started", name, "" if life.started_exact
                         else "seen across a gap", mine=mine)
            if life.gone_at is not None and life.fate is not None:
                self.add(life.gone_at, life.fate, name, "", mine=mine)

    def _notice(self, event: Event, seen: datetime) -> None:
        notice = measure_notice(event.event_type.value, first_seen=seen,
                                announced=event.not_before,
                                appeared_started=event.is_started, unseen=None)
        if notice.short:
            self.add(seen, "short notice", event_name(event, event.event_id),
                     notice_words(notice), mine=True)

    # -- what the agent did ---------------------------------------------------------------
    def planned(self, steps: Sequence[Step], now: datetime,
                name: Callable[[str], tuple[str, bool]]) -> None:
        """The agent's steps: each one begun or ended since the last look, at the time
        the agent wrote it. ``name``: an event's name and whether it is this VM's."""
        for step in steps:
            if step.step == MATCH or step.state == PLANNED:
                continue
            key = (step.event_id, step.step)
            if self._steps.get(key) == (step.state, step.detail):
                continue
            self._steps[key] = (step.state, step.detail)
            if step.step == "approve" and step.state == DONE \
                    and step.detail.startswith("approved"):
                continue  # the audit log's record says it, with who (approved)
            label, mine = name(step.event_id)
            words = (f"{step.detail or step.step} began" if step.state == RUNNING
                     else step_words(step.step, step.step, step, now))
            self.add(step.started if step.state == RUNNING and step.started else
                     step.updated, step.step, label, f"rule {step.rule}: {words}", mine=mine)

    def approved(self, records: Mapping[str, AuditRecord],
                 name: Callable[[str], tuple[str, bool]]) -> None:
        """Who approved each event (the agent's audit log): once per record."""
        self.audited(records.values(), name)

    def audited(self, records: Iterable[AuditRecord],
                name: Callable[[str], tuple[str, bool]]) -> None:
        """Approvals, holds and releases from the audit log, each once, with who; the
        holds in place remembered (:attr:`holds`)."""
        from setui.store.records import APPROVED

        for record in sorted(records, key=lambda r: r.seq):
            if record.seq in self._audit_seen or record.event_id is None:
                continue
            user = printable(record.user, 80)
            label, mine = name(record.event_id)
            if record.action == HOLD:
                self.holds[record.event_id] = Hold(user, record.time)
                self.add(record.time, "held", label, f"by {user}: the agent takes no step "
                         "for it until released", mine=mine)
            elif record.action == RELEASE:
                self.holds.pop(record.event_id, None)
                self.add(record.time, "released", label, f"by {user}", mine=mine)
            elif record.result == APPROVED:
                self.add(record.time, "approved", label, f"by {user}", mine=mine)
            else:
                continue
            self._audit_seen.add(record.seq)

    def measured(self, impacts: Iterable[Impact],
                 name: Callable[[str], tuple[str, bool]]) -> None:
        """The stalls and boots the agent measured (this VM's, by definition), each once."""
        for impact in impacts:
            key = (impact.kind, impact.at)
            if key in self._impacts_seen:
                continue
            self._impacts_seen.add(key)
            label = name(impact.event_id)[0] if impact.event_id else "-"
            self.add(impact.at, "measured", label, impact_words(impact, local=False),
                     mine=True)
