"""How much notice an event gave, against what the documents promise for its type.

The documents say an event appears with its NotBefore at least a minimum ahead: Freeze and
Reboot 15 minutes, Redeploy 10, Preempt 30 seconds, Terminate what the scale set says (5
to 15 minutes: ``terminate-notice`` in the config, 5 by default). Operators report less.
Nothing in the service says so afterwards: only a watcher that saw the event appear can.

The notice is measured from the first answer that showed the event to the NotBefore it
was first announced with (and, beside it, to when it was seen Started). Only an event
seen to appear in an unbroken watch has a figure: one that was already there when watching
began (the first document of a session, after a hole in the record or failed polls) may
have appeared any time before, and its notice is unknown, never a guess. An event that
appears already Started (a host failure) had none. The first answer comes at most one
poll interval after the event appeared, and the NotBefore is in whole seconds: a notice
is short when it is more than :data:`SLACK` below the minimum.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from setui.core.timefmt import duration

__all__ = ["DEFAULT_TERMINATE_NOTICE", "MINIMUM_NOTICE", "SLACK", "AdvanceNotice", "measure_notice",
           "minimum_notice", "notice_words", "unwatched"]

# The documented minimum notice of each type, in seconds (Terminate: configured).
MINIMUM_NOTICE: Mapping[str, float] = {"Freeze": 900.0, "Reboot": 900.0, "Redeploy": 600.0,
                                       "Preempt": 30.0}
DEFAULT_TERMINATE_NOTICE = 300  # the scale set's notBeforeTimeout, 5 to 15 minutes
SLACK = 2.0  # the poll that first saw it (1 s), and the NotBefore's whole second


def minimum_notice(event_type: str, terminate: float = DEFAULT_TERMINATE_NOTICE
                   ) -> float | None:
    """The documented minimum notice for ``event_type`` (None: a type setui does not know)."""
    if event_type == "Terminate":
        return float(terminate)
    return MINIMUM_NOTICE.get(event_type)


def unwatched(*, initial: bool, certain: bool) -> str | None:
    """Why an event's appearance was not seen as it happened (None: it was), from its
    first change: already there when recording began, or first seen across a gap."""
    if initial:
        return "it was already in the document when recording began"
    if not certain:
        return "it was first seen after a gap (nothing recorded, or polls failed)"
    return None


@dataclass(frozen=True)
class AdvanceNotice:
    """An event's notice: ``seconds`` from first seen to its NotBefore as first announced
    (0 for one that appeared Started), None with ``unknown`` saying why."""

    event_type: str
    minimum: float | None
    seconds: float | None
    to_start: float | None  # first seen -> seen Started, when both are known exactly
    unknown: str | None = None
    appeared_started: bool = False

    @property
    def short(self) -> bool | None:
        """Less than documented (None: the notice or the minimum is not known)."""
        if self.seconds is None or self.minimum is None:
            return None
        return self.seconds < self.minimum - SLACK


def measure_notice(event_type: str, *, first_seen: datetime, announced: datetime | None,
                   appeared_started: bool, unseen: str | None,
                   started_at: datetime | None = None, started_exact: bool = False,
                   terminate: float = DEFAULT_TERMINATE_NOTICE) -> AdvanceNotice:
    """The notice of one event; ``unseen``: why its appearing was not seen (:func:`unwatched`)."""
    minimum = minimum_notice(event_type, terminate)
    if unseen is not None:
        return AdvanceNotice(event_type, minimum, None, None, unseen, appeared_started)
    if appeared_started:
        return AdvanceNotice(event_type, minimum, 0.0, 0.0, None, True)
    if announced is None:
        return AdvanceNotice(event_type, minimum, None, None, "it was announced with no NotBefore")
    to_start = (started_at - first_seen).total_seconds() \
        if started_at is not None and started_exact else None
    return AdvanceNotice(event_type, minimum, (announced - first_seen).total_seconds(), to_start)


def notice_words(notice: AdvanceNotice) -> str:
    """The notice in words, against the minimum: what the report and the details say."""
    kind = notice.event_type or "event"
    documented = (f"{duration(notice.minimum)} documented for a {kind}"
                  if notice.minimum is not None else f"no documented minimum for a {kind}")
    if notice.seconds is None:
        return f"not known: {notice.unknown}"
    if notice.appeared_started:
        return f"none: it appeared already Started ({documented}; a host failure gives none)"
    shown = duration(max(notice.seconds, 0.0))
    if notice.seconds < 0:
        text = f"none: first seen {duration(-notice.seconds)} after its NotBefore"
    elif notice.short:
        text = f"{shown}: LESS than the {documented}"
    else:
        text = f"{shown} ({documented})"
    if notice.to_start is not None:
        text += f"; started {duration(notice.to_start)} after it was first seen"
    return text
