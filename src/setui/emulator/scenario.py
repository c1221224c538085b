"""Scenarios: what the emulated service does, and when, as a data file people can write.

A scenario is a TOML (or JSON, same structure) file. Times are scenario seconds from
the start of the scenario, given as numbers or as strings with a unit (``"90s"``,
``"15m"``, ``"2h"``, ``"7d"``). Every field except ``[[events]].type`` has a default.

Top level:

``name``            scenario name (default: the file name without extension)
``description``     one line for ``--list-scenarios``
``vm_name``         this VM's name, answered by ``/metadata/instance/compute/name``
                    and the default ``resources`` of an event (default ``"vm-0"``)
``tail``            seconds an event stays ``Started`` after its impact ends before it
                    vanishes from the document (default 600: the documented ~10 min)
``approval_delay``  seconds between an approval and the event becoming ``Started``
                    (default 1)
``default_duration`` impact length used when ``duration`` is -1 (unknown) or 0
                    (default 10)
``repeat``          loop forever (default false); each loop gets fresh EventIds
``length``          loop length in seconds (default: when the last event is gone); with
                    ``repeat``, at least 1 s and at least that default

``[[events]]``, one table per event:

``type``        ``Freeze``, ``Reboot``, ``Redeploy``, ``Preempt``, ``Terminate`` (required;
                another word is allowed to test clients, but then ``notice`` is required)
``id``          EventId (default: a GUID derived from the scenario name and position)
``status``      ``Scheduled`` (default) or ``Started`` (host failure: no notice at all)
``at``          when it appears (default 0)
``notice``      NotBefore = at + notice (default: the documented minimum for the type)
``resources``   VM names (default ``[vm_name]``)
``duration``    DurationInSeconds: -1 unknown, 0 no impact expected (default -1)
``source``      EventSource, ``Platform`` (default) or ``User``
``description`` Description (default: a platform-like text for the type)
``cancel_at``   removed at this time if still ``Scheduled`` (Azure cancelled it)
``approve_at``  another VM approves it at this time
``tail``        overrides the top-level ``tail`` for this event
``reschedule``  ``[{at = T, notice = N}, ...]``: at T the NotBefore moves to T + N

Every time and ``duration`` is at most a year (``MAX_SECONDS``): real notices are minutes
to days, and the bound keeps every derived moment within what a date can show.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from setui.core.textsafe import preview as _preview
from setui.settings.tomlread import parse_toml

__all__ = [
    "DEFAULT_NOTICE",
    "EVENT_TYPES",
    "MAX_SECONDS",
    "EventSpec",
    "Reschedule",
    "Scenario",
    "ScenarioError",
    "builtin_scenarios",
    "load_scenario",
    "parse_scenario",
]

# The documented minimum notice per type (Terminate is user-configurable, 5-15 min).
DEFAULT_NOTICE: dict[str, float] = {
    "Freeze": 900, "Reboot": 900, "Redeploy": 600, "Preempt": 30, "Terminate": 600,
}
EVENT_TYPES = tuple(DEFAULT_NOTICE)
STATUSES = ("Scheduled", "Started")
_DESCRIPTIONS = {
    "Freeze": "Virtual machine is being paused because of a memory-preserving Live Migration "
              "operation.",
    "Reboot": "Virtual machine is going to be restarted as part of a planned maintenance.",
    "Redeploy": "Virtual machine is going to be redeployed to another host.",
    "Preempt": "Spot virtual machine is being evicted.",
    "Terminate": "Virtual machine is going to be deleted from its scale set.",
}
_TOP_KEYS = {"name", "description", "vm_name", "tail", "approval_delay", "default_duration",
             "repeat", "length", "events"}
_EVENT_KEYS = {"id", "type", "status", "at", "notice", "resources", "duration", "source",
               "description", "cancel_at", "approve_at", "tail", "reschedule"}
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_TIME_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_ID_NAMESPACE = uuid.UUID("6f0c1f5e-3f0a-4d8e-9a57-5e7a0b1c2d3e")
# A year. Far beyond any real notice (days at most), and small enough that sums of these
# stay exact floats and valid HTTP dates.
MAX_SECONDS = 366 * 86400


class ScenarioError(ValueError):
    """A scenario that cannot be played; the message names the file and the field."""


@dataclass(frozen=True)
class Reschedule:
    at: float
    notice: float


@dataclass(frozen=True)
class EventSpec:
    """One event of a scenario, in scenario seconds."""

    id: str
    type: str
    status: str = "Scheduled"
    at: float = 0.0
    notice: float = 900.0
    resources: tuple[str, ...] = ()
    duration: int = -1
    source: str = "Platform"
    description: str = ""
    cancel_at: float | None = None
    approve_at: float | None = None
    tail: float | None = None
    reschedule: tuple[Reschedule, ...] = ()


@dataclass(frozen=True)
class Scenario:
    name: str
    events: tuple[EventSpec, ...] = ()
    description: str = ""
    vm_name: str = "vm-0"
    tail: float = 600.0
    approval_delay: float = 1.0
    default_duration: float = 10.0
    repeat: bool = False
    length: float | None = None
    source: str = field(default="<memory>", compare=False)

    def impact(self, spec: EventSpec) -> float:
        """Seconds the impact lasts: DurationInSeconds, or the default when -1 or 0."""
        return float(spec.duration) if spec.duration > 0 else self.default_duration

    def tail_of(self, spec: EventSpec) -> float:
        return self.tail if spec.tail is None else spec.tail

    def natural_end(self) -> float:
        """When the last event is gone if no client approves anything (one loop)."""
        end = 0.0
        for spec in self.events:
            start = natural_start(spec)
            if spec.approve_at is not None and spec.approve_at < start:
                start = min(start, spec.approve_at + self.approval_delay)
            if spec.cancel_at is not None and spec.cancel_at <= start:
                end = max(end, spec.cancel_at)
            else:
                end = max(end, start + self.impact(spec) + self.tail_of(spec))
        return end

    def latest_end(self, spec: EventSpec) -> float:
        """An upper bound of when the event is gone, whatever clients approve: approvals
        only bring the start forward, and one before ``cancel_at`` can at most start it
        just before that moment instead of cancelling it."""
        start = natural_start(spec)
        if spec.status != "Started" and spec.approve_at is not None and \
                spec.approve_at < start:
            start = min(start, spec.approve_at + self.approval_delay)
        if spec.cancel_at is not None and spec.cancel_at <= start:
            start = spec.cancel_at
        return start + self.impact(spec) + self.tail_of(spec)

    def loop_length(self) -> float:
        return self.length if self.length is not None else max(self.natural_end(), 1.0)

    def renamed(self, vm_name: str) -> Scenario:
        """The scenario played by a VM called ``vm_name``: its own name replaced wherever
        the scenario names it (its events' Resources too, or a rehearsal's ``this_vm``
        rules would never match). Names compare without regard to case, as Azure's do."""
        own = self.vm_name.casefold()
        events = tuple(replace(spec, resources=tuple(
            vm_name if name.casefold() == own else name for name in spec.resources))
            for spec in self.events)
        return replace(self, vm_name=vm_name, events=events)


def natural_start(spec: EventSpec) -> float:
    """When an event starts without approvals: the first moment NotBefore has passed."""
    if spec.status == "Started":
        return spec.at
    not_before, since = spec.at + spec.notice, spec.at
    for change in spec.reschedule:
        if not_before < change.at:
            return max(not_before, since)
        not_before, since = change.at + change.notice, change.at
    return max(not_before, since)


def builtin_scenarios() -> list[str]:
    """Names of the scenarios shipped with setui."""
    folder = resources.files("setui.emulator").joinpath("scenarios")
    return sorted(item.name[:-5] for item in folder.iterdir() if item.name.endswith(".toml"))


def load_scenario(name_or_path: str) -> Scenario:
    """A built-in scenario by name, or a ``.toml`` / ``.json`` file by path."""
    if name_or_path in builtin_scenarios():
        item = resources.files("setui.emulator") / "scenarios" / f"{name_or_path}.toml"
        return parse_scenario(item.read_text(encoding="utf-8"), source=f"{name_or_path} "
                              "(built-in)", default_name=name_or_path, fmt="toml")
    path = Path(name_or_path)
    if not path.is_file():
        known = ", ".join(builtin_scenarios())
        raise ScenarioError(f"{name_or_path}: no such scenario file or built-in scenario "
                            f"(built-in: {known})")
    fmt = "json" if path.suffix.lower() == ".json" else "toml"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"{path}: cannot read: {exc}") from None
    return parse_scenario(text, source=str(path), default_name=path.stem, fmt=fmt)


def parse_scenario(text: str, *, source: str = "<scenario>", default_name: str = "scenario",
                   fmt: str = "toml") -> Scenario:
    """Parse and validate a scenario; every problem is reported with ``source`` and field."""
    try:
        data = json.loads(text) if fmt == "json" else parse_toml(text)
    except ValueError as exc:  # TomlError is one
        raise ScenarioError(f"{source}: not valid {fmt.upper()}: {exc}") from None
    except RecursionError:  # json recurses once a level, as TOML's parser does
        raise ScenarioError(f"{source}: not valid {fmt.upper()}: nested too deeply") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: the top level must be a table/object")
    return _Parser(source).scenario(data, default_name)


class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, message: str) -> ScenarioError:
        return ScenarioError(f"{self.source}: {where}: {message}")

    def check_keys(self, data: Mapping[str, Any], known: set[str], where: str) -> None:
        unknown = sorted(set(data) - known)
        if unknown:
            raise self.fail(where or "top level", f"unknown field {unknown[0]!r} (known: "
                            f"{', '.join(sorted(known))})")

    def time(self, value: object, where: str, *, allow_none: bool = False) -> float | None:
        if value is None and allow_none:
            return None
        if isinstance(value, bool):
            raise self.fail(where, f"expected seconds, got {value!r}")
        try:
            if isinstance(value, int | float):
                seconds = float(value)
            elif isinstance(value, str) and (match := _TIME_RE.match(value)):
                seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
            else:
                raise self.fail(where, f"expected seconds (a number, or a string like '90s', "
                                f"'15m', '2h', '7d'), got {_preview(value)}")
        except OverflowError:  # a JSON integer of hundreds of digits: no float holds it
            raise self.fail(where, f"must be at most {MAX_SECONDS} seconds (a year), got "
                            f"{_preview(value)}") from None
        if not math.isfinite(seconds) or seconds < 0:
            raise self.fail(where, f"must be a finite number of seconds >= 0, got "
                            f"{_preview(value)}")
        if seconds > MAX_SECONDS:
            raise self.fail(where, f"must be at most {MAX_SECONDS} seconds (a year), got "
                            f"{_preview(value)}")
        return seconds

    def text(self, value: object, where: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(where, f"expected a non-empty string, got {value!r}")
        return value

    def scenario(self, data: Mapping[str, Any], default_name: str) -> Scenario:
        self.check_keys(data, _TOP_KEYS, "")
        name = self.text(data.get("name", default_name), "name")
        vm_name = self.text(data.get("vm_name", "vm-0"), "vm_name")
        description = data.get("description", "")
        if not isinstance(description, str):
            raise self.fail("description", f"expected a string, got {description!r}")
        repeat = data.get("repeat", False)
        if not isinstance(repeat, bool):
            raise self.fail("repeat", f"expected true or false, got {repeat!r}")
        raw_events = data.get("events", [])
        if not isinstance(raw_events, list):
            raise self.fail("events", "expected an array of tables ([[events]])")
        defaults = {"tail": 600.0, "approval_delay": 1.0, "default_duration": 10.0}
        numbers = {key: self.time(data.get(key, fallback), key)
                   for key, fallback in defaults.items()}
        if numbers["default_duration"] == 0:
            raise self.fail("default_duration", "must be more than 0 seconds")
        length = self.time(data.get("length"), "length", allow_none=True)
        if length is not None and length < 1:
            raise self.fail("length", f"must be at least 1 second, got {_preview(data['length'])}")
        events = tuple(self.event(raw, index, name, vm_name)
                       for index, raw in enumerate(raw_events))
        seen: set[str] = set()
        for index, spec in enumerate(events):
            if spec.id.lower() in seen:
                raise self.fail(f"events[{index}].id", f"duplicate EventId {spec.id!r}")
            seen.add(spec.id.lower())
        scenario = Scenario(name=name, events=events, description=description, vm_name=vm_name,
                            tail=numbers["tail"] or 0.0,
                            approval_delay=numbers["approval_delay"] or 0.0,
                            default_duration=numbers["default_duration"] or 0.0,
                            repeat=repeat, length=length, source=self.source)
        span = scenario.natural_end()
        if repeat and length is not None and length < span:
            # Shorter loops would pile up copies of every event, more with every loop.
            raise self.fail("length", f"{length:g} s is shorter than one play of the events "
                            f"({span:g} s until the last is gone); give at least that, or "
                            "leave length out")
        return scenario

    def event(self, raw: object, index: int, scenario_name: str, vm_name: str) -> EventSpec:
        where = f"events[{index}]"
        if not isinstance(raw, dict):
            raise self.fail(where, "expected a table")
        self.check_keys(raw, _EVENT_KEYS, where)
        if "type" not in raw:
            raise self.fail(f"{where}.type", "missing (one of " + ", ".join(EVENT_TYPES) + ")")
        event_type = self.text(raw["type"], f"{where}.type")
        if event_type not in EVENT_TYPES and "notice" not in raw:
            raise self.fail(f"{where}.type", f"{event_type!r} is not a documented type "
                            f"({', '.join(EVENT_TYPES)}); give 'notice' to use it anyway")
        status = raw.get("status", "Scheduled")
        if status not in STATUSES:
            raise self.fail(f"{where}.status", f"expected 'Scheduled' or 'Started', got "
                            f"{status!r}")
        default_id = str(uuid.uuid5(_ID_NAMESPACE, f"{scenario_name}/{index}")).upper()
        event_id = self.text(raw.get("id", default_id), f"{where}.id")
        at = self.time(raw.get("at", 0), f"{where}.at") or 0.0
        notice = self.time(raw.get("notice", DEFAULT_NOTICE.get(event_type, 0)),
                           f"{where}.notice") or 0.0
        res = raw.get("resources", [vm_name])
        if not isinstance(res, list) or not res or not all(isinstance(r, str) and r
                                                            for r in res):
            raise self.fail(f"{where}.resources", f"expected a list of VM names, got {res!r}")
        duration = raw.get("duration", -1)
        if isinstance(duration, bool) or not isinstance(duration, int) \
                or not -1 <= duration <= MAX_SECONDS:
            raise self.fail(f"{where}.duration", f"expected whole seconds from -1 (unknown) to "
                            f"{MAX_SECONDS} (a year), got {_preview(duration)}")
        cancel_at = self.time(raw.get("cancel_at"), f"{where}.cancel_at", allow_none=True)
        approve_at = self.time(raw.get("approve_at"), f"{where}.approve_at", allow_none=True)
        for key, value in (("cancel_at", cancel_at), ("approve_at", approve_at)):
            if value is not None and value < at:
                raise self.fail(f"{where}.{key}", f"{value:g} is before the event appears "
                                f"(at = {at:g})")
        spec = EventSpec(
            id=event_id, type=event_type, status=status, at=at, notice=notice,
            resources=tuple(res), duration=duration,
            source=self.text(raw.get("source", "Platform"), f"{where}.source"),
            description=str(raw.get("description", _DESCRIPTIONS.get(event_type, ""))),
            cancel_at=cancel_at, approve_at=approve_at,
            tail=self.time(raw.get("tail"), f"{where}.tail", allow_none=True),
            reschedule=self.reschedules(raw.get("reschedule", []), at, f"{where}.reschedule"),
        )
        if spec.status == "Started" and (spec.reschedule or spec.cancel_at is not None):
            raise self.fail(where, "a Started event cannot be rescheduled or cancelled")
        return spec

    def reschedules(self, raw: object, at: float, where: str) -> tuple[Reschedule, ...]:
        if not isinstance(raw, list):
            raise self.fail(where, "expected an array like [{at = 300, notice = 600}]")
        result: list[Reschedule] = []
        previous = at
        for index, item in enumerate(raw):
            here = f"{where}[{index}]"
            if not isinstance(item, dict):
                raise self.fail(here, "expected a table {at = ..., notice = ...}")
            self.check_keys(item, {"at", "notice"}, here)
            if "at" not in item or "notice" not in item:
                raise self.fail(here, "needs both 'at' and 'notice'")
            when = self.time(item["at"], f"{here}.at") or 0.0
            if when < previous:
                raise self.fail(f"{here}.at", f"{when:g} is before the event appears or the "
                                "previous reschedule; list them in time order")
            result.append(Reschedule(when, self.time(item["notice"], f"{here}.notice") or 0.0))
            previous = when
        return tuple(result)
