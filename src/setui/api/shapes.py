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
    """How one field travels: ``write`` gives its JSON; ``read`` takes it back from an
    object, checked, or, for a kind whose read is one call of :class:`Fields`, ``call``
    gives that call as source, which a shape writes into its decode as a hand-written
    one would have it (a state push reads some thousand fields)."""

    def write(self, value: Any) -> Any:
        return value

    def read(self, fields: Fields, key: str) -> Any:
        raise NotImplementedError

    def call(self, key: str, me: str) -> str | None:
        """``read`` of ``key`` from ``fields`` as a Python expression, or None (``me``
        is the name this kind has there)."""
        return None


@dataclass(frozen=True)
class Text(Kind):
    """A string of at most ``limit`` characters; null reads as "" when ``empty``."""

    limit: int = MAX_TEXT
    optional: bool = False
    empty: bool = False

    def call(self, key: str, me: str) -> str | None:
        optional, empty = self.optional or self.empty, ' or ""' if self.empty else ""
        return f"fields.text({key!r}, limit={self.limit}, optional={optional}){empty}"


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

    def call(self, key: str, me: str) -> str | None:
        optional, empty = self.optional or self.empty, " or 0" if self.empty else ""
        return f"fields.integer({key!r}, low={self.low}, high={self.high}, " \
               f"optional={optional}){empty}"


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

    def call(self, key: str, me: str) -> str | None:
        return f"fields.flag({key!r}, {self.default})"


@dataclass(frozen=True)
class Time(Kind):
    """A moment, as ISO 8601 in UTC to the microsecond."""

    optional: bool = False

    def write(self, value: Any) -> Any:
        return time_text(value)

    def call(self, key: str, me: str) -> str | None:
        return f"fields.time({key!r}, optional={self.optional})"


@dataclass(frozen=True)
class Member(Kind):
    """A value of the enum ``enum``, by its value; a refusal says "not ``what``"."""

    enum: type[Enum]
    what: str
    optional: bool = False

    def write(self, value: Any) -> Any:
        return None if value is None else value.value

    def call(self, key: str, me: str) -> str | None:
        return f"fields.member({key!r}, {me}.enum, {self.what!r}, optional={self.optional})"


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
        encode = self.shape.encode
        return [encode(item) for item in value]

    def read(self, fields: Fields, key: str) -> Any:
        name, code, decode = fields.name(key), fields.code, self.shape.decode
        each = [Fields(item, f"{name}[{i}]", code)  # every one an object before any is read
                for i, item in enumerate(_items(fields, key, self.limit))]
        return self.into([decode(item) for item in each])


class Pairs(Kind):
    """At most ``limit`` two-item lists, each item read as the field ``names`` calls it."""

    def __init__(self, names: tuple[str, str], kinds: tuple[Kind, Kind], limit: int,
                 into: Callable[[Any], Any] = tuple) -> None:
        self.names, self.limit, self.into = names, limit, into
        self.writers = [_writer(kind) or (lambda item: item) for kind in kinds]
        self.pair = Shape(_pair, dict(zip(names, kinds, strict=True)),
                          names={names[0]: "a", names[1]: "b"})

    def write(self, value: Any) -> Any:
        one, two = self.writers
        return [[one(a), two(b)] for a, b in value]

    def read(self, fields: Fields, key: str) -> Any:
        (first, second), name, decode = self.names, fields.name(key), self.pair.decode
        return self.into([decode(Fields({first: pair[0], second: pair[1]} if isinstance(
            pair, list) and len(pair) == 2 else None, f"{name}[{index}]"))
            for index, pair in enumerate(_items(fields, key, self.limit))])


def _pair(a: Any, b: Any) -> tuple[Any, Any]:
    return a, b


def _writer(kind: Kind) -> Callable[[Any], Any] | None:
    """What writes a value of ``kind``; None: it travels as it is."""
    if isinstance(kind, Time):
        return time_text
    return None if type(kind).write is Kind.write else kind.write


class Shape(Generic[_T]):
    """The wire form of the class ``build``: its fields by key, in the order a decode
    checks them; ``names`` maps a key to an attribute of another name, ``fixed`` gives
    the attributes that do not travel."""

    def __init__(self, build: Callable[..., _T], fields: Mapping[str, Kind], *,
                 names: Mapping[str, str] | None = None,
                 fixed: Mapping[str, Any] | None = None) -> None:
        self.build, self.kinds, self.fixed = build, dict(fields), dict(fixed or {})
        keys = list(fields)
        self.attrs = attrs = [(names or {}).get(key, key) for key in keys]
        for attr in attrs:
            if not attr.isidentifier() or iskeyword(attr):
                raise ValueError(f"{attr!r} cannot be an attribute")
        # Both directions are written out as one function each, as they would be by hand
        # (the way dataclasses writes __init__): a state push encodes and decodes some
        # thousand fields, and a loop over the table costs it about 40% more
        # (bench/wire_codec.py). A key is written as a literal, an attribute as a name.
        scope: dict[str, Any] = {"build": build, "fixed": self.fixed}
        written, read = [], []
        for n, (key, attr, kind) in enumerate(zip(keys, attrs, fields.values(), strict=True)):
            scope[f"kind{n}"], scope[f"write{n}"] = kind, _writer(kind)
            write = "" if scope[f"write{n}"] is None else f"write{n}"
            written.append(f"{key!r}: {write}(value.{attr})")
            read.append(f"{attr}={kind.call(key, f'kind{n}') or f'kind{n}.read(fields, {key!r})'}")
        exec(f"def encode(value):\n return {{{', '.join(written)}}}\n"
             f"def decode(fields):\n return build({', '.join(read)}"
             f"{', **fixed' if self.fixed else ''})\n", scope)
        self.encode: Callable[[_T], dict[str, Any]] = scope["encode"]
        self.decode: Callable[[Fields], _T] = scope["decode"]
