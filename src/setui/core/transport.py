"""A lean httpx transport for the plain-http metadata endpoint.

IMDS is ``http://169.254.169.254``: no TLS, no proxy, one server, a request a second.
httpx's default transport (httpcore over anyio) is built for everything else, and its
per-request bookkeeping (pool locks that probe for the async library on every request,
anyio stream wrappers) cost more CPU than the poll itself. This transport keeps httpx's
requests, responses and errors, and does the wire with what asyncio and h11 (httpx's
own HTTP/1.1 parser) already give: one kept-alive connection, a second only while two
requests overlap, a new one when the server closed the old. Timeouts are httpx's
(``connect``/``read``/``write``), the response head is bounded, and the body is read
only as fast as the caller asks (the caller bounds its size).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, TypeVar

import h11
import httpx

__all__ = ["MAX_HEAD_BYTES", "Answer", "PlainTransport", "head_fields", "within"]

_T = TypeVar("_T")
MAX_HEAD_BYTES = 64 * 1024  # a status line and headers; real answers have a few hundred
_CHUNK = 64 * 1024

if sys.version_info >= (3, 11):
    async def within(seconds: float | None, step: Awaitable[_T]) -> _T:
        """``step`` within ``seconds`` (None: no limit), without a task per call."""
        if seconds is None:
            return await step
        async with asyncio.timeout(seconds):
            return await step
else:  # pragma: no cover - Python 3.10
    async def within(seconds: float | None, step: Awaitable[_T]) -> _T:
        return await asyncio.wait_for(step, seconds)


class _Connection:
    """One TCP connection and its HTTP/1.1 state."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)
        self.idle_since = 0.0

    def usable(self) -> bool:
        """Still open at both ends, with nothing unasked-for waiting to be read: bytes
        the server sent beyond its last answer would be read as the next one's."""
        return not (self.writer.is_closing() or self.reader.at_eof()
                    or self.reader.exception() is not None
                    or self.h11.our_state is not h11.IDLE
                    or self.h11.trailing_data != (b"", False))

    async def next_event(self, timeout: float | None, request: httpx.Request, *,
                         unread: bool = False) -> Any:
        """The next HTTP event, reading from the socket as h11 needs more bytes.
        ``unread``: the request has just gone out, so h11 holds nothing of the answer
        unless bytes came before it (then it is asked as usual): it would only say it
        needs data, a tenth of its work each poll."""
        if unread and self.h11.trailing_data == (b"", False):
            event: Any = h11.NEED_DATA
        else:
            event = None
        while True:
            if event is None:
                try:
                    event = self.h11.next_event()
                except h11.RemoteProtocolError as exc:
                    raise httpx.RemoteProtocolError(str(exc), request=request) from exc
            if event is not h11.NEED_DATA:
                return event
            event = None
            try:
                # No limit of its own (the client bounds the whole exchange): the read
                # awaited directly, not through one more coroutine.
                data = await (self.reader.read(_CHUNK) if timeout is None
                              else within(timeout, self.reader.read(_CHUNK)))
            except asyncio.TimeoutError as exc:
                raise httpx.ReadTimeout("timed out reading the answer", request=request) \
                    from exc
            except OSError as exc:
                raise httpx.ReadError(str(exc) or type(exc).__name__, request=request) \
                    from exc
            if not data and self.h11.their_state is h11.SEND_RESPONSE:
                raise httpx.RemoteProtocolError("the server closed the connection without "
                                                "an answer", request=request)
            try:
                self.h11.receive_data(data)  # b"": the server closed its end
            except h11.RemoteProtocolError as exc:
                raise httpx.RemoteProtocolError(str(exc), request=request) from exc

    def close(self) -> None:
        self.writer.close()


class _Body(httpx.AsyncByteStream):
    """The answer's body as the caller reads it; the connection goes back to the pool
    once the body is complete, and is closed if the caller stops early."""

    def __init__(self, pool: PlainTransport, connection: _Connection, request: httpx.Request,
                 timeout: float | None) -> None:
        self._pool = pool
        self._connection: _Connection | None = connection
        self._request = request
        self._timeout = timeout

    async def __aiter__(self) -> AsyncIterator[bytes]:
        connection = self._connection
        if connection is None:
            return
        try:
            while True:
                event = await connection.next_event(self._timeout, self._request)
                if isinstance(event, h11.Data):
                    yield bytes(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    break
                elif isinstance(event, h11.ConnectionClosed):
                    raise httpx.RemoteProtocolError("the server closed the connection "
                                                    "mid-answer", request=self._request)
        except BaseException:
            await self.aclose()
            raise
        self._connection = None
        self._pool._release(connection)

    async def aclose(self) -> None:
        if self._connection is not None:
            self._connection.close()  # an unread rest makes it useless for the next one
            self._connection = None


class Answer:
    """An answer's head as h11 read it, and its body to read (and close)."""

    __slots__ = ("body", "head")

    def __init__(self, head: h11.Response, body: httpx.AsyncByteStream) -> None:
        self.head = head
        self.body = body

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


class PlainTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 over plain TCP with keep-alive; ``http://`` URLs only."""

    def __init__(self, *, keepalive_expiry: float = 180.0,
                 mono: Callable[[], float] = time.monotonic) -> None:
        self.keepalive_expiry = keepalive_expiry
        self._mono = mono
        self._idle: _Connection | None = None
        self._closed = False
        # h11's form of each bodiless request sent (the polls: one or two), by what it
        # says: building one validates every header again, a tenth of a poll's work.
        self._heads: dict[tuple[bytes, bytes, tuple[tuple[bytes, bytes], ...]], h11.Request] = {}
        self.opened = 0  # connections made so far (for tests and the curious)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        answer = await self.open(request)
        head = answer.head
        return httpx.Response(
            head.status_code, headers=head.headers, stream=answer.body,
            extensions={"http_version": b"HTTP/" + head.http_version,
                        "reason_phrase": bytes(head.reason)})

    async def open(self, request: httpx.Request) -> Answer:
        """``request`` sent and its answer's head read; the body left to be read from
        :attr:`Answer.body`. What :meth:`handle_async_request` does, without the
        httpx.Response around it (the client's own polls need none: its headers alone
        were a tenth of a poll's Python)."""
        if request.url.scheme != "http":
            raise httpx.UnsupportedProtocol(f"this transport speaks plain http only, not "
                                            f"{request.url.scheme!r}", request=request)
        if self._closed:
            raise httpx.ConnectError("the transport is closed", request=request)
        timeouts = request.extensions.get("timeout", {})
        connection = self._take_idle() or await self._connect(request, timeouts.get("connect"))
        trace = request.extensions.get("trace")
        if trace is not None:  # from here on the request may reach the server (httpcore's name)
            await trace("http11.send_request_headers.started", {"request": request})
        try:
            await self._send(connection, request, self._head(request), timeouts.get("write"))
            read = timeouts.get("read")
            event = await connection.next_event(read, request, unread=True)
            while not isinstance(event, h11.Response):
                event = await connection.next_event(read, request)
                # h11.InformationalResponse (100 Continue and the like): read on.
        except BaseException:
            connection.close()
            raise
        return Answer(event, _Body(self, connection, request, read))

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, None
        if idle is not None:
            idle.close()

    # -- the pool of one ---------------------------------------------------------------------
    def _take_idle(self) -> _Connection | None:
        idle, self._idle = self._idle, None
        if idle is None:
            return None
        if idle.usable() and self._mono() - idle.idle_since < self.keepalive_expiry:
            return idle
        idle.close()
        return None

    def _release(self, connection: _Connection) -> None:
        """A connection whose exchange completed: kept for the next request if HTTP
        allows it and no other is kept, else closed."""
        state = connection.h11
        if self._closed or self._idle is not None or state.our_state is not h11.DONE \
                or state.their_state is not h11.DONE:
            connection.close()
            return
        state.start_next_cycle()
        connection.idle_since = self._mono()
        self._idle = connection

    async def _connect(self, request: httpx.Request, timeout: float | None) -> _Connection:
        host = request.url.host
        port = request.url.port or 80
        trace = request.extensions.get("trace")
        if trace is not None:  # the client tells a new connection from a reused one
            await trace("connection.connect_tcp.started", {"host": host, "port": port})
        try:
            reader, writer = await within(timeout, asyncio.open_connection(
                host, port, limit=_CHUNK))
        except asyncio.TimeoutError as exc:
            raise httpx.ConnectTimeout(f"no connection to {host}:{port} within {timeout} s",
                                       request=request) from exc
        except OSError as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__, request=request) from exc
        self.opened += 1
        return _Connection(reader, writer)

    def _head(self, request: httpx.Request) -> h11.Request:
        """The request line and headers as h11 sends them; kept for bodiless requests."""
        key = (request.method.encode(), request.url.raw_path, tuple(request.headers.raw))
        head = self._heads.get(key)
        if head is None:
            try:
                head = h11.Request(method=key[0], target=key[1], headers=list(key[2]))
            except h11.LocalProtocolError as exc:
                raise httpx.LocalProtocolError(str(exc), request=request) from exc
            if "content-length" not in request.headers \
                    and "transfer-encoding" not in request.headers:
                if len(self._heads) >= 8:  # an ETag per document: keep only a few
                    self._heads.clear()
                self._heads[key] = head
        return head

    @staticmethod
    async def _send(connection: _Connection, request: httpx.Request, head: h11.Request,
                    timeout: float | None) -> None:
        # A request built with its content (every request of the client's) has it read
        # already; only a streamed one is read here.
        body = request.content if isinstance(request.stream, httpx.ByteStream) \
            else await request.aread()
        state = connection.h11
        try:
            data = state.send(head)
            if body:
                data += state.send(h11.Data(data=body))
            data += state.send(h11.EndOfMessage())
        except h11.LocalProtocolError as exc:
            raise httpx.LocalProtocolError(str(exc), request=request) from exc
        writer = connection.writer
        try:
            writer.write(data)
            # A request fits the socket's buffer: the bytes are with the kernel already
            # and there is nothing to wait for. drain() only when some are left over (or
            # the connection is closing: drain says why).
            if writer.transport.get_write_buffer_size() or writer.is_closing():
                await within(timeout, writer.drain())
        except asyncio.TimeoutError as exc:
            raise httpx.WriteTimeout("timed out sending the request", request=request) from exc
        except OSError as exc:
            raise httpx.WriteError(str(exc) or type(exc).__name__, request=request) from exc
