"""What an event did to the VM, measured from inside it: a stall, or a boot.

The service says what it plans (``DurationInSeconds`` is the announced length, not a
measurement) and nothing afterwards. The agent measures: its heartbeat notes every stall
(this VM stopped, as its own clocks saw it), and a boot is the kernel's boot id changing
between two polls. Each is tied to the event of this VM that was Started when it began,
else one that started or left across it (:func:`tie`), so the record can say "Freeze,
announced 5 s: the VM was paused 4.8 s at 19:22:01.3"; one with no such event is kept as
well ("paused 3.1 s, no event announced"): that is the case people ask about.

Pure: values, the rule that ties one to an event, and the words every front end uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from setui.core.model import Document, Event, EventType
from setui.core.timefmt import duration, precise, stamp
from setui.core.tracker import ChangeKind, Tracker

__all__ = ["AROUND", "BOOT", "IMPACT_SOURCE", "KINDS", "STALL", "STARTED", "Impact",
           "clocks_words", "impact_words", "tie"]

STALL = "stall"
BOOT = "boot"
# The source of a story line the agent measured (store.records.StoryEntry.source).
IMPACT_SOURCE = "measured"
KINDS = (STALL, BOOT)
# Which event a stall or a boot most likely is, when more than one could be: a pause is
# what a Freeze does; a boot is what the others do.
_PREFERRED = {STALL: (EventType.FREEZE,),
              BOOT: (EventType.REBOOT, EventType.REDEPLOY, EventType.PREEMPT,
                     EventType.TERMINATE)}
# A change that says the event ran across the stall or the boot (a cancelled one did not).
_RAN = (ChangeKind.STARTED, ChangeKind.COMPLETED, ChangeKind.GONE)
STARTED = "started"  # the event was Started when it began
AROUND = "around"  # the event started or left across it


@dataclass(frozen=True)
class Impact:
    """One stall or boot. Times are in the record's clock (the service's, as best known).

    A stall: ``at`` when the VM stopped (its heartbeat's last tick before), ``seconds``
    how long by the monotonic clock, ``wall_seconds`` and ``boottime_seconds`` how far the
    wall clock and CLOCK_BOOTTIME moved over the same gap (less the tick). A boot: ``at``
    the last poll before it (``exact`` False: the last sign of life, up to a minute
    before), ``first_poll`` the first answer after it, ``seconds`` the time between,
    ``booted_at`` the kernel's boot time.
    """

    kind: str
    at: datetime
    seconds: float
    endpoint: str = ""
    wall_seconds: float | None = None
    boottime_seconds: float | None = None
    booted_at: datetime | None = None
    first_poll: datetime | None = None
    exact: bool = True
    boot_id: str | None = None
    event_id: str | None = None
    event_type: str | None = None
    announced: int | None = None  # the event's DurationInSeconds (None: not carried)
    tie: str | None = None  # STARTED or AROUND; None: no event
    id: int = 0

    @property
    def start(self) -> datetime:
        """Where it goes in a list of moments (core.holes.with_holes)."""
        return self.at

    @property
    def measured(self) -> float:
        """The impact's length: the monotonic clock's stall, or, when that clock did not
        count a pause the wall clock was then moved for, the wall clock's jump."""
        if self.counted_by_wall_only and self.wall_seconds is not None:
            return self.wall_seconds
        return self.seconds

    @property
    def counted_by_wall_only(self) -> bool:
        """A stall the monotonic clock did not see (under half a second) but the wall
        clock jumped over: a pause the VM's clocks did not count, corrected at once."""
        return self.kind == STALL and self.seconds < 0.5 and (self.wall_seconds or 0) >= 0.5


def tie(kind: str, before: Document | None, after: Document | None,
        vm_name: str | None) -> tuple[Event, str] | None:
    """The event a stall or a boot is tied to, and how: one of this VM's (any event, while
    its name is not known) that was Started in ``before`` (the last document seen before
    it began), else one that started or left between ``before`` and ``after`` (the first
    seen after it ended); of several, the type that does this (a Freeze pauses, the others
    boot). None: no event was announced for it."""
    def mine(event: Event) -> bool:
        return vm_name is None or event.affects(vm_name)

    running = [e for e in (before.events if before is not None else ()) if e.is_started
               and mine(e)]
    if running:
        return _preferred(kind, running), STARTED
    around: list[Event] = []
    if after is not None:
        tracker = Tracker()
        if before is not None:
            tracker.update(before, _EPOCH)
        # A fresh tracker on the two documents: the same story everyone tells.
        for change in tracker.update(after, _EPOCH, gap="measured across a stall or a boot"):
            if change.kind in _RAN and change.event is not None and mine(change.event):
                around.append(change.event)
        around += [e for e in after.events if e.is_started and mine(e) and e not in around]
    return (_preferred(kind, around), AROUND) if around else None


_EPOCH = datetime.fromtimestamp(0, tz=timezone.utc)  # the tracker's times are not used here


def _preferred(kind: str, events: list[Event]) -> Event:
    wanted = _PREFERRED.get(kind, ())
    return next((e for e in events if e.event_type in wanted), events[0])


def _announced(impact: Impact) -> str:
    if impact.announced is None:
        return "no length announced"
    if impact.announced < 0:
        return "its length not announced"
    return f"announced {duration(impact.announced)}"


def impact_words(impact: Impact, *, local: bool = True) -> str:
    """One line: "Freeze, announced 5 s: the VM was paused 4.8 s at 19:22:01.3 UTC";
    "Reboot: down 2m 13s (last poll 19:22:03 UTC, first after boot 19:24:16 UTC)"; "paused
    3.1 s at ..., no event announced". ``local``: the local time beside UTC."""
    when = stamp(impact.at, date=False, tenths=True, local=local)
    if impact.kind == BOOT:
        last = "last poll" if impact.exact else "last sign of life"
        span = (f"down {duration(impact.seconds)} ({last} {stamp(impact.at, local=local)}, "
                f"first after boot {stamp(impact.first_poll, local=local)})")
        if impact.event_id is None:
            return f"rebooted, no event announced: {span}"
        return f"{impact.event_type}: {span}"
    if impact.counted_by_wall_only:
        pause = (f"the wall clock jumped {precise(impact.measured)} ahead at {when} (the "
                 "monotonic clock did not count it)")
    else:
        pause = f"the VM was paused {precise(impact.seconds)} at {when}"
    if impact.event_id is None:
        return f"{pause.removeprefix('the VM was ')}, no event announced"
    return f"{impact.event_type}, {_announced(impact)}: {pause}"


def clocks_words(impact: Impact) -> str:
    """What each clock counted over a stall, for the details and the report."""
    if impact.kind != STALL:
        booted = f"; the kernel says it booted {stamp(impact.booted_at)}" \
            if impact.booted_at is not None else ""
        return f"boot id {impact.boot_id or 'unknown'}{booted}"
    parts = [f"monotonic {precise(impact.seconds)}"]
    if impact.boottime_seconds is not None:
        parts.append(f"boottime {precise(impact.boottime_seconds)}")
    if impact.wall_seconds is not None:
        parts.append(f"wall clock {precise(impact.wall_seconds)}")
    return "clocks over the stall: " + ", ".join(parts)
