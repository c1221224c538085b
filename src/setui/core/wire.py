"""The rules of an HTTP/1.1 exchange with IMDS, without the I/O. Two drivers keep them,
each a :class:`Wire` with a socket: the lean transport (core.transport: asyncio streams,
on the loop) and the quiet polls (core.quiet: a blocking socket, on a thread). The rules:
h11 (httpx's own parser) makes the request's bytes and reads the answer, its head
bounded; a close before the head or within the body fails the exchange, each failure
named as httpx names it; a connection carries the next request only if its exchange
completed at both ends, it was idle less than the keep-alive expiry and no byte beyond
its last answer waits (in h11 or at the socket: it would be read as the next answer).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import h11
import httpx

__all__ = ["CHUNK", "KEEPALIVE_EXPIRY", "MAX_HEAD_BYTES", "StreamedResponse", "Wire",
           "declared_length", "failed", "head_fields", "request_head"]

MAX_HEAD_BYTES = 64 * 1024  # a status line and headers; real answers have a few hundred
CHUNK = 64 * 1024  # the most one read takes
# Longer than any wait between polls: the slow pace (10 s), the backoff cap (30 s) and
# the longest Retry-After obeyed (backoff.MAX_RETRY_AFTER, 120 s).
KEEPALIVE_EXPIRY = 180.0

_STEPS: dict[str, tuple[type[httpx.TransportError], type[httpx.TransportError], str]] = {
    "connect": (httpx.ConnectTimeout, httpx.ConnectError, "no connection to {}:{} within {} s"),
    "send": (httpx.WriteTimeout, httpx.WriteError, "timed out sending the request"),
    "read": (httpx.ReadTimeout, httpx.ReadError, "timed out reading the answer"),
}


def failed(step: str, exc: BaseException, request: httpx.Request | None = None,
           *where: object) -> httpx.TransportError:
    """A timeout or OS error of ``step`` as httpx names it (raised from ``exc``, where the
    client finds the errno); ``where``: a connection's host, port and seconds."""
    timeout, error, text = _STEPS[step]
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return timeout(text.format(*where), request=request)
    return error(str(exc) or type(exc).__name__, request=request)


class Wire:
    """One connection's HTTP/1.1 state. Its driver (a subclass) reads when :meth:`event`
    says ``h11.NEED_DATA`` and hands it the bytes."""

    __slots__ = ("h11", "idle_since")

    def __init__(self) -> None:
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)
        self.idle_since = 0.0

    def request(self, method: bytes, target: bytes, headers: tuple[tuple[bytes, bytes], ...],
                body: bytes = b"", request: httpx.Request | None = None) -> bytes:
        """The bytes of a request: its line and ``headers``, ``body``, the message's end."""
        state = self.h11
        try:
            data = state.send(request_head(method, target, headers))
            if body:
                data += state.send(h11.Data(data=body))
            data += state.send(h11.EndOfMessage())
        except h11.LocalProtocolError as exc:
            raise httpx.LocalProtocolError(str(exc), request=request) from exc
        return data

    def event(self, data: bytes | None = None, request: httpx.Request | None = None, *,
              unread: bool = False) -> Any:
        """The answer's next event (of a head, the final one) or ``h11.NEED_DATA``, after
        ``data`` if a read gave some (b"": the server closed). ``unread``: the request just
        went out, so h11 has nothing unless bytes came before it (asking it would cost a
        tenth of its work a poll)."""
        state = self.h11
        if unread and state.trailing_data == (b"", False):
            return h11.NEED_DATA
        try:
            if data is not None:
                if not data and state.their_state is h11.SEND_RESPONSE:
                    raise httpx.RemoteProtocolError("the server closed the connection "
                                                    "without an answer", request=request)
                state.receive_data(data)
            event = state.next_event()
            while isinstance(event, h11.InformationalResponse):  # 100 Continue: read on
                event = state.next_event()
        except h11.RemoteProtocolError as exc:
            raise httpx.RemoteProtocolError(str(exc), request=request) from exc
        return event

    @staticmethod
    def chunk(event: Any, request: httpx.Request | None = None) -> bytes | None:
        """A body's event as bytes, None at the body's end."""
        if isinstance(event, h11.Data):
            return bytes(event.data)
        if isinstance(event, h11.EndOfMessage):
            return None
        raise httpx.RemoteProtocolError("the server closed the connection mid-answer",
                                        request=request)  # h11.ConnectionClosed: no other

    def finish(self, now: float) -> bool:
        """Whether the connection may be kept (its exchange complete): idle from ``now``."""
        state = self.h11
        if state.our_state is not h11.DONE or state.their_state is not h11.DONE:
            return False
        state.start_next_cycle()
        self.idle_since = now
        return True

    def reusable(self, now: float, expiry: float = KEEPALIVE_EXPIRY) -> bool:
        """Whether the kept connection may carry the next request: idle at our end, no
        byte beyond the last answer in h11 or at the socket, idle less than ``expiry``."""
        state = self.h11
        return state.our_state is h11.IDLE and state.trailing_data == (b"", False) \
            and now - self.idle_since < expiry and not self.waiting()

    def waiting(self) -> bool:
        """Whether the socket is closed or has bytes to read: its driver's to say."""
        raise NotImplementedError


def declared_length(fields: Mapping[str, str]) -> int | None:
    """The body's length as the head declares it, None if it declares none usable."""
    declared = fields.get("content-length", "")
    return int(declared) if declared.isdigit() and len(declared) < 19 else None


@functools.lru_cache(maxsize=8)  # the polls' one or two, an ETag per document
def request_head(method: bytes, target: bytes,
                 headers: tuple[tuple[bytes, bytes], ...]) -> h11.Request:
    """A request's head as h11 sends it: built (every header checked) once, a tenth of a
    poll's work, and sent again."""
    return h11.Request(method=method, target=target, headers=list(headers))


class StreamedResponse(NamedTuple):
    """An answer's head as h11 read it, and its body to read (and close)."""

    head: h11.Response
    body: httpx.AsyncByteStream

    @property
    def reason(self) -> str:
        """The reason phrase as httpx gives it (ASCII, anything else left out)."""
        return bytes(self.head.reason).decode("ascii", errors="ignore")

    def fields(self) -> dict[str, str]:
        """The header fields by lowercase name: see :func:`head_fields`."""
        return head_fields(self.head.headers)


def head_fields(headers: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """Header fields as h11 read them (names lowercased), by name, repeated ones joined
    with ", ", decoded as httpx decodes them (ASCII, else UTF-8, else ISO-8859-1 for
    all): what ``httpx.Headers.get`` would answer, for a dict's lookup."""
    raw = list(headers)
    encoding = "ascii"
    for candidate in ("ascii", "utf-8", "iso-8859-1"):
        encoding = candidate
        try:
            for name, value in raw:
                name.decode(candidate)
                value.decode(candidate)
        except UnicodeDecodeError:
            continue
        break
    fields: dict[str, str] = {}
    for name, value in raw:
        key, text = name.decode(encoding), value.decode(encoding)
        fields[key] = f"{fields[key]}, {text}" if key in fields else text
    return fields
