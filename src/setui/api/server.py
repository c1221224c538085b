"""The agent's API server: who may connect, what each op does, what subscribers hear.

It runs on the agent's event loop beside polling and hooks, so nothing a client does may
cost them anything that is not bounded: at most :data:`MAX_CONNECTIONS` connections and
:data:`MAX_PER_UID` per uid and :data:`CONNECT_RATE` new ones a second per uid (root is
exempt from the last two), each with the bounds of
:mod:`setui.api.connection`; queries on their own thread (:mod:`setui.api.queries`),
writes through :mod:`setui.api.writes`; a state frame encoded once per change for every
subscriber, a tick every :data:`TICK_EVERY` seconds while nothing changes. A connection
that asks nothing for :data:`IDLE_AFTER` seconds and is not subscribed is closed; one that
reads nothing of what waits for it for :data:`STALLED_AFTER` seconds is dropped. Errors a
client causes are logged once a minute per kind, with a count (setui.system.logs: the
``setui.api`` logger, or ``say`` when given).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING, Any

from setui import __version__
from setui.api.codec import (
    CallerAccess,
    Hello,
    VmIdentity,
    encode_health,
    encode_hello,
    encode_plan,
    encode_state,
    encode_vm,
)
from setui.api.connection import Connection
from setui.api.peer import Authority, Peer, read_peer
from setui.api.protocol import (
    API_VERSION,
    BUSY,
    INTERNAL,
    QUERIES,
    STOPPING,
    TICK_EVERY,
    UNAVAILABLE,
    ProtocolError,
    Request,
    encode_frame,
    error_frame,
    ok_frame,
    time_text,
)
from setui.api.queries import QueryThread
from setui.api.writes import WriteOps
from setui.core.ratelimit import TokenBucket
from setui.core.textsafe import printable
from setui.system.identity import account_name
from setui.system.logs import KindLog

if TYPE_CHECKING:
    from setui.api.source import AgentSource
    from setui.core.health import ConnectionState
    from setui.core.tracker import Change
    from setui.monitor import MonitorUpdate
    from setui.store.records import AuditRecord

__all__ = ["CONNECT_BURST", "CONNECT_RATE", "IDLE_AFTER", "MAX_CONNECTIONS", "MAX_PER_UID",
           "STALLED_AFTER", "TICK_EVERY", "ApiServer", "Complaints"]

MAX_CONNECTIONS = 64
MAX_PER_UID = 8
# New connections a uid may open, a second on average and at once (root: no limit): a
# client that reconnects in a loop would otherwise get a fresh request budget each time.
CONNECT_RATE = 5.0
CONNECT_BURST = 20
IDLE_AFTER = 60.0
STALLED_AFTER = 60.0
SWEEP_EVERY = 1.0
SWEEP_SLACK = 0.1  # a sweep comes 0.9-1.1 times SWEEP_EVERY after the last (_arm_sweep)
MAX_OUTPUT = 32 * 1024 * 1024  # unread bytes across all clients before a big answer waits
MAX_CHANGES = 10_000  # changes kept for subscribers between two state frames
CURRENT_FOR = 1.0  # seconds an encoded state answers ``state`` and ``subscribe``
# Queries that read the whole log or history: a uid asks each at most this often (root:
# no limit), so a loop of them cannot keep the query thread, and the GIL, busy.
HEAVY = frozenset({"verify_audit", "recording"})
HEAVY_EVERY = 5.0


class Complaints(KindLog):
    """Problems clients cause, logged once per kind and minute with how many more there
    were (setui.system.logs): through the ``setui.api`` logger, or to ``say`` when given."""

    def __init__(self, say: Callable[[str], None] | None = None,
                 mono: Callable[[], float] = time.monotonic) -> None:
        super().__init__("setui.api", say=say, mono=mono)


class ApiServer:
    """Serves the agent's state and takes its requests (see the module doc)."""

    def __init__(self, source: AgentSource, *, authority: Authority, queries: QueryThread,
                 say: Callable[[str], None] | None = None,
                 mono: Callable[[], float] = time.monotonic) -> None:
        self.source = source
        self.authority = authority
        self.queries = queries
        self.mono = mono
        self.complaints = Complaints(say, mono)
        self.writes = WriteOps(source, lambda: self.authority, self.changed, mono)
        self.connections: set[Connection] = set()
        self._per_uid: Counter[int] = Counter()
        self._arrivals: dict[int, TokenBucket] = {}  # uid -> its new connections
        self._heavy: dict[tuple[int, str], float] = {}  # (uid, op) -> when last asked
        self._identifying = ThreadPoolExecutor(max_workers=2, thread_name_prefix="setui-api-peer")
        self._server: asyncio.AbstractServer | None = None
        self._sweep_timer: asyncio.TimerHandle | None = None  # see _arm_sweep
        self._swept_at = mono()
        self._tasks: set[asyncio.Task[None]] = set()
        # What subscribers have not heard yet, and what the next state frame says.
        self._changes: list[Change] = []
        self._previous: ConnectionState | None = None
        self._approvals: dict[str, AuditRecord] = {}
        self._held: frozenset[str] = frozenset()
        self._stale = True  # approvals and holds to be read again before the next frame
        self._flusher: asyncio.Task[None] | None = None
        self._again = False
        self._plan_key: object = None
        self._encoded: tuple[float, bytes] | None = None  # _current(), and when
        self._pushed_at = mono()
        self._vm_said = self._vm()  # this VM as the latest hello or push said it

    # -- life -----------------------------------------------------------------------------
    async def serve(self, sock: socket.socket) -> None:
        """Accept clients on a bound, listening Unix socket."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_unix_server(lambda: Connection(self, self.mono),
                                                     sock=sock)
        self._arm_sweep()
        self.changed()

    def reload(self, authority: Authority) -> None:
        """Who may approve, read again (SIGHUP): asked at every request from now on."""
        self.authority = authority

    async def aclose(self, waiting: str = "") -> None:
        """Stop accepting, tell every client (and what the agent waits for before it
        ends: ``waiting``), stop what runs (an approval in flight is interrupted: the
        approver records that it may or may not have been sent)."""
        if self._server is not None:
            self._server.close()
        if self._sweep_timer is not None:
            self._sweep_timer.cancel()
            self._sweep_timer = None
        if self._flusher is not None:
            self._flusher.cancel()
        for conn in list(self.connections):
            conn.fail(ProtocolError(UNAVAILABLE, f"{STOPPING}: {waiting}" if waiting
                                    else STOPPING), complain=False)
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.abort()
        self._identifying.shutdown(wait=False)
        await self.queries.aclose()

    # -- connections ----------------------------------------------------------------------
    def admit(self, conn: Connection) -> str | None:
        """Why the connection is turned away, or None (then it counts)."""
        assert conn.creds is not None
        uid = conn.creds.uid
        if len(self.connections) >= MAX_CONNECTIONS:
            self.complain("busy", f"a connection from uid {uid} turned away: "
                                  f"{MAX_CONNECTIONS} are open")
            return f"the agent serves {MAX_CONNECTIONS} connections already: try again later"
        if uid != 0 and self._per_uid[uid] >= MAX_PER_UID:
            self.complain("busy", f"a connection from uid {uid} turned away: it has "
                                  f"{MAX_PER_UID} open")
            return (f"uid {uid} has {MAX_PER_UID} connections to the agent open already: "
                    "close one")
        if uid != 0 and not self._arrival(uid).try_acquire():
            self.complain("busy", f"a connection from uid {uid} turned away: more than "
                                  f"{CONNECT_RATE:g} a second")
            return (f"uid {uid} opens more than {CONNECT_RATE:g} connections a second to "
                    "the agent: slow down")
        self.connections.add(conn)
        self._per_uid[uid] += 1
        self._keep_sweeping()
        return None

    def _arrival(self, uid: int) -> TokenBucket:
        """The uid's bucket of new connections: CONNECT_RATE a second, CONNECT_BURST at
        once."""
        bucket = self._arrivals.get(uid)
        if bucket is None:
            bucket = self._arrivals[uid] = TokenBucket(CONNECT_RATE, CONNECT_BURST,
                                                       mono=self.mono)
        return bucket

    def forget(self, conn: Connection) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
            assert conn.creds is not None
            self._per_uid[conn.creds.uid] -= 1
            if self._per_uid[conn.creds.uid] <= 0:
                del self._per_uid[conn.creds.uid]

    def identify(self, conn: Connection) -> None:
        """Read the peer on a thread; the hello goes out when that is done."""
        creds = conn.creds
        assert creds is not None
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._identifying, read_peer, creds)

        def done(task: asyncio.Future[Peer]) -> None:
            try:
                peer = task.result()
            except Exception:  # cannot fail in words; the kernel's uid is still known
                peer = Peer(creds, account_name(creds.uid), None, None, None)
            conn.identified(peer, self._hello(peer))

        future.add_done_callback(done)

    def _hello(self, peer: Peer) -> dict[str, Any]:
        why_not = self.authority.why_not(peer.credentials)
        return encode_hello(Hello(API_VERSION, __version__, self.source.info,
                                  CallerAccess(peer.uid, peer.user, why_not is None, why_not)
                                  ).with_vm(self._vm()))

    def _vm(self) -> VmIdentity:
        """This VM as the agent knows it now (its name and vmId may come after its start)."""
        return VmIdentity(self.source.vm_name, self.source.vm_id)

    def complain(self, kind: str, message: str) -> None:
        self.complaints.note(kind, f"setui agent: api: {printable(message, 300)}")
        self._keep_sweeping()

    # -- requests -------------------------------------------------------------------------
    def dispatch(self, conn: Connection, request: Request) -> None:
        try:
            self._dispatch(conn, request)
        except Exception as exc:  # a bug must cost this request, not the connection
            self._internal(conn, request, exc)

    def _dispatch(self, conn: Connection, request: Request) -> None:
        op = request.op
        if op == "bye":
            conn.answer(request.id, {})
            conn.close()
        elif op in ("subscribe", "state"):
            conn.subscribed = conn.subscribed or op == "subscribe"
            conn.send(ok_frame(request.id, self._current()))
        elif op in QUERIES:
            if conn.querying:
                conn.answer_error(request.id, BUSY, "one query at a time per connection: "
                                                    "wait for the answer")
                return
            try:
                query = self.queries.prepare(op, request.args)
                self._heavy_allowed(conn, op)
            except ProtocolError as exc:
                conn.answer_error(request.id, exc.code, exc.message)
                return
            conn.querying = True
            self._spawn(self._query(conn, request, query))
        else:
            if conn.writing:
                conn.answer_error(request.id, BUSY, "one approval, dismissal, hold or "
                                                    "release at a time per connection")
                return
            conn.writing = True
            self._spawn(self._write(conn, request))

    def _heavy_allowed(self, conn: Connection, op: str) -> None:
        """Busy when this uid asked the same heavy query less than HEAVY_EVERY ago."""
        assert conn.creds is not None
        uid = conn.creds.uid
        if op not in HEAVY or uid == 0:
            return
        now = self.mono()
        last = self._heavy.get((uid, op))
        if last is not None and now - last < HEAVY_EVERY:
            raise ProtocolError(BUSY, f"{op} reads the whole record: at most once every "
                                      f"{HEAVY_EVERY:g} s")
        self._heavy[(uid, op)] = now

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _query(self, conn: Connection, request: Request, query: Any) -> None:
        try:
            frame = await self.queries.run(request.op, request.id, query)
            if len(frame) > 64 * 1024 and self._unread() + len(frame) > MAX_OUTPUT:
                frame = error_frame(BUSY, "the agent has much unread output waiting for "
                                          "its clients: ask again shortly", request.id)
            conn.send(frame)
        except Exception as exc:
            self._internal(conn, request, exc)
        finally:
            conn.querying = False

    async def _write(self, conn: Connection, request: Request) -> None:
        try:
            body = await getattr(self.writes, request.op)(conn, request.id, request.args)
            conn.answer(request.id, body)
        except ProtocolError as exc:
            conn.answer_error(request.id, exc.code, exc.message)
        except Exception as exc:
            self._internal(conn, request, exc)
        finally:
            conn.writing = False

    def _internal(self, conn: Connection, request: Request, exc: Exception) -> None:
        self.complain("internal", f"{request.op} from {conn!r} failed: "
                                  f"{type(exc).__name__}: {exc}")
        conn.answer_error(request.id, INTERNAL, f"the agent failed to answer: "
                                                f"{type(exc).__name__}")

    def _unread(self) -> int:
        return sum(c.transport.get_write_buffer_size() for c in self.connections
                   if c.transport is not None)

    # -- what subscribers hear ------------------------------------------------------------
    def _current(self) -> bytes:
        """The state and plan now, encoded at most once a second (and again as soon as
        anything in it changed): a client asking in a loop costs no encoding."""
        now = self.mono()
        if self._encoded is None or now - self._encoded[0] >= CURRENT_FOR:
            state = self.source.state(approvals=self._approvals)
            body = {"state": encode_state(state, now),
                    "plan": encode_plan(self.source.plan(self._held)),
                    "vm": encode_vm(self._vm())}
            self._encoded = (now, encode_frame(body)[:-1])
        return self._encoded[1]

    def publish(self, update: MonitorUpdate) -> None:
        """One poll's update, from the agent's loop: subscribers hear of it when it
        changed something (the document or the connection's state). The sweep due about
        now is done here too (see _arm_sweep)."""
        if self._sweep_timer is not None \
                and self.mono() - self._swept_at >= SWEEP_EVERY * (1 - SWEEP_SLACK):
            self._sweep_now()
        result = update.result
        if not result.changes and update.previous_state is None:
            return
        self._encoded = None
        if any(c.subscribed for c in self.connections):
            self._changes.extend(result.changes)
            del self._changes[:-MAX_CHANGES]
            if self._previous is None:
                self._previous = update.previous_state
        self._stale = self._stale or bool(result.changes)
        self._schedule()

    def changed(self) -> None:
        """Something the state frame carries changed outside a poll (an approval, a hold,
        the plan): read it again and tell subscribers."""
        self._encoded = None
        self._stale = True
        self._schedule()

    def _schedule(self) -> None:
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.ensure_future(self._flush())
        else:
            self._again = True

    async def _flush(self) -> None:
        """State frames, one at a time, each encoded once for every subscriber."""
        try:
            await self._flush_all()
        except Exception as exc:  # said; the next change schedules a new flush
            self.complain("internal", f"a state frame failed: {type(exc).__name__}: {exc}")

    async def _flush_all(self) -> None:
        while True:
            self._again = False
            if self._stale:
                self._stale = False
                await self._refresh()
                self._encoded = None
            changes, self._changes = tuple(self._changes), []
            previous, self._previous = self._previous, None
            self._broadcast(partial(self._state_push, changes, previous))
            self._check_plan()
            if not self._again:
                return

    def _state_push(self, changes: tuple[Change, ...], previous: ConnectionState | None
                    ) -> dict[str, Any]:
        state = self.source.state(changes=changes, previous_state=previous,
                                  approvals=self._approvals)
        return {"push": "state", "state": encode_state(state, self.mono())}

    async def _refresh(self) -> None:
        """The approvals and holds of the current events, read on the agent's store
        thread (they change through this API, the agent, or another setui)."""
        source = self.source
        store, log = source.store, source.agent.log
        if store is None:
            return
        ids = source.event_ids()

        def read() -> tuple[dict[str, AuditRecord], set[str]]:
            return store.audit_log.approvals(ids), (log.held(ids) if log is not None else set())

        try:
            approvals, held = await source.store_call(read)
        except Exception as exc:
            self.complain("store", f"cannot read approvals and holds: {exc}")
            return
        self._approvals, self._held = approvals, frozenset(held)

    def _broadcast(self, body: Callable[[], dict[str, Any]]) -> None:
        """A push to every subscriber; ``body`` is made only when there is one (the agent
        with nobody attached encodes no state, plan or tick for nobody)."""
        subscribers = [c for c in self.connections if c.subscribed and not c.closed]
        if subscribers:
            frame = encode_frame(body())
            for conn in subscribers:
                conn.send(frame)
        self._pushed_at = self.mono()

    def _check_plan(self) -> bool:
        """Push the plan when it changed since the last push; True if it did."""
        plan = self.source.plan(self._held)
        key = (tuple((s.event_id, s.step, s.state, s.detail, s.updated) for s in plan.steps),
               plan.held)
        if key == self._plan_key:
            return False
        self._plan_key = key
        self._broadcast(lambda: {"push": "plan", "plan": encode_plan(plan)})
        return True

    # -- every second ---------------------------------------------------------------------
    def _arm_sweep(self) -> None:
        """The next sweep: at the poll that comes about SWEEP_EVERY after this one
        (publish), else a little after SWEEP_EVERY by this timer. Polled once a second,
        the sweep rides the poll's wake and the timer never fires, so the idle agent
        wakes once a second, not twice. Run from the timer's callback or from publish
        itself: no task and no future to wake, so no turn of the loop of its own
        either."""
        if self._sweep_timer is not None:
            self._sweep_timer.cancel()
        self._swept_at = self.mono()
        self._sweep_timer = asyncio.get_running_loop().call_later(
            SWEEP_EVERY * (1 + SWEEP_SLACK), self._sweep_now)

    def _sweep_now(self) -> None:
        if self._sweep_timer is not None:  # due at a poll: the timer's turn is this one
            self._sweep_timer.cancel()
            self._sweep_timer = None
        try:
            self._sweep()
        except Exception as exc:  # a bug here must not end the sweeps
            self.complain("internal", f"sweep failed: {type(exc).__name__}: {exc}")
        finally:  # a sweep that fails is still followed by the next
            if self._sweep_wanted():
                self._arm_sweep()

    def _sweep_wanted(self) -> bool:
        """Whether anything is left for a sweep: a connection to watch, a complaint to
        count, something to forget. With none, the agent's loop sleeps between the
        results of its polls (quiet polls come seconds apart): a connection or a
        complaint arms the sweep again (:meth:`_keep_sweeping`)."""
        return bool(self.connections or self._arrivals or self._heavy
                    or self.writes.refusals.owed() or self.complaints.owed())

    def _keep_sweeping(self) -> None:
        if self._sweep_timer is None and self._server is not None:
            self._arm_sweep()

    def _check_vm(self) -> None:
        """Push this VM's name and vmId when the agent learned them since the last push
        (or since it started): a client greeted before would show "unknown" until it
        reconnected."""
        vm = self._vm()
        if vm != self._vm_said:
            self._vm_said = vm
            self._encoded = None
            self._broadcast(lambda: {"push": "vm", "vm": encode_vm(vm)})

    def _sweep(self) -> None:
        now = self.mono()
        self._check_vm()
        if self._check_plan():
            self.changed()  # an approval by the agent shows in the approvals too
        elif now - self._pushed_at >= TICK_EVERY:
            source = self.source
            self._broadcast(lambda: {"push": "tick", "now": time_text(source.monitor.now()),
                                     "health": encode_health(source.monitor.health(), now)})
        for conn in list(self.connections):
            if conn.closed:
                continue
            if conn.stalled_for(now) >= STALLED_AFTER:
                conn.drop(f"it read nothing of its output for {STALLED_AFTER:g} s")
            elif not (conn.subscribed or conn.querying or conn.writing) \
                    and now - conn.last_request >= IDLE_AFTER:
                conn.fail(ProtocolError(UNAVAILABLE, f"no request for {IDLE_AFTER:g} s: "
                                                     "closed (subscribe to stay)"),
                          complain=False)
        self.writes.refusals.forget_idle()
        for uid in [u for u, bucket in self._arrivals.items() if bucket.tokens >= CONNECT_BURST]:
            del self._arrivals[uid]  # full again: forgotten, so the table stays small
        for key in [k for k, at in self._heavy.items() if now - at >= HEAVY_EVERY]:
            del self._heavy[key]
        self.complaints.flush()

