"""The emulator of the Scheduled Events endpoint: a real HTTP server on loopback.

It runs on a daemon thread with its own asyncio loop, so a test or ``setui demo`` can
start it, talk to it over the wire like to the real ``169.254.169.254``, and stop it
(connections refused afterwards) or bring it back on the same port::

    with Emulator(load_scenario("live-migration"), speed=60) as emulator:
        httpx.get(emulator.url + "/metadata/scheduledevents?api-version=2020-07-01",
                  headers={"Metadata": "true"})
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

from setui.emulator.clock import ManualClock
from setui.emulator.faults import Faults
from setui.emulator.scenario import Scenario
from setui.emulator.service import EVENTS_PATH, NAME_PATH, Service
from setui.emulator.timeline import ScenarioPlayer
from setui.emulator.wire import (
    HEAD_TIMEOUT,
    HttpError,
    RecordedRequest,
    Reply,
    read_request,
    write_reply,
)
from setui.system.listening import listen

__all__ = ["EVENTS_PATH", "NAME_PATH", "Emulator", "ManualClock", "RecordedRequest"]

_STOP_TIMEOUT = 10.0
# ``requests`` keeps every request up to this many, and up to this many bytes (bodies and
# headers: unbounded, 10,000 requests with 64 KB bodies hold 900 MB), then forgets the
# oldest.
MAX_RECORDED = 100_000
MAX_RECORDED_BYTES = 32 * 1024 * 1024


class Emulator:
    """Serves ``scenario`` like IMDS does. ``clock`` gives POSIX seconds (default
    ``time.time``); pass a :class:`ManualClock` for reproducible documents.

    Scenario second 0 is the clock's first whole second at or after construction
    (:attr:`epoch`), and scenario second ``s`` happens at ``epoch + s / speed``; so at
    speed 1 every NotBefore is exactly when its event starts. ``log`` receives one line
    per request answered.
    """

    def __init__(self, scenario: Scenario, *, host: str = "127.0.0.1", port: int = 0,
                 speed: float = 1.0, vm_name: str | None = None,
                 faults: Faults | None = None, etag: bool = False,
                 clock: Callable[[], float] | None = None,
                 log: Callable[[str], None] | None = None,
                 head_timeout: float = HEAD_TIMEOUT,
                 max_recorded_bytes: int = MAX_RECORDED_BYTES,
                 identity: dict[str, str] | None = None) -> None:
        self.scenario = scenario
        self.head_timeout = head_timeout
        self.max_recorded_bytes = max_recorded_bytes
        self._recorded_bytes = 0
        self.host = host
        self.port = port
        self.speed = speed
        self.clock: Callable[[], float] = clock or time.time
        self.requests: list[RecordedRequest] = []
        self._service = Service(scenario, clock=self.clock, speed=speed, vm_name=vm_name,
                                faults=faults, etag=etag, log=log, identity=identity)
        self._lifecycle = threading.Lock()
        self._record_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._connections: set[asyncio.Task[Any]] = set()

    # -- public ---------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """Base URL without a trailing slash, e.g. ``http://127.0.0.1:41234``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def vm_name(self) -> str:
        return self._service.vm_name

    @property
    def identity(self) -> dict[str, str]:
        """The compute metadata served besides the name (vmScaleSetName, zone...)."""
        return dict(self._service.identity)

    @property
    def epoch(self) -> float:
        """The clock time (POSIX seconds) of scenario second 0."""
        return self._service.epoch

    @property
    def running(self) -> bool:
        return self._thread is not None

    def scenario_time(self) -> float:
        return self._service.scenario_time()

    def real_time(self, scenario_seconds: float) -> float:
        """The clock time at which scenario second ``scenario_seconds`` happens."""
        return self._service.real_time(scenario_seconds)

    def document(self, api_version: str = "2020-07-01") -> dict[str, Any]:
        """The document a GET would get now (faults aside, skew included)."""
        return self._service.document(api_version)

    def pin_document(self, document: dict[str, Any] | None) -> None:
        """Serve this document instead of the scenario's (None: the scenario again)."""
        self._service.pin_document(document)

    @property
    def timeline(self) -> ScenarioPlayer:
        """The scenario's timeline: its change points, for tests and tools."""
        return self._service.timeline

    def played_out(self) -> bool:
        """True once a non-repeating scenario has nothing left to happen."""
        return self._service.timeline.played_out(self._service.scenario_time())

    def set_faults(self, faults: Faults | None) -> None:
        self._service.set_faults(faults)

    @property
    def faults(self) -> Faults:
        return self._service.faults

    def start(self) -> str:
        """Listen and serve on a daemon thread; returns :attr:`url`."""
        with self._lifecycle:
            if self._thread is not None:
                return self.url
            ready = threading.Event()
            failure: list[BaseException] = []
            thread = threading.Thread(target=self._run, args=(ready, failure), daemon=True,
                                      name=f"setui-emulator-{self.scenario.name}")
            thread.start()
            ready.wait()
            if failure:
                thread.join()
                raise failure[0]
            self._thread = thread
            return self.url

    def stop(self) -> None:
        """Stop listening and drop every connection, even trickling or hanging ones."""
        with self._lifecycle:
            thread, loop, stop_event = self._thread, self._loop, self._stop_event
            if thread is None or loop is None or stop_event is None:
                return
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(stop_event.set)
            thread.join(_STOP_TIMEOUT)
            self._thread = self._loop = self._stop_event = None

    def restart(self) -> None:
        """Stop if running, then listen again on the same port."""
        self.stop()
        self.start()

    def __enter__(self) -> Emulator:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = self.url if self.running else "stopped"
        return f"<Emulator {self.scenario.name!r} speed={self.speed:g} {state}>"

    # -- the loop thread ---------------------------------------------------------------------
    # The accept loop is our own rather than asyncio.start_server: a connection accepted
    # just as Server.close() runs is dropped by asyncio without closing its socket, which
    # leaves a client waiting forever. Here every accepted socket is ours to close.
    def _run(self, ready: threading.Event, failure: list[BaseException]) -> None:
        try:
            listener = listen(self.host, self.port)
        except OSError as exc:
            failure.append(OSError(exc.errno, f"emulator cannot listen on "
                                              f"{self.host}:{self.port}: {exc.strerror}"))
            ready.set()
            return
        self.port = listener.getsockname()[1]
        # A selector loop on every platform: the accept callback needs add_reader, which
        # Windows' default proactor loop lacks.
        loop = asyncio.SelectorEventLoop()
        try:
            self._loop = loop
            self._stop_event = asyncio.Event()
            ready.set()
            loop.run_until_complete(self._serve_until_stopped(listener))
        finally:
            listener.close()
            loop.close()

    async def _serve_until_stopped(self, listener: socket.socket) -> None:
        assert self._stop_event is not None
        loop = asyncio.get_running_loop()
        sockets: set[socket.socket] = set()

        def accept_all() -> None:
            # Accepting synchronously in the reader callback means no accepted socket
            # can be lost between the kernel and a task, whatever stop() interrupts.
            while True:
                try:
                    conn, _ = listener.accept()
                except (BlockingIOError, InterruptedError):
                    return
                except OSError:  # e.g. out of file descriptors: pause, do not spin
                    loop.remove_reader(listener.fileno())
                    loop.call_later(0.1, loop.add_reader, listener.fileno(), accept_all)
                    return
                conn.setblocking(False)
                sockets.add(conn)
                task = loop.create_task(self._connection(conn, sockets))
                self._connections.add(task)
                task.add_done_callback(self._connections.discard)

        loop.add_reader(listener.fileno(), accept_all)
        try:
            await self._stop_event.wait()
        finally:
            loop.remove_reader(listener.fileno())
            listener.close()  # from here on, connection refused
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            for conn in sockets:  # tasks cancelled before they ever ran
                conn.close()

    async def _connection(self, conn: socket.socket, sockets: set[socket.socket]) -> None:
        try:
            reader, writer = await asyncio.open_connection(sock=conn)
        except OSError:
            sockets.discard(conn)
            conn.close()
            return
        try:
            await self._converse(reader, writer)
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception as exc:  # a bug here must not go unseen, nor stop the server
            self._service.log(f"internal error, connection dropped: {exc!r}")
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1)
            sockets.discard(conn)
            conn.close()

    def _record(self, request: RecordedRequest) -> None:
        """Keep the request for :attr:`requests`, within the count and the bytes allowed
        (a demo left running for days, a client sending large bodies)."""
        with self._record_lock:
            self.requests.append(request)
            self._recorded_bytes += _size(request)
            if len(self.requests) > MAX_RECORDED \
                    or self._recorded_bytes > self.max_recorded_bytes:
                drop, freed = 0, 0
                while drop < len(self.requests) - 1 and (
                        len(self.requests) - drop > MAX_RECORDED * 9 // 10
                        or self._recorded_bytes - freed > self.max_recorded_bytes * 3 // 4):
                    freed += _size(self.requests[drop])
                    drop += 1
                del self.requests[:drop]
                self._recorded_bytes -= freed

    async def _converse(self, reader: asyncio.StreamReader,
                        writer: asyncio.StreamWriter) -> None:
        """Answer requests on one connection until either side closes it."""
        answered_at: float | None = None  # time.monotonic() at the end of the last answer
        while True:
            faults = self._service.faults
            idle_close = faults.idle_close if answered_at is not None else 0.0
            try:
                reading = read_request(reader, self.clock, head_timeout=self.head_timeout)
                request = await (asyncio.wait_for(reading, idle_close) if idle_close > 0
                                 else reading)
            except HttpError as exc:
                await write_reply(writer, _plain_error(exc))
                return
            except asyncio.TimeoutError:
                self._service.log(f"closed a connection idle for {idle_close:g} s (fault)")
                return
            if request is None:
                return
            self._record(request)
            if answered_at is not None and faults.idle_drop > 0 \
                    and time.monotonic() - answered_at >= faults.idle_drop:
                self._service.log(f"dropped {request.method} {request.path!r} unanswered on a "
                                  f"connection idle for {faults.idle_drop:g} s (fault)")
                return
            delay = self._service.delay_for(request)
            if delay > 0:
                await asyncio.sleep(delay)
            try:
                reply = self._service.reply(request)
            except Exception as exc:  # a bug: say so to the client and the log, not silence
                self._service.log(f"internal error answering {request.method} "
                                  f"{request.path!r}: {exc!r}")
                await write_reply(writer, _plain_error(HttpError(
                    500, f"internal error in the emulator: {type(exc).__name__}")))
                return
            if reply.hang:
                await asyncio.Event().wait()  # until stop() cancels this task
            reply.close = reply.close or not request.keep_alive
            await write_reply(writer, reply)
            if reply.close or reply.truncate:
                return
            answered_at = time.monotonic()


def _plain_error(exc: HttpError) -> Reply:
    return Reply(exc.status, [("Content-Type", "text/plain; charset=utf-8")],
                 f"{exc}\n".encode(), close=True)


def _size(request: RecordedRequest) -> int:
    """About what a recorded request holds in memory, in bytes."""
    return 200 + len(request.body) + len(request.path) + sum(
        len(k) + len(v) for k, v in request.headers.items()) + sum(
        len(k) + len(v) for k, v in request.query_pairs)
