"""The scheduled-events document as typed, immutable values.

Everything here comes from the network, so the parser trusts nothing: it accepts
every schema the service has published (2017-03-01 preview to 2020-07-01), keeps
values it does not know instead of dropping them, and turns anything malformed into
one exception type, :class:`DocumentError`, whose message names the field.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from email.utils import parsedate_to_datetime
from enum import Enum
from typing import Any, TypeVar

from setui.core.textsafe import preview as _preview

__all__ = [
    "MAX_DEPTH",
    "MAX_INCARNATION",
    "Document",
    "DocumentError",
    "Event",
    "EventSource",
    "EventStatus",
    "EventType",
    "format_not_before",
    "is_this_vm",
    "json_depth",
    "parse_document",
    "parse_iso",
    "parse_not_before",
]

# The history stores a DocumentIncarnation as SQLite's 64-bit integer, so the parser
# refuses a bigger one (a malformed document, not a crash in the store), and the
# command line refuses to look one up.
MAX_INCARNATION = 2**63 - 1
# How deep a document may nest. The service's own nest 4 (object, Events, event,
# Resources); a hostile one nested ~1000 deep broke the content hash with RecursionError.
MAX_DEPTH = 32

_T = TypeVar("_T")
_DURATION_RE = re.compile(r"-?[0-9]{1,18}")


class _OpenEnum(str, Enum):
    """A string enum that keeps values it does not know.

    Azure adds event types over time (Preempt in 2017-11, Terminate in 2019-01); an
    unknown value must be shown as it came, never dropped and never a crash.
    """

    _value_: str  # what every member, known or kept, holds (and so what .value is)

    @classmethod
    def _missing_(cls, value: object) -> _OpenEnum | None:
        if not isinstance(value, str):
            return None
        member = str.__new__(cls, value)
        member._name_ = value
        member._value_ = value
        return member

    @property
    def known(self) -> bool:
        return self._name_ in type(self).__members__

    def __str__(self) -> str:
        return self.value


class EventType(_OpenEnum):
    FREEZE = "Freeze"
    REBOOT = "Reboot"
    REDEPLOY = "Redeploy"
    PREEMPT = "Preempt"
    TERMINATE = "Terminate"


class EventStatus(_OpenEnum):
    SCHEDULED = "Scheduled"
    STARTED = "Started"


class EventSource(_OpenEnum):
    PLATFORM = "Platform"
    USER = "User"


class DocumentError(ValueError):
    """The body is not a scheduled-events document; the message names the field."""

    def __init__(self, field_name: str, problem: str) -> None:
        self.field = field_name
        self.problem = problem
        super().__init__(f"{field_name}: {problem}" if field_name else problem)


@dataclass(frozen=True)
class Event:
    """One scheduled event. ``None`` means the api-version did not carry the field."""

    event_id: str
    event_type: EventType
    status: EventStatus
    resources: tuple[str, ...]
    not_before: datetime | None
    resource_type: str | None = None
    description: str | None = None
    source: EventSource | None = None
    duration: int | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def is_started(self) -> bool:
        return self.status is EventStatus.STARTED

    @property
    def is_scheduled(self) -> bool:
        return self.status is EventStatus.SCHEDULED

    def affects(self, vm_name: str | None) -> bool:
        """Whether the event touches ``vm_name``; names compare case-insensitively.

        The 2017 preview prefixed IaaS names with an underscore, so that is ignored too.
        """
        if not vm_name:
            return False
        wanted = _vm_key(vm_name)
        return any(_vm_key(r) == wanted for r in self.resources)

    @property
    def impact(self) -> str:
        """Expected impact in words: ``0`` and ``-1`` mean different things, and ``0`` (no
        interruption expected) is not "none" for an event that moves or deletes the VM."""
        if self.duration is None or self.duration < 0:
            return "unknown"
        if self.duration == 0:
            return _LASTING.get(self.event_type, "none")
        return _format_seconds(self.duration)

    @property
    def effect(self) -> str | None:
        """What the event type does to the VM, in the service documents' words; None
        for a type they do not describe."""
        return _EFFECTS.get(self.event_type)


# What each type does, as the service's documents say it.
_EFFECTS = {
    EventType.FREEZE: "paused a few seconds; memory and open files kept",
    EventType.REBOOT: "restarted; temporary memory lost",
    EventType.REDEPLOY: "moved to another host; temporary disks lost",
    EventType.PREEMPT: "spot VM deleted; temporary disks lost",
    EventType.TERMINATE: "VM deleted",
}
# The types whose effect no DurationInSeconds undoes (a Reboot may turn out a Freeze,
# the documents say, so its 0 is taken at its word): said instead of "none".
_LASTING = {EventType.REDEPLOY: "moves host", EventType.PREEMPT: "deleted",
            EventType.TERMINATE: "deleted"}


def _vm_key(name: str) -> str:
    return name.lstrip("_").casefold()


def is_this_vm(resource: str, vm_name: str | None) -> bool:
    """Whether one resource name is ``vm_name``, by the rule of :meth:`Event.affects`:
    for marking this VM among an event's resources."""
    return bool(vm_name) and _vm_key(resource) == _vm_key(vm_name or "")


@dataclass(frozen=True)
class Document:
    """One incarnation of the events document."""

    incarnation: int
    events: tuple[Event, ...]
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def event(self, event_id: str) -> Event | None:
        for ev in self.events:
            if ev.event_id == event_id:
                return ev
        return None

    def canonical_json(self) -> str:
        """Stable text of the raw document, used to compare content and to store it."""
        return json.dumps(self.raw, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _format_seconds(seconds: int) -> str:
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h"


# ISO 8601 date-times, extended (2016-09-19T18:29:47.1234567Z) or basic (20160919T182947Z).
# Parsed by hand: datetime.fromisoformat accepts more on 3.11 than on 3.10 (7-digit
# fractions, the basic form), and a document must read the same on every Python.
# [0-9], not \d: \d also matches other scripts' digits, which no service sends.
_ISO_TIME = (r"(?P<hour>[0-9]{2})(?:{c}(?P<minute>[0-9]{2})"
             r"(?:{c}(?P<second>[0-9]{2})(?:[.,](?P<fraction>[0-9]+))?)?)?")
_ISO_OFFSET = r"(?P<offset>[Zz]|[+-][0-9]{2}(?::?[0-9]{2})?)?"
_ISO_EXTENDED = re.compile(r"(?P<year>[0-9]{4})-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})"
                           r"(?:[Tt ]" + _ISO_TIME.replace("{c}", ":") + _ISO_OFFSET + ")?")
_ISO_BASIC = re.compile(r"(?P<year>[0-9]{4})(?P<month>[0-9]{2})(?P<day>[0-9]{2})"
                        r"(?:[Tt]" + _ISO_TIME.replace("{c}", "") + _ISO_OFFSET + ")?")


def parse_iso(text: str) -> datetime | None:
    """An ISO 8601 date-time (no offset means UTC), None if it is not shaped like one;
    ValueError if it is, but names a day or time that does not exist. The same on every
    Python, unlike datetime.fromisoformat."""
    match = _ISO_EXTENDED.fullmatch(text) or _ISO_BASIC.fullmatch(text)
    if match is None:
        return None
    part = match.groupdict()
    zone = timezone.utc
    offset = part["offset"]
    if offset and offset not in ("Z", "z"):
        hours = int(offset[1:3])
        minutes = int(offset[-2:]) if len(offset) > 3 else 0
        if hours > 23 or minutes > 59:
            raise ValueError(f"the offset {offset} is not a time zone")
        sign = -1 if offset[0] == "-" else 1
        zone = timezone(sign * timedelta(hours=hours, minutes=minutes))
    fraction = (part["fraction"] or "")[:6].ljust(6, "0")  # finer than microseconds: cut
    return datetime(int(part["year"]), int(part["month"]), int(part["day"]),
                    int(part["hour"] or 0), int(part["minute"] or 0), int(part["second"] or 0),
                    int(fraction), tzinfo=zone)


# Polled every second, the same NotBefore strings come back again and again; parsing
# RFC 1123 through email.utils each time would be a fifth of parse + track
# (bench/RESULTS.md).
@functools.lru_cache(maxsize=1024)
def parse_not_before(value: str) -> datetime | None:
    """RFC 1123 (current) or ISO 8601 (2017 preview) to an aware UTC datetime.

    The empty string means the event has started and carries no time.
    """
    text = value.strip()
    if not text:
        return None
    parsed: datetime | None = None
    if "," in text or text.endswith(("GMT", "UTC", "+0000")):
        try:
            parsed = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError, OverflowError):
            parsed = None
    if parsed is None:
        try:
            parsed = parse_iso(text)
        except (ValueError, OverflowError) as exc:
            raise ValueError(f"{_preview(value)} is not a valid time ({exc})") from None
        if parsed is None:
            raise ValueError(f"{_preview(value)} is neither an RFC 1123 nor an ISO 8601 time")
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    try:
        return parsed.astimezone(timezone.utc)
    except OverflowError:  # year 1 with a positive offset is in year 0 in UTC
        raise ValueError(f"{_preview(value)} is not a valid time (out of range in UTC)") \
            from None


def format_not_before(value: datetime | None) -> str:
    """The service's own RFC 1123 form, or "" for a started event."""
    if value is None:
        return ""
    return value.astimezone(timezone.utc).strftime("%a, %d %b %Y %H:%M:%S GMT")


def parse_document(data: bytes | str | Any) -> Document:
    """Parse a response body (bytes/str) or already-decoded JSON into a Document.

    Raises :class:`DocumentError` and nothing else.
    """
    if isinstance(data, (bytes, bytearray, memoryview)):
        try:
            data = bytes(data).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise DocumentError("", f"the body is not UTF-8 text ({exc.reason})") from None
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except RecursionError:  # deeper than the decoder itself goes
            raise DocumentError("", f"the body nests more than {MAX_DEPTH} levels deep (the "
                                    "service's documents nest 4); it is not read") from None
        except ValueError as exc:
            raise DocumentError("", f"the body is not JSON ({_short(exc)})") from None
    if _document_depth(data) > MAX_DEPTH:
        raise DocumentError("", f"the document nests more than {MAX_DEPTH} levels deep (the "
                                "service's documents nest 4); it is not read")
    try:
        return _document(data)
    except DocumentError:
        raise
    except (RecursionError, ValueError, TypeError, OverflowError) as exc:  # defensive
        # Field parsers are wrapped by _field, so this is outside every field.
        raise DocumentError("document", f"unreadable ({_short(exc)})") from None


def _document_depth(data: Any) -> int:
    """How deep decoded JSON nests, walking only what is not the service's own shape.

    Measured on every poll, so the known shape is taken as it is (the object 1, Events 2,
    an event 3, its Resources of strings 4) and only what else is there is walked: a
    document of 1,000 events costs about half a millisecond, not a scan of its text."""
    if not isinstance(data, dict):
        return json_depth(data)
    deepest = 1
    for key, value in data.items():
        if key == "Events" and isinstance(value, list):
            deepest = max(deepest, 2)
            for event in value:
                if not isinstance(event, dict):
                    deepest = max(deepest, 2 + json_depth(event))
                    continue
                deepest = max(deepest, 3)
                for name, field in event.items():
                    if not isinstance(field, (dict, list)):
                        continue
                    if name == "Resources" and isinstance(field, list) and all(
                            isinstance(r, str) for r in field):
                        depth = 4
                    else:
                        depth = 3 + json_depth(field)
                    deepest = max(deepest, depth)
                    if deepest > MAX_DEPTH:
                        return deepest
        elif isinstance(value, (dict, list)):
            deepest = max(deepest, 1 + json_depth(value))
        if deepest > MAX_DEPTH:
            return deepest
    return deepest


def json_depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deep decoded JSON nests, without recursion; once past ``limit``, the walk
    stops and says a depth past it."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                return depth
            deepest = max(deepest, depth)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


def _short(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 120 else text[:117] + "..."


def _document(data: Any) -> Document:
    if not isinstance(data, dict):
        raise DocumentError("", f"expected a JSON object, got {_kind(data)}")
    if "DocumentIncarnation" not in data:
        raise DocumentError("DocumentIncarnation", "missing")
    incarnation = _field("DocumentIncarnation", _incarnation, data["DocumentIncarnation"])
    if "Events" not in data:
        raise DocumentError("Events", "missing")
    raw_events = data["Events"]
    if raw_events is None:
        raw_events = []
    if not isinstance(raw_events, list):
        raise DocumentError("Events", f"expected a list, got {_kind(raw_events)}")
    events = tuple(_field(f"Events[{i}]", _event, item, f"Events[{i}]")
                   for i, item in enumerate(raw_events))
    return Document(incarnation=incarnation, events=events, raw=data)


def _field(where: str, parse: Callable[..., _T], *args: Any) -> _T:
    """Run the parser of one field; even a failure it did not foresee names the field."""
    try:
        return parse(*args)
    except DocumentError:
        raise
    except (RecursionError, ValueError, TypeError, OverflowError) as exc:
        raise DocumentError(where, f"unreadable ({_short(exc)})") from None


def _incarnation(value: Any) -> int:
    # Older clients and the 2017 samples treat the incarnation as a string.
    if isinstance(value, bool):
        raise DocumentError("DocumentIncarnation", "expected an integer, got a boolean")
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and value.strip().isdigit() and len(value.strip()) <= 30:
        number = int(value.strip())
    else:
        raise DocumentError(
            "DocumentIncarnation", f"expected an integer, got {_kind(value)} {_preview(value)}"
        )
    if number < 0:
        raise DocumentError("DocumentIncarnation", f"must not be negative, got {number}")
    if number > MAX_INCARNATION:
        raise DocumentError("DocumentIncarnation",
                            f"is too large (at most {MAX_INCARNATION}), got {number}")
    return number


def _event(item: Any, where: str) -> Event:
    if not isinstance(item, dict):
        raise DocumentError(where, f"expected an object, got {_kind(item)}")
    event_id = _required_str(item, "EventId", where)
    if not event_id.strip():
        raise DocumentError(f"{where}.EventId", "is empty")
    event_type = EventType(_required_str(item, "EventType", where))
    status = EventStatus(_required_str(item, "EventStatus", where))
    resources = _resources(item.get("Resources"), f"{where}.Resources")
    not_before = _not_before(item.get("NotBefore"), f"{where}.NotBefore")
    source_text = _optional_str(item, "EventSource", where)
    return Event(
        event_id=event_id,
        event_type=event_type,
        status=status,
        resources=resources,
        not_before=not_before,
        resource_type=_optional_str(item, "ResourceType", where),
        description=_optional_str(item, "Description", where),
        source=EventSource(source_text) if source_text is not None else None,
        duration=_duration(item.get("DurationInSeconds"), f"{where}.DurationInSeconds"),
        raw=item,
    )


def _required_str(item: dict[str, Any], key: str, where: str) -> str:
    if key not in item:
        raise DocumentError(f"{where}.{key}", "missing")
    value = item[key]
    if not isinstance(value, str):
        raise DocumentError(f"{where}.{key}", f"expected a string, got {_kind(value)}")
    return value


def _optional_str(item: dict[str, Any], key: str, where: str) -> str | None:
    value = item.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise DocumentError(f"{where}.{key}", f"expected a string, got {_kind(value)}")
    return value


def _resources(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise DocumentError(where, f"expected a list of names, got {_kind(value)}")
    for i, name in enumerate(value):
        if not isinstance(name, str):
            raise DocumentError(f"{where}[{i}]", f"expected a string, got {_kind(name)}")
    return tuple(value)


def _not_before(value: Any, where: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise DocumentError(where, f"expected a time string, got {_kind(value)}")
    try:
        return parse_not_before(value)
    except (ValueError, OverflowError) as exc:
        raise DocumentError(where, str(exc)) from None


def _duration(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise DocumentError(where, "expected a number of seconds, got a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    # ASCII digits and one sign only: str.isdigit() also takes "²", which int() refuses,
    # and "--5" passed a strip of the signs; both ended nameless in the catch-all.
    if isinstance(value, str) and _DURATION_RE.fullmatch(text := value.strip()):
        return int(text)
    raise DocumentError(
        where, f"expected a number of seconds, got {_kind(value)} {_preview(value)}")


def _kind(value: Any) -> str:
    names = {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        type(None): "null",
    }
    return names.get(type(value), type(value).__name__)
