"""Just enough HTTP/1.1 over asyncio streams, written by hand so that faults can break
it on purpose: a Content-Length that lies, a body that trickles, an answer that never
comes. Keep-alive is supported because real clients (httpx, requests) reuse connections.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http import HTTPStatus
from urllib.parse import parse_qsl, urlsplit

__all__ = ["HttpError", "RecordedRequest", "Reply", "read_request", "write_reply"]

MAX_HEAD = 16 * 1024
MAX_BODY = 64 * 1024
# A request's head and body must arrive within HEAD_TIMEOUT seconds of its first byte
# (a kept-alive connection may wait as long as it likes before that byte).
HEAD_TIMEOUT = 10.0


class HttpError(Exception):
    """The bytes received are not a request we can answer; ``status`` says why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class RecordedRequest:
    """A request as received. ``query`` keeps the first value of a repeated parameter;
    ``query_pairs`` keeps them all."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names; repeated headers joined with ", "
    body: bytes
    time: float  # the emulator's clock (POSIX seconds) when it arrived
    query_pairs: tuple[tuple[str, str], ...] = ()
    version: str = "HTTP/1.1"

    @property
    def keep_alive(self) -> bool:
        connection = self.headers.get("connection", "").lower()
        if self.version == "HTTP/1.0":
            return "keep-alive" in connection
        return "close" not in connection


@dataclass
class Reply:
    """An answer, possibly a broken one."""

    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    chunks: Iterable[bytes] | None = None  # streamed body; Content-Length = length
    length: int | None = None
    truncate: bool = False  # send half of the promised body, then close
    hang: bool = False  # never answer
    trickle: float = 0.0  # seconds per byte
    close: bool = False
    note: str = ""  # for the log


async def read_request(reader: asyncio.StreamReader, clock: Callable[[], float], *,
                       head_timeout: float = HEAD_TIMEOUT) -> RecordedRequest | None:
    """The next request on the connection, or None when the client closed it cleanly.

    Its time is read from ``clock`` once its head has arrived: a kept-alive connection
    may wait a long while for its next request, and an approval is dated when it came.
    HttpError 408 when a request starts and does not finish within ``head_timeout``.
    """
    try:
        first = await reader.readexactly(1)  # a kept-alive connection may idle for long
    except asyncio.IncompleteReadError:
        return None
    # Once a request has begun, its head and body must arrive in time: a client that
    # trickles them (or stops half-way) does not hold the connection for ever. The timer
    # poisons the reader rather than wrapping reads in wait_for, whose cancellation can
    # be lost when a read completes just as the emulator stops.
    timer = asyncio.get_running_loop().call_later(head_timeout, reader.set_exception,
                                                  _Late())
    try:
        return await _read_rest(reader, first, clock)
    except _Late:
        raise HttpError(408, f"the request did not arrive within {head_timeout:g} s of its "
                        "first byte") from None
    finally:
        timer.cancel()


class _Late(Exception):
    """The request's head or body did not arrive in time."""


async def _read_rest(reader: asyncio.StreamReader, first: bytes,
                     clock: Callable[[], float]) -> RecordedRequest | None:
    try:
        head = first + await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not (first + exc.partial).strip():
            return None  # a stray line end, then the client closed: nothing was asked
        raise HttpError(400, "the request ended in the middle of its headers") from None
    except asyncio.LimitOverrunError:
        raise HttpError(431, "request headers too large") from None
    arrived = clock()
    if len(head) > MAX_HEAD:
        raise HttpError(431, "request headers too large")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise HttpError(400, f"not an HTTP/1.x request line: {lines[0][:80]!r}")
    method, target, version = parts
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise HttpError(400, f"malformed header line: {line[:80]!r}")
        key = name.lower()
        headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raise HttpError(411, "chunked request bodies are not supported; send Content-Length")
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        raise HttpError(400, "Content-Length is not a number") from None
    if length < 0:
        raise HttpError(400, "Content-Length is negative")
    if length > MAX_BODY:
        raise HttpError(413, f"request body larger than {MAX_BODY} bytes")
    try:
        body = await reader.readexactly(length) if length else b""
    except asyncio.IncompleteReadError:
        raise HttpError(400, "the request body is shorter than its Content-Length") from None
    try:
        split = urlsplit(target)
        pairs = tuple(parse_qsl(split.query, keep_blank_values=True))
    except ValueError as exc:  # e.g. "http://[": an unclosed IPv6 bracket
        raise HttpError(400, f"malformed request target {target[:80]!r}: {exc}") from None
    query: dict[str, str] = {}
    for key, value in pairs:
        query.setdefault(key, value)
    return RecordedRequest(method, split.path, query, headers, body, arrived, pairs, version)


def _head(reply: Reply, length: int | None) -> bytes:
    try:
        reason = HTTPStatus(reply.status).phrase
    except ValueError:
        reason = "Unknown"
    lines = [f"HTTP/1.1 {reply.status} {reason}"]
    lines += [f"{name}: {value}" for name, value in reply.headers]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    if reply.close or reply.truncate:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def write_reply(writer: asyncio.StreamWriter, reply: Reply) -> None:
    """Send ``reply``, breaking it as it asks. The caller closes the connection after a
    truncated reply or one marked ``close``."""
    if reply.status == 304 or 100 <= reply.status < 200 or reply.status == 204:
        writer.write(_head(reply, None))
        await writer.drain()
        return
    chunks: Iterable[bytes] = reply.chunks if reply.chunks is not None else (reply.body,)
    length = reply.length if reply.chunks is not None else len(reply.body)
    assert length is not None
    writer.write(_head(reply, length))
    budget = length // 2 if reply.truncate else length
    for chunk in chunks:
        if budget <= 0:
            break
        piece = chunk[:budget]
        budget -= len(piece)
        if reply.trickle > 0:
            for offset in range(len(piece)):
                writer.write(piece[offset:offset + 1])
                await writer.drain()
                await asyncio.sleep(reply.trickle)
        else:
            writer.write(piece)
            await writer.drain()
    await writer.drain()
