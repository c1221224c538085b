"""The socket protocol's frames: one JSON object per line, bounded, version 1.

Pure, no I/O: the server and the client split, parse and write frames the same way, and
every value read from a frame goes through :class:`Fields`, whose refusals name the field.
Nothing a peer sends is trusted: a frame is UTF-8 JSON, an object, no deeper than
:data:`MAX_DEPTH`, no longer than its side's limit, and without NaN or Infinity.
docs/api.md is the reference for every frame, op, bound and error code.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any, TypeVar

from setui.core.model import MAX_DEPTH as DOCUMENT_DEPTH
from setui.core.model import json_depth
from setui.store.records import from_db_time, to_db_time

__all__ = [
    "API_VERSION",
    "BAD_REQUEST",
    "BUSY",
    "ERROR_CODES",
    "FORBIDDEN",
    "INTERNAL",
    "MAX_ANSWER",
    "MAX_DEPTH",
    "MAX_ID",
    "MAX_REQUEST",
    "OPS",
    "QUERIES",
    "STOPPING",
    "TICK_EVERY",
    "TOO_LARGE",
    "UNAVAILABLE",
    "UNKNOWN_OP",
    "WRITES",
    "Fields",
    "Frames",
    "ProtocolError",
    "Request",
    "ServerFrame",
    "decode_frame",
    "encode_frame",
    "error_frame",
    "ok_frame",
    "parse_request",
    "parse_server_frame",
    "time_text",
]

# A change that a version-1 client could misread bumps this; new ops and new keys do not
# (clients ignore keys they do not know).
API_VERSION = 1
MAX_REQUEST = 64 * 1024  # bytes of one client frame, without its newline
MAX_ANSWER = 8 * 1024 * 1024  # bytes of one server frame: a page of history
# Nesting of a frame: a document IMDS sent may nest DOCUMENT_DEPTH deep (core.model), and
# a state frame carries it a few levels down.
MAX_DEPTH = DOCUMENT_DEPTH + 16
MAX_ID = 2**53 - 1  # request ids stay exact in every JSON implementation
MAX_TEXT = 64 * 1024  # characters of one string, unless a field says less

BAD_REQUEST = "bad-request"
UNKNOWN_OP = "unknown-op"
FORBIDDEN = "forbidden"
BUSY = "busy"
TOO_LARGE = "too-large"
UNAVAILABLE = "unavailable"
INTERNAL = "internal"
ERROR_CODES = frozenset({BAD_REQUEST, UNKNOWN_OP, FORBIDDEN, BUSY, TOO_LARGE, UNAVAILABLE,
                         INTERNAL})

# Seconds without a push after which a subscriber hears a tick: the agent is alive. A
# subscriber that heard nothing for longer knows less than the agent does.
TICK_EVERY = 5.0
# How the agent's last frame to each client begins when it stops (an ``unavailable``
# error); after a colon, what it waits for before it ends, if anything.
STOPPING = "the agent is stopping"

# Read-only queries: on the query thread, one at a time per connection.
QUERIES = frozenset({"history", "incarnation", "previous", "event_story", "event_ids",
                     "holes", "impacts", "approvals", "claim", "audit", "verify_audit",
                     "recording"})
# What changes something: allowed to approvers only, one at a time per connection.
WRITES = frozenset({"approve", "dismiss", "hold", "release"})
OPS = frozenset({"subscribe", "state", "bye"}) | QUERIES | WRITES


class ProtocolError(ValueError):
    """A frame or a value that breaks the protocol; ``message`` is for people."""

    def __init__(self, code: str, message: str, request_id: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id


class Frames:
    """Splits a byte stream into frames of at most ``limit`` bytes.

    Each byte is looked at once however the stream is cut, so a big frame arriving in
    small pieces costs no more than one arriving whole."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._partial = bytearray()

    @property
    def pending(self) -> int:
        """Bytes of a frame not yet ended."""
        return len(self._partial)

    def feed(self, data: bytes) -> tuple[list[bytes], ProtocolError | None]:
        """The frames ``data`` completes, and the error that ends the stream if a frame
        runs past the limit (the frames before it are still returned)."""
        frames: list[bytes] = []
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            if len(self._partial) + end - start > self.limit:
                return frames, self._too_large()
            if self._partial:
                self._partial += data[start:end]
                frames.append(bytes(self._partial))
                self._partial.clear()
            else:
                frames.append(data[start:end])
            start = end + 1
        if len(self._partial) + len(data) - start > self.limit:
            return frames, self._too_large()
        self._partial += data[start:]
        return frames, None

    def _too_large(self) -> ProtocolError:
        self._partial.clear()
        return ProtocolError(TOO_LARGE, f"a frame is longer than {self.limit} bytes "
                                        "(or has no end within that)")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def decode_frame(line: bytes) -> dict[str, Any]:
    """One frame's object; :class:`ProtocolError` (bad-request) for anything else."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError(BAD_REQUEST, "a frame is not UTF-8 text") from None
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise ProtocolError(BAD_REQUEST, f"a frame nests deeper than {MAX_DEPTH}") from None
    except ValueError as exc:
        reason = str(exc)[:120]
        raise ProtocolError(BAD_REQUEST, f"a frame is not JSON ({reason})") from None
    if not isinstance(value, dict):
        raise ProtocolError(BAD_REQUEST, "a frame must be a JSON object")
    if json_depth(value, MAX_DEPTH) > MAX_DEPTH:
        raise ProtocolError(BAD_REQUEST, f"a frame nests deeper than {MAX_DEPTH}")
    return value


def encode_frame(value: Mapping[str, Any]) -> bytes:
    """The frame's bytes, newline included: ASCII only (every other character escaped),
    so no peer ever receives a raw control or bidi character. ValueError for NaN."""
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"),
                      allow_nan=False).encode("ascii") + b"\n"


def ok_frame(request_id: int, body: bytes) -> bytes:
    """An ``ok`` answer around a body already encoded (by :func:`encode_frame`, without
    its newline): one state encoded once answers many requests."""
    return b'{"id":%d,"ok":%s}\n' % (request_id, body)


def error_frame(code: str, message: str, request_id: int | None = None) -> bytes:
    body = {"error": {"code": code, "message": message}}
    return encode_frame(body if request_id is None else {"id": request_id, **body})


def time_text(moment: datetime | None) -> str | None:
    """A time on the wire: ISO 8601 in UTC, to the microsecond."""
    return None if moment is None else to_db_time(moment)


_E = TypeVar("_E", bound=Enum)


class Fields:
    """Typed reads of one JSON object from a peer; each refusal names the field."""

    def __init__(self, data: Any, where: str = "", code: str = BAD_REQUEST) -> None:
        self.code = code
        self.where = where
        if not isinstance(data, dict):
            raise ProtocolError(code, f"{where or 'the frame'}: expected an object")
        self.data: dict[str, Any] = data

    def name(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def fail(self, key: str, problem: str) -> ProtocolError:
        return ProtocolError(self.code, f"{self.name(key)}: {problem}")

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def value(self, key: str, optional: bool = False) -> Any:
        value = self.data.get(key)
        if value is None and not optional:
            raise self.fail(key, "missing")
        return value

    def text(self, key: str, *, limit: int = MAX_TEXT, optional: bool = False) -> Any:
        value = self.value(key, optional)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.fail(key, "expected a string")
        if len(value) > limit:
            raise self.fail(key, f"longer than {limit} characters")
        return value

    def integer(self, key: str, *, low: int = 0, high: int = 2**63 - 1,
                optional: bool = False) -> Any:
        value = self.value(key, optional)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, "expected a whole number")
        if not low <= value <= high:
            raise self.fail(key, f"must be from {low} to {high}")
        return value

    def number(self, key: str, *, optional: bool = False) -> Any:
        value = self.value(key, optional)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value):
            raise self.fail(key, "expected a number")
        return float(value)

    def flag(self, key: str, default: bool = False) -> bool:
        value = self.data.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(key, "expected true or false")
        return value

    def time(self, key: str, *, optional: bool = False) -> Any:
        text = self.text(key, limit=40, optional=optional)
        if text is None:
            return None
        try:
            return from_db_time(text)
        except ValueError:
            raise self.fail(key, "expected a time such as 2026-01-02T03:04:05.000000Z") \
                from None

    def member(self, key: str, kind: type[_E], what: str, *, optional: bool = False) -> Any:
        """A value of the enum ``kind`` (``what`` names it in a refusal)."""
        text = self.text(key, limit=40, optional=optional)
        if text is None:
            return None
        try:
            return kind(text)
        except ValueError:
            raise self.fail(key, f"not {what}") from None

    def fields(self, key: str, *, optional: bool = False) -> Any:
        value = self.value(key, optional)
        return None if value is None else Fields(value, self.name(key), self.code)

    def items(self, key: str, *, limit: int, optional: bool = False) -> Any:
        value = self.value(key, optional)
        if value is None:
            return None
        if not isinstance(value, list):
            raise self.fail(key, "expected a list")
        if len(value) > limit:
            raise self.fail(key, f"more than {limit} items")
        return value

    def texts(self, key: str, *, limit: int, each: int, optional: bool = False) -> Any:
        """A list of at most ``limit`` strings of at most ``each`` characters."""
        values = self.items(key, limit=limit, optional=optional)
        if values is None:
            return None
        for index, item in enumerate(values):
            if not isinstance(item, str) or len(item) > each:
                raise self.fail(f"{key}[{index}]", f"expected a string of at most {each} "
                                                   "characters")
        return tuple(values)


@dataclass(frozen=True)
class Request:
    """``{"id": N, "op": NAME, ...args}``."""

    id: int
    op: str
    args: Fields


def parse_request(frame: dict[str, Any]) -> Request:
    """The request in a client frame; a ProtocolError carries the id when it was read."""
    request_id = frame.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, int) \
            or not 0 <= request_id <= MAX_ID:
        raise ProtocolError(BAD_REQUEST, f"id: expected a whole number from 0 to {MAX_ID}")
    op = frame.get("op")
    if not isinstance(op, str):
        raise ProtocolError(BAD_REQUEST, "op: missing, or not a string", request_id)
    if op not in OPS:
        raise ProtocolError(UNKNOWN_OP, f"no op named {op[:40]!r} in API version "
                                        f"{API_VERSION}", request_id)
    return Request(request_id, op, Fields(frame))


@dataclass(frozen=True)
class ServerFrame:
    """A server frame: ``kind`` is hello, ok, error, progress or push."""

    kind: str
    id: int | None
    body: Fields
    push: str | None = None  # the push's name (state, plan, tick)


_KINDS = ("hello", "ok", "error", "progress", "push")


def parse_server_frame(frame: dict[str, Any]) -> ServerFrame:
    """What a server frame is; ProtocolError (bad-request) when it is none of them."""
    kinds = [k for k in _KINDS if k in frame]
    if len(kinds) != 1:
        raise ProtocolError(BAD_REQUEST, "a frame from the agent is not a hello, an "
                                         "answer, a progress report or a push")
    kind = kinds[0]
    outer = Fields(frame, "")
    request_id = outer.integer("id", high=MAX_ID, optional=True)
    if kind == "push":
        name = outer.text("push", limit=40)
        return ServerFrame(kind, None, outer, name)
    if kind in ("ok", "progress") and request_id is None:
        raise ProtocolError(BAD_REQUEST, f"a {kind} frame from the agent has no id")
    return ServerFrame(kind, request_id, Fields(frame[kind], kind))
