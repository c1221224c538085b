"""A lean httpx transport for the plain-http metadata endpoint.

IMDS is ``http://169.254.169.254``: no TLS, no proxy, one server, a request a second.
httpx's default transport (httpcore over anyio) is built for everything else, and its
per-request bookkeeping (pool locks that probe for the async library on every request,
anyio stream wrappers) cost more CPU than the poll itself. This transport keeps httpx's
requests, responses and errors, and the exchange's rules (core.wire) on asyncio streams:
one kept-alive connection, a second only while two requests overlap. Timeouts are
httpx's (``connect``/``read``/``write``), and the body is read only as fast as the
caller asks (the caller bounds its size).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import h11
import httpx

from setui.core.wire import CHUNK, KEEPALIVE_EXPIRY, StreamedResponse, Wire, failed

__all__ = ["PlainTransport", "within"]

_T = TypeVar("_T")

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


class _Connection(Wire):
    """A :class:`Wire` on asyncio streams."""

    __slots__ = ("reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        super().__init__()
        self.reader, self.writer = reader, writer

    def waiting(self) -> bool:
        # Bytes the loop read from the socket already wait in the reader's buffer, which
        # asyncio has no public view of (were it renamed, tests/core/test_wire.py says so).
        reader = self.reader
        return self.writer.is_closing() or reader.at_eof() or reader.exception() is not None \
            or bool(getattr(reader, "_buffer", None))

    async def next_event(self, timeout: float | None, request: httpx.Request, *,
                         unread: bool = False) -> Any:
        """The next HTTP event, reading from the socket as h11 needs more bytes."""
        data = None
        while (event := self.event(data, request, unread=unread)) is h11.NEED_DATA:
            unread = False
            try:
                # No limit of its own (the client bounds the whole exchange): the read
                # awaited directly, not through one more coroutine.
                data = await (self.reader.read(CHUNK) if timeout is None
                              else within(timeout, self.reader.read(CHUNK)))
            except (asyncio.TimeoutError, OSError) as exc:
                raise failed("read", exc, request) from exc
        return event


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
            while (chunk := connection.chunk(await connection.next_event(
                    self._timeout, self._request), self._request)) is not None:
                yield chunk
        except BaseException:
            await self.aclose()
            raise
        self._connection = None
        self._pool._release(connection)

    async def aclose(self) -> None:
        if self._connection is not None:
            self._connection.writer.close()  # an unread rest makes it useless for the next
            self._connection = None


class PlainTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 over plain TCP with keep-alive; ``http://`` URLs only."""

    def __init__(self, *, keepalive_expiry: float = KEEPALIVE_EXPIRY,
                 mono: Callable[[], float] = time.monotonic) -> None:
        self.keepalive_expiry = keepalive_expiry
        self._mono = mono
        self._idle: _Connection | None = None
        self._closed = False
        self.opened = 0  # connections made so far (for tests and the curious)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        head, body = await self.open(request)
        return httpx.Response(
            head.status_code, headers=head.headers, stream=body,
            extensions={"http_version": b"HTTP/" + head.http_version,
                        "reason_phrase": bytes(head.reason)})

    async def open(self, request: httpx.Request) -> StreamedResponse:
        """``request`` sent and its answer's head read, the body left to read: without the
        httpx.Response of :meth:`handle_async_request` (the client's own polls need none:
        its headers alone were a tenth of a poll's Python)."""
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
            await self._send(connection, request, timeouts.get("write"))
            read = timeouts.get("read")
            head = await connection.next_event(read, request, unread=True)
        except BaseException:
            connection.writer.close()
            raise
        return StreamedResponse(head, _Body(self, connection, request, read))

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, None
        if idle is not None:
            idle.writer.close()

    # -- the pool of one ---------------------------------------------------------------------
    def _take_idle(self) -> _Connection | None:
        idle, self._idle = self._idle, None
        if idle is not None and not idle.reusable(self._mono(), self.keepalive_expiry):
            idle.writer.close()
            return None
        return idle

    def _release(self, connection: _Connection) -> None:
        """Kept for the next request if HTTP allows it and no other is kept, else closed."""
        if self._closed or self._idle is not None or not connection.finish(self._mono()):
            connection.writer.close()
            return
        self._idle = connection

    async def _connect(self, request: httpx.Request, timeout: float | None) -> _Connection:
        host, port = request.url.host, request.url.port or 80
        trace = request.extensions.get("trace")
        if trace is not None:  # the client tells a new connection from a reused one
            await trace("connection.connect_tcp.started", {"host": host, "port": port})
        try:
            reader, writer = await within(timeout, asyncio.open_connection(
                host, port, limit=CHUNK))
        except (asyncio.TimeoutError, OSError) as exc:
            raise failed("connect", exc, request, host, port, timeout) from exc
        self.opened += 1
        return _Connection(reader, writer)

    @staticmethod
    async def _send(connection: _Connection, request: httpx.Request,
                    timeout: float | None) -> None:
        # A request built with its content (every request of the client's) has it read
        # already; only a streamed one is read here.
        body = request.content if isinstance(request.stream, httpx.ByteStream) \
            else await request.aread()
        data = connection.request(request.method.encode(), request.url.raw_path,
                                  tuple(request.headers.raw), body, request)
        writer = connection.writer
        try:
            writer.write(data)
            # A request fits the socket's buffer: the bytes are with the kernel already
            # and there is nothing to wait for. drain() only when some are left over (or
            # the connection is closing: drain says why).
            if writer.transport.get_write_buffer_size() or writer.is_closing():
                await within(timeout, writer.drain())
        except (asyncio.TimeoutError, OSError) as exc:
            raise failed("send", exc, request) from exc
