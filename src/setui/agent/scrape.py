"""The agent's HTTP endpoints (``GET /metrics``; the load balancer's probe, agent.probe)
over HTTP/1.1 on the agent's own event loop, bounded so that no client can take what
polling, hooks, approvals and the store need.

Why not prometheus_client's ``start_http_server``: it is a ``ThreadingWSGIServer``, a
thread and a file descriptor per connection, with no cap and no timeout. 200 idle
connections to the old unbounded endpoint here, under a limit of 128 open files, made every
poll fail with "Too many open files"; a thread per connection would fail the same way.

Every connection waiting is accepted at once, in batches of :data:`ACCEPT_BATCH` a wake,
from a backlog of :data:`BACKLOG` (200 connections held by a slowloris filled the old
128, and a probe's SYN was then dropped, to be sent again a second later):

- On Linux the kernel hands a connection over only once its first data has come, or
  after about HEAD_TIMEOUT (TCP_DEFER_ACCEPT): so the request of a client that sends it
  in one piece as it connects (the load balancer's probe, a Prometheus, curl) is whole
  when its connection is accepted, and is answered then and there, ahead of every slower
  one, holding no place, whoever else shares its client (the test: a slowloris of
  another user where the kernel does not name users).
- Any other connection is counted against its client (agent.peers: an address across
  the network; on this host, the user owning the other end). A client holds at most
  :data:`MAX_PER_CLIENT`: one more is reset at once. At most :data:`MAX_CONNECTIONS` are
  open: past that, a new one takes the place of the oldest connection of the client
  holding the most, which is reset.

So however many connections one client opens, and however slowly it sends on them, the
backlog keeps moving, each of its connections costs the agent a few tens of
microseconds, and other clients keep their places. Each connection held has
:data:`HEAD_TIMEOUT` seconds from its accept to send a whole request head (trickling
bytes does not extend it), and :data:`SEND_TIMEOUT` more for its answer to be taken; then
it is aborted. One request per connection, then close. An ``accept`` that fails (out of
files) stops accepting for a second, silently: it is never a traceback in the agent's
log. Descriptors held: the cap, one being accepted, and agent.peers' netlink socket.

Why not a server of its own package: uvicorn's ``limit_concurrency`` answers 503 past
the limit (on ``/readyz``, the very "take this VM out of rotation" an attacker wants)
and has no bound by client; neither it nor hypercorn bounds connections by client, and
either is a new dependency of a root process with a task per connection. h11, a
dependency already, would parse a head this server only splits at its first line and
blank line; what is hard here is who is answered first and who is dropped, which is
this module's ~150 lines, tested on their own (tests/agent/test_metrics_server.py) and under a
slowloris from another user (tests/agent/test_probe_slowloris.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
import struct
from collections.abc import Callable

from setui.agent.peers import Client, client_of
from setui.system.listening import listen

__all__ = ["HEAD_TIMEOUT", "MAX_CONNECTIONS", "MAX_PER_CLIENT", "MAX_REQUEST", "SEND_TIMEOUT",
           "BoundedServer", "MetricsServer", "http_answer", "http_response", "request_of"]

MAX_CONNECTIONS = 16  # scrapers: a Prometheus or two, a person with curl
MAX_PER_CLIENT = 4  # of them from one client (agent.peers): an address, on this host a uid
HEAD_TIMEOUT = 2.0  # seconds from accept to the end of the request head
SEND_TIMEOUT = 10.0  # seconds more for the client to take the answer
MAX_REQUEST = 16 * 1024  # bytes of a request line and headers
BACKLOG = 1024  # connections the kernel keeps for accept (capped by net.core.somaxconn)
ACCEPT_BATCH = 64  # connections accepted in one wake of the loop
ACCEPT_RETRY = 1.0  # seconds before accepting again after the system refused one
_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close with a reset
_OUT_OF_RESOURCES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed",
            503: "Service Unavailable"}
TEXT = "text/plain; charset=utf-8"

# The exposition in the format an Accept header asks for, and its content type.
Exposition = Callable[[str], tuple[bytes, str]]
# A whole HTTP response to a request's head.
Respond = Callable[[bytes], bytes]


def request_of(head: bytes) -> tuple[str, str, list[str]]:
    """A request head (its lines, without the blank line that ends it): its method, its
    path without a query, and its header lines."""
    lines = head.decode("latin-1").split("\r\n")
    method, _, rest = lines[0].partition(" ")
    return method, rest.partition(" ")[0].partition("?")[0], lines[1:]


def http_response(status: int, body: bytes, *, method: str = "GET",
                  content_type: str = TEXT) -> bytes:
    """One whole response, then the connection closes (a HEAD gets no body)."""
    return (f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode("latin-1")
            + (body if method != "HEAD" else b""))


def http_answer(head: bytes, exposition: Exposition) -> bytes:
    """The whole HTTP response to a request's head: the metrics for ``GET /metrics`` (or
    ``/``), a short refusal otherwise."""
    method, path, headers = request_of(head)
    if method not in ("GET", "HEAD"):
        status = 405
    elif path not in ("/metrics", "/"):
        status = 404
    else:
        accept = next((value.strip() for name, _, value in
                       (line.partition(":") for line in headers)
                       if name.strip().lower() == "accept"), "")
        body, content_type = exposition(accept)
        return http_response(200, body, method=method, content_type=content_type)
    return http_response(status, f"{_REASONS[status]}: metrics are at /metrics\n".encode(),
                         method=method)


class _Scrape(asyncio.Protocol):
    """One connection: a bounded head within a bounded time, one answer, close.

    A protocol rather than asyncio's streams: no task, reader or writer per scrape, only
    the callbacks the loop makes anyway. Anything but a whole head in time (too long, too
    slow, closed first) is closed without a word."""

    def __init__(self, server: BoundedServer, client: Client, rest: bytes | None = None
                 ) -> None:
        self.server = server
        self.client = client
        self.head: bytes | None = b"" if rest is None else None  # None once answered
        self.rest = rest  # what is left to send of an answer begun at its accept
        self.transport: asyncio.Transport | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.evicted = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if self.evicted:  # dropped for a newer one between its accept and now
            self.evict()
            return
        if self.rest is not None:
            transport.write(self.rest)
            self._close()
            return
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
            self.transport.write(self.server.respond(head[:end]))
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

    def evict(self) -> None:
        """Dropped for a newer connection: reset (no TIME_WAIT left behind), now."""
        self.evicted = True
        if self.timer is not None:
            self.timer.cancel()
        if self.transport is not None:
            sock = self.transport.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
            self.transport.abort()


def _reset(conn: socket.socket) -> None:
    """Close a connection just accepted with a reset, without a word."""
    with contextlib.suppress(OSError):
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
    conn.close()


class BoundedServer:
    """Answers requests on one address from the caller's event loop, each with what
    ``respond(head)`` gives."""

    def __init__(self, respond: Respond, *, max_connections: int = MAX_CONNECTIONS,
                 max_per_client: int = MAX_PER_CLIENT, head_timeout: float = HEAD_TIMEOUT,
                 send_timeout: float = SEND_TIMEOUT,
                 client_of: Callable[[socket.socket], Client] = client_of) -> None:
        self.respond = respond
        self.head_timeout = head_timeout
        self.send_timeout = send_timeout
        self.max_connections = max_connections
        self.max_per_client = max_per_client
        self.client_of = client_of
        # Connections accepted and not yet lost, oldest first; and how many each client has.
        self._open: dict[_Scrape, None] = {}
        self._held: dict[Client, int] = {}
        self.at_once = 0  # requests whole at their accept, answered then
        self.refused = 0  # connections reset at their accept: their client had its share
        self.evicted = 0  # connections reset to make room for a newer one
        self._sock: socket.socket | None = None
        self._retry: asyncio.TimerHandle | None = None
        self._connecting: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int) -> tuple[str, int]:
        """Listen on ``host:port`` (port 0: a free one); the address it listens on."""
        sock = listen(host, port, BACKLOG)
        if hasattr(socket, "TCP_DEFER_ACCEPT"):  # Linux: accepted once data has come
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_DEFER_ACCEPT,
                                max(1, round(self.head_timeout)))
        self._sock = sock
        asyncio.get_running_loop().add_reader(sock.fileno(), self._accept)
        bound = sock.getsockname()
        return str(bound[0]), int(bound[1])

    @property
    def open(self) -> int:
        return len(self._open)

    def release(self, scrape: _Scrape) -> None:
        """A connection is gone: its slot is free (once, however often it is said)."""
        if self._open.pop(scrape, False) is None:
            left = self._held.get(scrape.client, 0) - 1
            if left > 0:
                self._held[scrape.client] = left
            else:
                self._held.pop(scrape.client, None)

    def _victim(self, client: Client) -> _Scrape | None:
        """The connection to drop for a new one of ``client``: its own oldest if it has
        its share already, else, when the server is full, the oldest connection of the
        client that holds the most; None when there is room."""
        if self._held.get(client, 0) >= self.max_per_client:
            most = client
        elif self.open >= self.max_connections:
            top = max(self._held.values(), default=0)
            most = next((s.client for s in self._open if self._held[s.client] == top), client)
        else:
            return None
        return next((s for s in self._open if s.client == most), None)

    def _accept(self) -> None:
        """Every connection waiting (up to ACCEPT_BATCH), each answered at once or given
        its place."""
        sock = self._sock
        if sock is None:
            return
        loop = asyncio.get_running_loop()
        for _ in range(ACCEPT_BATCH):
            try:
                conn, _ = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of files, or a connection reset before accept
                if exc.errno in _OUT_OF_RESOURCES:
                    loop.remove_reader(sock.fileno())
                    self._retry = loop.call_later(ACCEPT_RETRY, self._resume)
                return
            conn.setblocking(False)
            rest = self._at_once(conn)
            if rest == b"":  # answered whole: closed, never held
                conn.close()
                continue
            client = self.client_of(conn)
            if rest is None and self._held.get(client, 0) >= self.max_per_client:
                self.refused += 1  # not even a whole request yet, and its share taken
                _reset(conn)
                continue
            victim = self._victim(client)
            if victim is not None:
                self.evicted += 1
                self.release(victim)
                victim.evict()
            self._take(loop, conn, client, rest)

    def _at_once(self, conn: socket.socket) -> bytes | None:
        """A request already whole at its accept (a well-behaved client's, as a rule) is
        answered then and there, ahead of every slower one: what is left to send of the
        answer (empty: all of it sent, or the client gone); None when no whole head
        has come yet."""
        try:
            data = conn.recv(MAX_REQUEST + 4, socket.MSG_PEEK)
        except OSError:
            return None
        end = data.find(b"\r\n\r\n")
        if not 0 <= end <= MAX_REQUEST:
            return None
        self.at_once += 1
        try:
            conn.recv(len(data))  # taken: unread data at close would be a reset
        except OSError:
            return b""
        try:
            answer = self.respond(data[:end])
        except Exception:
            conn.close()  # and the loop's handler says why, as for any callback
            raise
        try:
            return answer[conn.send(answer):]
        except BlockingIOError:
            return answer
        except OSError:
            return b""

    def _resume(self) -> None:
        self._retry = None
        if self._sock is not None:
            asyncio.get_running_loop().add_reader(self._sock.fileno(), self._accept)

    def _take(self, loop: asyncio.AbstractEventLoop, conn: socket.socket,
              client: Client, rest: bytes | None) -> None:
        scrape = _Scrape(self, client, rest)
        self._open[scrape] = None
        self._held[client] = self._held.get(client, 0) + 1
        task = loop.create_task(self._connect(loop, conn, scrape))
        self._connecting.add(task)  # held until done: the loop keeps only a weak reference
        task.add_done_callback(self._connecting.discard)

    async def _connect(self, loop: asyncio.AbstractEventLoop, conn: socket.socket,
                       scrape: _Scrape) -> None:
        try:
            await loop.connect_accepted_socket(lambda: scrape, conn)
        except (OSError, asyncio.CancelledError):  # cancelled: the server is closing
            conn.close()
            self.release(scrape)

    async def aclose(self) -> None:
        retry, self._retry = self._retry, None
        if retry is not None:
            retry.cancel()
        sock, self._sock = self._sock, None
        if sock is not None:
            asyncio.get_running_loop().remove_reader(sock.fileno())
            sock.close()
        for task in list(self._connecting):
            task.cancel()
        for scrape in list(self._open):
            scrape.abort()


class MetricsServer(BoundedServer):
    """Answers scrapes with what ``exposition(accept)`` gives."""

    def __init__(self, exposition: Exposition, *, max_connections: int = MAX_CONNECTIONS,
                 max_per_client: int = MAX_PER_CLIENT, head_timeout: float = HEAD_TIMEOUT,
                 send_timeout: float = SEND_TIMEOUT) -> None:
        super().__init__(lambda head: http_answer(head, exposition),
                         max_connections=max_connections, max_per_client=max_per_client,
                         head_timeout=head_timeout, send_timeout=send_timeout)
        self.exposition = exposition
