"""The wire types as declared: every field of a value class travels (or is declared not
to), a decode checks fields in the order declared and refuses in Fields' words, and a
declaration cannot put code into the functions made from it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import pytest

import setui.api.codec as codec
from setui.api.protocol import Fields, ProtocolError
from setui.api.shapes import Int, Many, Shape, Text, Time


def _shapes() -> list[Shape[Any]]:
    found: dict[int, Shape[Any]] = {}

    def walk(shape: Shape[Any]) -> None:
        if id(shape) not in found:
            found[id(shape)] = shape
            for kind in shape.kinds.values():
                if isinstance(kind, Many):
                    walk(kind.shape)
    for value in vars(codec).values():
        if isinstance(value, Shape):
            walk(value)
        elif isinstance(value, Many):
            walk(value.shape)
    return list(found.values())


@pytest.mark.parametrize("shape", _shapes(), ids=lambda s: s.build.__name__)
def test_every_field_of_a_wire_type_travels_or_is_declared_not_to(shape: Shape[Any]
                                                                     ) -> None:
    """A field added to a value class and not to its shape would arrive as its default."""
    declared = {*shape.attrs, *shape.fixed}
    # shape.build is the dataclass itself, typed as the callable that makes one
    assert declared == {f.name for f in dataclasses.fields(shape.build)}  # type: ignore[arg-type]


@dataclass(frozen=True)
class _Pair:
    first: str
    count: int
    at: datetime | None = None
    note: str = ""


_PAIR = Shape(_Pair, {"count": Int(high=9), "first": Text(5), "when": Time(optional=True),
                      "note": Text(empty=True)}, names={"when": "at"})


def test_a_shape_reads_in_the_order_declared_and_refuses_in_fields_words() -> None:
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    value = _Pair("abc", 3, at, "n")
    assert _PAIR.encode(value) == {"count": 3, "first": "abc",
                                   "when": "2026-01-02T03:04:05.000000Z", "note": "n"}
    assert _PAIR.decode(Fields(_PAIR.encode(value))) == value
    assert _PAIR.decode(Fields({"count": 0, "first": "", "note": None})) == _Pair("", 0)
    with pytest.raises(ProtocolError, match=r"^x\.count: must be from 0 to 9$"):
        _PAIR.decode(Fields({"count": 10, "first": "too long"}, "x"))
    with pytest.raises(ProtocolError, match=r"^first: longer than 5 characters$"):
        _PAIR.decode(Fields({"count": 1, "first": "too long"}))


def test_a_declaration_cannot_put_code_into_the_functions_made_from_it() -> None:
    with pytest.raises(ValueError, match="cannot be an attribute"):
        Shape(_Pair, {"first": Text()}, names={"first": "first, count=__import__('os')"})
    odd = Shape(_Pair, {"fir'st\")\n": Text(), "count": Int()},
                names={"fir'st\")\n": "first"}, fixed={"note": "x"})
    assert odd.encode(_Pair("a", 1)) == {"fir'st\")\n": "a", "count": 1}
    assert odd.decode(Fields({"fir'st\")\n": "a", "count": 1})) == _Pair("a", 1, None, "x")
