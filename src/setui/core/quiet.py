"""Quiet polls: the steady poll made on a thread of its own, the event loop woken only
for news.

The agent polls all day, and nearly every answer is the document of the answer before.
On the event loop each such poll would wake the loop twice (its timer, then the answer)
and run the transport's, the client's, the poller's and every consumer's Python to
conclude "nothing new": most of what a poll costs the agent (docs/decisions/quiet-polls.md,
bench/RESULTS.md). Here a thread
makes the same GET on the poller's grid with a blocking socket and h11 (the transport's
parser), and judges each answer with the client's own rule (:meth:`ImdsClient.repeat`).
It counts the answers that say nothing new, and hands the loop an :class:`Exchange`
only for news: another document, any other answer, any failure. The client reads that
exchange as if it had made it itself (``ImdsClient.fetch(made=...)``), so an answer has
one reading and a failure one wording, whichever thread made the request. The thread
also gives the loop a result when the loop asked for one by a time (the recorder's
touch, the consumers' own pace) or at once (``poll_now``).

The thread keeps the transport's rules of the exchange (core.wire) on a blocking socket,
the whole exchange within the client's timeout; a body larger than the client takes is
not read on (the client then says so from what arrived).
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import h11
import httpx

from setui.core.wire import (
    CHUNK,
    StreamedResponse,
    Wire,
    declared_length,
    failed,
    head_fields,
    request_head,
)

__all__ = ["Exchange", "Quiet", "QuietPolls", "Repeat"]


@dataclass(frozen=True)
class Repeat:
    """The poll to repeat, as the client describes it (:meth:`ImdsClient.repeat`)."""

    host: str
    port: int
    target: bytes  # the path and query, as sent
    headers: tuple[tuple[bytes, bytes], ...]  # Host first
    timeout: float  # the whole exchange, connecting included
    max_body: int
    # A token of the client's rate limit taken (0), or the seconds until one is there.
    token: Callable[[], float]
    # status, header fields by lowercase name, body -> the answer says nothing new
    nothing_new: Callable[[int, Mapping[str, str], bytes], bool]


@dataclass
class Exchange(httpx.AsyncByteStream):
    """One GET as the thread made it: how far it got, its answer or failure, and its body
    as a stream read already (the chunks, then how it ended if it did not end well)."""

    sent: float  # monotonic, when it began
    reused: bool  # on the kept-alive connection (else a new one was made)
    sending: bool = False  # its bytes had begun to leave
    head: h11.Response | None = None
    head_mono: float = 0.0
    fields: dict[str, str] = field(default_factory=dict)  # the head's, by lowercase name
    chunks: list[bytes] = field(default_factory=list)
    done_mono: float = 0.0
    error: BaseException | None = None  # before the head: raised by answer()
    cut: BaseException | None = None  # after the head: raised after the chunks

    def answer(self) -> StreamedResponse:
        """The answer as the lean transport would give it, or its failure raised."""
        if self.head is None:
            raise self.error or httpx.RemoteProtocolError("no answer")
        return StreamedResponse(self.head, self)

    def body(self) -> bytes:
        return b"".join(self.chunks)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk
        if self.cut is not None:
            raise self.cut

    async def aclose(self) -> None:
        pass


class Quiet(NamedTuple):
    """The quiet answers so far: how many, and the newest one's times and Date."""

    polls: int
    done_mono: float
    latency: float
    date: str | None
    head_mono: float


@dataclass
class _Job:
    repeat: Repeat
    first_at: float
    start: float
    interval: float
    deliver_by: float
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Exchange | None]
    done: bool = False


class QuietPolls:
    """The thread that polls while nothing is new. One job at a time: :meth:`run`."""

    def __init__(self, *, mono: Callable[[], float] = time.monotonic) -> None:
        self._mono = mono
        self._lock = threading.Lock()
        self._kick = _Bell()  # a job, a poll asked for now, or the end
        self._job: _Job | None = None
        self._now = False  # poll at once, and hand the answer over whatever it says
        self._next = False  # hand the next answer over whatever it says
        self._closed = False
        self._thread: threading.Thread | None = None
        self._kept: _Socket | None = None  # the kept-alive connection
        self.latest: Quiet | None = None  # replaced whole by the thread: read it any time
        self.opened = 0  # connections made so far (for tests and the curious)

    async def run(self, repeat: Repeat, *, first_at: float, start: float, interval: float,
                  deliver_by: float) -> Exchange | None:
        """Poll from ``first_at`` on the grid ``start + k * interval`` until an answer is
        news (that exchange is returned) or the first quiet answer at ``deliver_by`` or
        later (None: see :attr:`latest`). Cancelled, the thread stops polling."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Exchange | None] = loop.create_future()
        request_head(b"GET", repeat.target, repeat.headers)  # a header h11 refuses: raised here
        job = _Job(repeat, first_at, start, interval, deliver_by, loop, future)
        with self._lock:
            if self._closed:
                raise RuntimeError("quiet polls closed")
            self._now = self._next = False  # asked before this job: it was answered
            self._job = job
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="setui-quiet-polls",
                                                daemon=True)
                self._thread.start()
        self._kick.ring()
        try:
            return await future
        finally:
            with self._lock:
                job.done = True
                if self._job is job:
                    self._job = None
            self._kick.ring()

    def poll_now(self) -> None:
        """Poll at once and hand the answer over (a key's "poll now")."""
        self._now = True
        self._kick.ring()

    def deliver_next(self) -> None:
        """Hand the next answer over whatever it says, at its time on the grid."""
        self._next = True

    def close(self) -> None:
        """End the thread (a read under way is cut short) and its connection."""
        with self._lock:
            self._closed = True
            kept = self._kept
        self._kick.ring()
        if kept is not None:
            with contextlib.suppress(OSError):
                kept.sock.shutdown(socket.SHUT_RDWR)

    # -- the thread -------------------------------------------------------------------------
    def _serve(self) -> None:
        try:
            while True:
                with self._lock:
                    if self._closed:
                        return
                    job = self._job
                if job is not None and not job.done:
                    try:
                        self._poll(job)
                    except Exception as exc:  # a bug: the loop must hear, not wait forever
                        self._deliver(job, exc)
                    continue
                # Looked first, then waited: a job given meanwhile has kicked already.
                self._kick.wait(None)
        finally:
            self._drop()
            self._kick.close()

    def _poll(self, job: _Job) -> None:
        at = job.first_at
        while True:
            # A ring is a reason to look, not to poll: only the time, a poll asked for
            # now or the end of the job are.
            while not self._now:
                if self._ended(job):
                    return
                delay = at - self._mono()
                if delay <= 0:
                    break
                self._kick.wait(delay)
            if not self._token(job):
                return
            asked, self._now = self._now, False
            exchange = self.exchange(job.repeat)
            if self._ended(job):
                return
            if not self._quiet(job, exchange):
                self._deliver(job, exchange)
                return
            now = self._mono()
            if asked or self._now or self._next or now >= job.deliver_by:
                self._deliver(job, None)
                return
            # The grid's next tick still ahead: no drift, no catching up after a slow one.
            at = job.start + (int((now - job.start) / job.interval) + 1) * job.interval

    def _token(self, job: _Job) -> bool:
        """A token of the client's rate limit taken, as every request of the client's
        takes one (waiting if need be); False if the job ended meanwhile."""
        while not self._ended(job):
            wait = job.repeat.token()
            if wait <= 0:
                return True
            self._kick.wait(wait)
        return False

    def _ended(self, job: _Job) -> bool:
        """The job was given up (its caller cancelled) or the thread is to end: both are
        set by the loop's thread at any moment."""
        return job.done or self._closed

    def _quiet(self, job: _Job, exchange: Exchange) -> bool:
        """Whether the answer says nothing new (then counted in :attr:`latest`)."""
        head = exchange.head
        if head is None or exchange.cut is not None:
            return False
        fields = exchange.fields
        if not job.repeat.nothing_new(head.status_code, fields, exchange.body()):
            return False
        polls = self.latest.polls + 1 if self.latest is not None else 1
        self.latest = Quiet(polls, exchange.done_mono, exchange.done_mono - exchange.sent,
                            fields.get("date"), exchange.head_mono)
        return True

    def _deliver(self, job: _Job, exchange: Exchange | Exception | None) -> None:
        job.done = True  # this job polls no more: the next is the loop's to give

        def settle() -> None:
            if job.future.done():
                return
            if isinstance(exchange, Exception):
                job.future.set_exception(exchange)
            else:
                job.future.set_result(exchange)
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits
            job.loop.call_soon_threadsafe(settle)

    # -- one exchange -----------------------------------------------------------------------
    def exchange(self, repeat: Repeat) -> Exchange:
        """One GET on the thread's connection, blocking: the thread's step (and tests')."""
        kept = self._kept
        if kept is not None and not kept.reusable(self._mono()):
            self._drop()
            kept = None
        made = Exchange(sent=self._mono(), reused=kept is not None)
        deadline = made.sent + repeat.timeout
        try:
            if kept is None:
                kept = self._connect(repeat)
            made.sending = True
            kept.send(kept.request(b"GET", repeat.target, repeat.headers), deadline)
            made.head = head = kept.next_event(deadline, unread=True)
            made.head_mono, made.fields = self._mono(), head_fields(head.headers)
        except Exception as exc:  # what the transport raises, or a bug: the client says it
            made.error = exc
            made.done_mono = self._mono()
            self._drop()
            return made
        self._body(made, kept, deadline, repeat.max_body)
        made.done_mono = self._mono()
        if not kept.finish(made.done_mono):
            self._drop()
        return made

    @staticmethod
    def _body(made: Exchange, kept: _Socket, deadline: float, limit: int) -> None:
        """Read the body up to one byte past ``limit`` (more is the client's error to
        name, and a Content-Length past it is named from the head alone)."""
        declared = declared_length(made.fields)
        if declared is not None and declared > limit:
            return  # not read: the connection is dropped, the client says why
        size = 0
        try:
            while size <= limit:
                chunk = kept.chunk(kept.next_event(deadline))
                if chunk is None:
                    return
                made.chunks.append(chunk)
                size += len(chunk)
        except Exception as exc:
            made.cut = exc

    def _connect(self, repeat: Repeat) -> _Socket:
        try:
            sock = socket.create_connection((repeat.host, repeat.port), timeout=repeat.timeout)
        except OSError as exc:
            raise failed("connect", exc, None, repeat.host, repeat.port, repeat.timeout) \
                from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)  # each wait is a select until the exchange's deadline
        kept = _Socket(sock, self._mono)
        with self._lock:
            if self._closed:
                sock.close()
                raise httpx.ConnectError("closed")
            self._kept = kept
        self.opened += 1
        return kept

    def _drop(self) -> None:
        with self._lock:
            kept, self._kept = self._kept, None
        if kept is not None:
            kept.sock.close()


class _Socket(Wire):
    """A :class:`Wire` on a non-blocking socket, each wait one select until the deadline
    (a socket with a timeout would set its mode and poll at each call)."""

    __slots__ = ("mono", "sock")

    def __init__(self, sock: socket.socket, mono: Callable[[], float]) -> None:
        super().__init__()
        self.sock, self.mono = sock, mono

    def waiting(self) -> bool:
        try:
            return bool(select.select([self.sock], [], [], 0)[0])
        except (OSError, ValueError):
            return True

    def send(self, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        try:
            while view:
                try:
                    view = view[self.sock.send(view):]
                except BlockingIOError:  # the kernel's buffer is full: a request never fills it
                    self._ready(deadline, write=True)
        except OSError as exc:  # TimeoutError included
            raise failed("send", exc) from exc

    def next_event(self, deadline: float, *, unread: bool = False) -> Any:
        """The next HTTP event, reading as h11 needs more bytes."""
        data = None
        while (event := self.event(data, unread=unread)) is h11.NEED_DATA:
            unread = False
            while True:
                try:
                    self._ready(deadline)
                    data = self.sock.recv(CHUNK)
                    break
                except BlockingIOError:  # readable, and then not: wait again
                    continue
                except OSError as exc:  # TimeoutError included
                    raise failed("read", exc) from exc
        return event

    def _ready(self, deadline: float, *, write: bool = False) -> None:
        sock, left = self.sock, deadline - self.mono()
        if left <= 0 or not select.select([] if write else [sock], [sock] if write else [], [],
                                          left)[1 if write else 0]:
            raise TimeoutError


class _Bell:
    """A wake for the thread from any other: a socket pair (select waits on it, with a
    timeout, at the cost of one call; the same on Windows)."""

    def __init__(self) -> None:
        self._r, self._w = socket.socketpair()
        self._r.setblocking(False)
        self._w.setblocking(False)

    def ring(self) -> None:
        with contextlib.suppress(OSError):  # full (rung already) or closed (ended)
            self._w.send(b"\0")

    def wait(self, timeout: float | None) -> None:
        """Until rung (then reset) or ``timeout`` seconds passed."""
        if select.select([self._r], [], [], timeout)[0]:
            with contextlib.suppress(OSError):
                self._r.recv(4096)

    def close(self) -> None:
        self._r.close()
        self._w.close()

