"""Wire types declared once: a :class:`Shape` names a value class's fields on the wire,
each with its kind and its bounds, and both directions come from it. ``encode`` writes
every field as JSON; ``decode`` reads every field through :class:`Fields`, checked and
bounded, and builds the value. Refusals are Fields' own, so they name the field.

Pure, no I/O. The value classes stay where they are (the store, the core, the monitor):
a shape is declared beside the codec, not on the class.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from keyword import iskeyword
from typing import Any, Generic, TypeVar

from setui.api.protocol import MAX_TEXT, Fields, time_text

__all__ = ["MAX_INT", "Flag", "Int", "Kind", "Many", "Member", "Num", "OneOf", "Pairs",
           "Raw", "Shape", "Text", "Texts", "Time"]

MAX_INT = 2**63 - 1
_T = TypeVar("_T")


class Kind:
    """How one field travels: ``write`` gives its JSON, ``reader(key)`` the function that
    takes it back from an object, checked. A kind whose read is one call of
    :class:`Fields` gives that call with its bounds bound, made once per shape (a state
    push reads some thousand fields: each costs one call, as when written out by hand);
    the others say ``read``."""

    def write(self, value: Any) -> Any:
        return value

    def read(self, fields: Fields, key: str) -> Any:
        raise NotImplementedError

    def reader(self, key: str) -> Callable[[Fields], Any]:
        return lambda fields: self.read(fields, key)


@dataclass(frozen=True)
class Text(Kind):
    """A string of at most ``limit`` characters; null reads as "" when ``empty``."""

    limit: int = MAX_TEXT
    optional: bool = False
    empty: bool = False

    def reader(self, key: str) -> Callable[[Fields], Any]:
        limit, optional, text = self.limit, self.optional, Fields.text
        if self.empty:
            return lambda fields: text(fields, key, limit=limit, optional=True) or ""
        return lambda fields: text(fields, key, limit=limit, optional=optional)


@dataclass(frozen=True)
class OneOf(Kind):
    """A short string from ``choices``; a refusal says "not ``what``"."""

    choices: tuple[str, ...]
    what: str
    optional: bool = False

    def read(self, fields: Fields, key: str) -> Any:
        value = fields.text(key, limit=40, optional=self.optional)
        if value is not None and value not in self.choices:
            raise fields.fail(key, f"not {self.what}")
        return value


@dataclass(frozen=True)
class Int(Kind):
    """A whole number from ``low`` to ``high``; null reads as 0 when ``empty``."""

    high: int = MAX_INT
    low: int = 0
    optional: bool = False
    empty: bool = False

    def reader(self, key: str) -> Callable[[Fields], Any]:
        low, high, optional, integer = self.low, self.high, self.optional, Fields.integer
        if self.empty:
            return lambda fields: integer(fields, key, low=low, high=high, optional=True) or 0
        return lambda fields: integer(fields, key, low=low, high=high, optional=optional)


@dataclass(frozen=True)
class Num(Kind):
    """A finite number; ``floor`` 0 refuses a negative one, ``positive`` refuses 0 too."""

    optional: bool = False
    floor: bool = False
    positive: bool = False

    def read(self, fields: Fields, key: str) -> Any:
        value = fields.number(key, optional=self.optional)
        if value is not None and self.positive and value <= 0:
            raise fields.fail(key, "must be more than 0")
        if value is not None and self.floor and value < 0:
            raise fields.fail(key, "must not be negative")
        return value


@dataclass(frozen=True)
class Flag(Kind):
    """true or false; ``default`` when the key is absent."""

    default: bool = False

    def reader(self, key: str) -> Callable[[Fields], Any]:
        default, flag = self.default, Fields.flag
        return lambda fields: flag(fields, key, default)


@dataclass(frozen=True)
class Time(Kind):
    """A moment, as ISO 8601 in UTC to the microsecond."""

    optional: bool = False

    def write(self, value: Any) -> Any:
        return time_text(value)

    def reader(self, key: str) -> Callable[[Fields], Any]:
        optional, time = self.optional, Fields.time
        return lambda fields: time(fields, key, optional=optional)


@dataclass(frozen=True)
class Member(Kind):
    """A value of the enum ``enum``, by its value; a refusal says "not ``what``"."""

    enum: type[Enum]
    what: str
    optional: bool = False

    def write(self, value: Any) -> Any:
        return None if value is None else value.value

    def read(self, fields: Fields, key: str) -> Any:
        return fields.member(key, self.enum, self.what, optional=self.optional)


@dataclass(frozen=True)
class Raw(Kind):
    """A JSON value of the type ``json`` or null, taken as it is (``empty()`` for null
    when given); a refusal says "expected ``what``"."""

    json: type
    what: str
    empty: Callable[[], Any] | None = None

    def read(self, fields: Fields, key: str) -> Any:
        value = fields.value(key, optional=True)
        if value is not None and not isinstance(value, self.json):
            raise fields.fail(key, f"expected {self.what}")
        return self.empty() if value is None and self.empty is not None else value


@dataclass(frozen=True)
class Texts(Kind):
    """At most ``limit`` strings of at most ``each`` characters, null for none; a set
    travels sorted."""

    limit: int
    each: int
    into: Callable[[Any], Any] = tuple

    def write(self, value: Any) -> Any:
        return sorted(value) if isinstance(value, frozenset) else list(value)

    def read(self, fields: Fields, key: str) -> Any:
        return self.into(fields.texts(key, limit=self.limit, each=self.each, optional=True)
                         or ())


def _items(fields: Fields, key: str, limit: int) -> list[Any]:
    """The list at ``key`` (at most ``limit`` items; null for none)."""
    return fields.items(key, limit=limit, optional=True) or []


@dataclass(frozen=True)
class Many(Kind):
    """At most ``limit`` values of one shape, null for none."""

    shape: Shape[Any]
    limit: int
    into: Callable[[Any], Any] = tuple

    def write(self, value: Any) -> Any:
        return [self.shape.encode(item) for item in value]

    def read(self, fields: Fields, key: str) -> Any:
        each = [Fields(item, f"{fields.name(key)}[{i}]", fields.code)
                for i, item in enumerate(_items(fields, key, self.limit))]  # objects first
        return self.into(self.shape.decode(item) for item in each)


@dataclass(frozen=True)
class Pairs(Kind):
    """At most ``limit`` two-item lists, each item read as a field of the name given."""

    names: tuple[str, str]
    kinds: tuple[Kind, Kind]
    limit: int
    into: Callable[[Any], Any] = tuple

    def write(self, value: Any) -> Any:
        return [[self.kinds[0].write(a), self.kinds[1].write(b)] for a, b in value]

    def read(self, fields: Fields, key: str) -> Any:
        (first, second) = self.names
        one, two = self.kinds[0].reader(first), self.kinds[1].reader(second)
        found = []
        for index, pair in enumerate(_items(fields, key, self.limit)):
            named = Fields({first: pair[0], second: pair[1]} if isinstance(pair, list)
                           and len(pair) == 2 else None, f"{fields.name(key)}[{index}]")
            found.append((one(named), two(named)))
        return self.into(found)


class Shape(Generic[_T]):
    """The wire form of the class ``build``: its fields by key, in the order a decode
    checks them; ``names`` maps a key to an attribute of another name, ``fixed`` gives
    the attributes that do not travel."""

    def __init__(self, build: Callable[..., _T], fields: Mapping[str, Kind], *,
                 names: Mapping[str, str] | None = None,
                 fixed: Mapping[str, Any] | None = None) -> None:
        self.build = build
        keys = list(fields)
        attrs = [(names or {}).get(key, key) for key in keys]
        for attr in attrs:
            if not attr.isidentifier() or iskeyword(attr):
                raise ValueError(f"{attr!r} cannot be an attribute")
        # Both directions are written out as one function each, as they would be by hand:
        # a state push encodes and decodes some thousand fields, and a loop over a table
        # costs half as much again.
        scope: dict[str, Any] = {"build": build, "fixed": dict(fixed or {})}
        written, read = [], []
        for n, (key, attr, kind) in enumerate(zip(keys, attrs, fields.values(), strict=True)):
            plain = type(kind).write is Kind.write  # travels as it is
            scope[f"w{n}"], scope[f"r{n}"] = kind.write, kind.reader(key)
            written.append(f"{key!r}: value.{attr}" if plain else
                           f"{key!r}: w{n}(value.{attr})")
            read.append(f"{attr}=r{n}(fields)")
        exec(f"def encode(value):\n return {{{', '.join(written)}}}\n"
             f"def decode(fields):\n return build({', '.join(read)}, **fixed)\n", scope)
        self.encode: Callable[[_T], dict[str, Any]] = scope["encode"]
        self.decode: Callable[[Fields], _T] = scope["decode"]
