"""What the operator was shown: the snapshot an approval is bound to.

One home for the rules every front end asks before and after a confirmation: which
event an id names in a document, whether the id is listed more than once, whether the
event reaches beyond this VM (then it needs an explicit yes), what changed between the
snapshot confirmed and the event as it is now, field by field, in words, and whether it
is still as shown (:func:`difference`): asked before every send of an approval, the
first and each retry; and why an event may not be approved at all (:func:`refusal`),
asked by the approver and by a front end approving through the agent alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from setui.core.model import Document, Event, is_this_vm
from setui.core.textsafe import printable, some_names
from setui.core.timefmt import stamp
from setui.store.records import StoryEntry, event_snapshot

__all__ = ["NO_DOCUMENT", "READ_ONLY", "Confirmed", "Difference", "changes_between", "confirmed",
           "difference", "find_event", "left_words", "other_vms", "refusal", "repeated",
           "with_left"]

# Why a front end told never to approve (--read-only) refuses, whoever would approve.
READ_ONLY = "setui runs read-only (--read-only): it approves nothing"
NO_DOCUMENT = "there is no current events document to approve against"

# The fields an operator confirms, in the order a change is told.
_FIELDS = (("EventType", "type"), ("EventStatus", "status"), ("Resources", "resources"),
           ("NotBefore", "NotBefore"), ("DurationInSeconds", "duration"),
           ("EventSource", "source"), ("Description", "description"),
           ("ResourceType", "resource type"))


@dataclass(frozen=True)
class Confirmed:
    """What the operator saw and said yes to: the event's snapshot and its document."""

    event_id: str
    snapshot: Mapping[str, Any]  # event_snapshot(): the fields, as the service names them
    incarnation: int


def find_event(document: Document | None, event_id: str) -> Event | None:
    """The event with that id; an exact match first, then ignoring case (GUIDs)."""
    if document is None:
        return None
    exact = document.event(event_id)
    if exact is not None:
        return exact
    wanted = event_id.strip().casefold()
    return next((e for e in document.events if e.event_id.casefold() == wanted), None)


def repeated(document: Document | None, event_id: str) -> int:
    """How many events of ``document`` carry this EventId (case ignored)."""
    if document is None:
        return 0
    wanted = event_id.strip().casefold()
    return sum(1 for e in document.events if e.event_id.casefold() == wanted)


def confirmed(document: Document, event_id: str) -> Confirmed | None:
    """The snapshot to bind a confirmation to, taken when the event is shown."""
    event = find_event(document, event_id)
    if event is None:
        return None
    return Confirmed(event.event_id, event_snapshot(event), document.incarnation)


def other_vms(event: Event, vm_name: str | None) -> str | None:
    """Why approving ``event`` reaches beyond this VM, if it does: it lists other VMs,
    or does not list this one. Such an event needs an explicit yes."""
    said: list[str] = []
    if not event.affects(vm_name):
        who = printable(vm_name, 60) if vm_name else "this VM (its name is not known)"
        said.append(f"it does not list {who}")
    others = [r for r in event.resources if not is_this_vm(r, vm_name)]
    if others:
        plural = "s" if len(others) != 1 else ""
        said.append(f"{'it also' if not said else 'it'} starts for {len(others)} other "
                    f"VM{plural}: {some_names(others, limit=5, width=60)}")
    return "; ".join(said) or None


def _value(field_name: str, value: Any) -> str:
    if value is None or value == "":
        return "(none)"
    if field_name == "Resources" and isinstance(value, list):
        shown = ", ".join(printable(str(r), 40) for r in value[:6])
        return f"{shown}{f' and {len(value) - 6} more' if len(value) > 6 else ''}" \
            f" ({len(value)} VM{'s' if len(value) != 1 else ''})"
    return printable(str(value), 80)


def changes_between(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """What differs between two snapshots, field by field, in words."""
    return [f"{label}: {_value(key, before.get(key))} -> {_value(key, after.get(key))}"
            for key, label in _FIELDS if before.get(key) != after.get(key)]


@dataclass(frozen=True)
class Difference:
    """Why an event is not as the operator confirmed it. ``kind`` names it (it is how a
    retry's tries end in the record): changed, started, left, repeated, other-vms."""

    kind: str
    reason: str
    changes: tuple[str, ...] = ()  # field by field, when fields changed


def difference(seen: Confirmed, latest: Document, *, vm_name: str | None,
               allow_other_vms: bool, consent: str | None = None) -> Difference | None:
    """Why the event confirmed as ``seen`` may not be approved as it stands in
    ``latest``: it left, its EventId is no longer alone, a field changed, it started,
    or it reaches beyond this VM unallowed. None when it is still as shown.
    ``consent``: what accepts an event that reaches other VMs, in the approver's words
    (default: the command line's --allow-other-vms)."""
    count = repeated(latest, seen.event_id)
    if count == 0:
        return Difference("left", f"event {seen.event_id} left the document (incarnation "
                                  f"{latest.incarnation}) since it was shown: it may have "
                                  "started and ended, or been cancelled")
    event = find_event(latest, seen.event_id)
    assert event is not None
    changes = tuple(changes_between(seen.snapshot, event_snapshot(event)))
    if count > 1:
        return Difference("repeated", f"EventId {seen.event_id} now appears {count} times in "
                                      f"the document (incarnation {latest.incarnation})",
                          changes)
    since = f"since it was shown (incarnation {seen.incarnation} -> {latest.incarnation})"
    if event.is_started:
        return Difference("started", f"event {seen.event_id} has started {since}: "
                          + "; ".join(changes) if changes else
                          f"event {seen.event_id} has already started", changes)
    if changes:
        return Difference("changed", f"event {seen.event_id} changed {since}: "
                          + "; ".join(changes), changes)
    if not allow_other_vms:
        beyond = other_vms(event, vm_name)
        if beyond is not None:
            return Difference("other-vms",
                              f"{beyond}; it needs {consent or '--allow-other-vms'}")
    return None


def refusal(event_id: str, document: Document | None, *, vm_name: str | None,
            allow_other_vms: bool = True, consent: str | None = None) -> str | None:
    """Why ``event_id`` may not be approved as ``document`` has it, in words; None when
    it may: no document, not in it, its EventId not alone, started, or (unless
    ``allow_other_vms``) reaching beyond this VM. ``consent``: what accepts that, in the
    approver's words (default: the command line's)."""
    if not event_id or not event_id.strip():
        return "an empty EventId cannot be approved"
    if document is None:
        return NO_DOCUMENT
    event = find_event(document, event_id)
    if event is None:
        return (f"EventId {event_id} is not in the current document "
                f"(incarnation {document.incarnation})")
    count = repeated(document, event_id)
    if count > 1:
        return (f"EventId {event.event_id} appears {count} times in the document "
                f"(incarnation {document.incarnation}): which of them the service would "
                "start cannot be known, so setui approves none")
    if event.is_started:
        return f"event {event.event_id} ({event.event_type}) has already started"
    if not allow_other_vms:
        beyond = other_vms(event, vm_name)
        if beyond is not None:
            if consent is not None:
                return f"{beyond}; approving it needs {consent}"
            return (f"{beyond}; --yes alone approves only events of this VM alone "
                    "(add --allow-other-vms to approve it anyway)")
    return None


# How the record says an event left the document (core.tracker's kinds).
_LEFT = {
    "completed": "it completed: it left the document at {at} (incarnation {n}) after it "
                 "started",
    "cancelled": "Azure cancelled it: it left the document at {at} (incarnation {n}) "
                 "before it started",
    "gone": "it was gone from the document at {at} (incarnation {n}), seen across a gap in "
            "the record: whether it ran is not known",
}


def left_words(story: Sequence[StoryEntry]) -> str | None:
    """When and how an event left the document, as the record's ``story`` of it says;
    None when the record never saw it. A leaving seen across a gap is "gone", whatever
    the tracker guessed; a leaving the record did not see is said from its last sighting."""
    seen = [entry for entry in story if entry.source == "history"]
    if not seen:
        return None
    last = seen[-1]
    at, n = stamp(last.time, local=False), last.incarnation  # kept in the audit log too
    if last.kind in _LEFT:
        return _LEFT[last.kind if last.certain else "gone"].format(at=at, n=n)
    status = f", {printable(last.status, 20)}" if last.status else ""
    return (f"it was last recorded at {at} (incarnation {n}{status}) and left the document "
            "while nothing recorded it: gone, whether it ran is not known")


def with_left(reason: str | None, event_id: str, document: Document | None,
              story: Callable[[str], Sequence[StoryEntry]] | None) -> str | None:
    """``reason`` (a refusal), with when and how the event left when that is why: it is
    not in ``document``, and the record (``story``, which may raise) knows of it."""
    if reason is None or story is None or document is None \
            or find_event(document, event_id) is not None:
        return reason
    try:
        words = left_words(story(event_id))
    except Exception:  # the record cannot say: the refusal stands as it is
        return reason
    return reason if words is None else f"{reason}: {words}"
