"""The metrics endpoint: ``GET /metrics`` over HTTP/1.1 on the agent's own event loop,
bounded so that no client can take what polling, hooks, approvals and the store need.

Why not prometheus_client's ``start_http_server``: it is a ``ThreadingWSGIServer``, a
thread and a file descriptor per connection, with no cap and no timeout. 200 idle
connections to the old unbounded endpoint here, under a limit of 128 open files, made every
poll fail with "Too many open files"; a thread per connection would fail the same way.

So connections are accepted one at a time while fewer than :data:`MAX_CONNECTIONS` are
open; past that the listening socket is left alone and the kernel's backlog holds the rest
(no descriptor of ours, no CPU). Each connection has :data:`HEAD_TIMEOUT` seconds from
its accept to send a whole request head (trickling bytes does not extend it), and
:data:`SEND_TIMEOUT` more for its answer to be taken; then it is aborted. One request per
connection, then close. An ``accept`` that fails (out of files, a reset) waits a second
and tries again, silently: it is never a traceback in the agent's log.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
from collections.abc import Callable

from setui.listening import listen

__all__ = ["HEAD_TIMEOUT", "MAX_CONNECTIONS", "MAX_REQUEST", "SEND_TIMEOUT", "MetricsServer",
           "http_answer"]

MAX_CONNECTIONS = 16  # scrapers: a Prometheus or two, a person with curl
HEAD_TIMEOUT = 5.0  # seconds from accept to the end of the request head
SEND_TIMEOUT = 10.0  # seconds more for the client to take the answer
MAX_REQUEST = 16 * 1024  # bytes of a request line and headers
ACCEPT_RETRY = 1.0  # seconds before accepting again after the system refused one
_OUT_OF_RESOURCES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed"}

# The exposition in the format an Accept header asks for, and its content type.
Exposition = Callable[[str], tuple[bytes, str]]


def http_answer(head: bytes, exposition: Exposition) -> bytes:
    """The whole HTTP response to a request's head (its lines, without the blank line
    that ends it): the metrics for ``GET /metrics`` (or ``/``), a short refusal otherwise."""
    lines = head.decode("latin-1").split("\r\n")
    method, _, rest = lines[0].partition(" ")
    path = rest.partition(" ")[0].partition("?")[0]
    body, content_type = b"", "text/plain; charset=utf-8"
    if method not in ("GET", "HEAD"):
        status = 405
    elif path not in ("/metrics", "/"):
        status = 404
    else:
        status = 200
        accept = next((value.strip() for name, _, value in
                       (line.partition(":") for line in lines[1:])
                       if name.strip().lower() == "accept"), "")
        body, content_type = exposition(accept)
    if status != 200:
        body = f"{_REASONS[status]}: metrics are at /metrics\n".encode()
    return (f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode("latin-1")
            + (body if method != "HEAD" else b""))


class _Scrape(asyncio.Protocol):
    """One connection: a bounded head within a bounded time, one answer, close.

    A protocol rather than asyncio's streams: no task, reader or writer per scrape, only
    the callbacks the loop makes anyway. Anything but a whole head in time (too long, too
    slow, closed first) is closed without a word."""

    def __init__(self, server: MetricsServer) -> None:
        self.server = server
        self.head: bytes | None = b""  # None once answered
        self.transport: asyncio.Transport | None = None
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.timer = asyncio.get_running_loop().call_later(self.server.head_timeout,
                                                           self.abort)

    def data_received(self, data: bytes) -> None:
        if self.head is None or self.transport is None:
            return  # answered: the rest of what a client sends is not read
        self.head += data
        end = self.head.find(b"\r\n\r\n")
        if end < 0 and len(self.head) <= MAX_REQUEST:
            return
        head, self.head = self.head, None
        if 0 <= end <= MAX_REQUEST:
            self.transport.write(http_answer(head[:end], self.server.exposition))
        self._close()

    def eof_received(self) -> bool:
        self._close()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.transport = None
        self.server.release(self)

    def _close(self) -> None:
        """Close once what was written is sent, or abort if the client has not taken it
        within SEND_TIMEOUT (a transport waits for its buffer before it closes)."""
        if self.timer is not None:
            self.timer.cancel()
        if self.transport is not None:
            self.transport.close()
            self.timer = asyncio.get_running_loop().call_later(self.server.send_timeout,
                                                               self.abort)

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()


class MetricsServer:
    """Answers scrapes on one address from the caller's event loop, with what
    ``exposition(accept)`` gives."""

    def __init__(self, exposition: Exposition, *, max_connections: int = MAX_CONNECTIONS,
                 head_timeout: float = HEAD_TIMEOUT, send_timeout: float = SEND_TIMEOUT
                 ) -> None:
        self.exposition = exposition
        self.head_timeout = head_timeout
        self.send_timeout = send_timeout
        self.max_connections = max_connections
        self._open: set[_Scrape] = set()  # connections accepted and not yet lost
        self._room: asyncio.Event | None = None
        self._sock: socket.socket | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self, host: str, port: int) -> tuple[str, int]:
        """Listen on ``host:port`` (port 0: a free one); the address it listens on."""
        sock = listen(host, port)
        self._sock = sock
        self._room = asyncio.Event()
        self._room.set()
        self._task = asyncio.ensure_future(self._serve(sock))
        bound = sock.getsockname()
        return str(bound[0]), int(bound[1])

    @property
    def open(self) -> int:
        return len(self._open)

    def release(self, scrape: _Scrape) -> None:
        """A connection is gone: its slot is free (once, however often it is said)."""
        self._open.discard(scrape)
        if self._room is not None:
            self._room.set()

    async def _serve(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        assert self._room is not None
        while True:
            if self.open >= self.max_connections:
                self._room.clear()
                await self._room.wait()
                continue
            try:
                conn, _ = await loop.sock_accept(sock)
            except OSError as exc:  # out of files, or a connection reset before accept
                if exc.errno in _OUT_OF_RESOURCES:
                    await asyncio.sleep(ACCEPT_RETRY)
                continue
            await self._take(conn)

    async def _take(self, conn: socket.socket) -> None:
        scrape = _Scrape(self)
        self._open.add(scrape)
        try:
            await asyncio.get_running_loop().connect_accepted_socket(lambda: scrape, conn)
        except OSError:
            conn.close()
            self.release(scrape)

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()
        for scrape in list(self._open):
            scrape.abort()
