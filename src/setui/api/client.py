"""What front ends use to talk to the agent: connect, ask, approve, subscribe.

The client trusts the agent no more than it trusts IMDS: every frame is bounded
(:data:`~setui.api.protocol.MAX_ANSWER`) and read through the codec, which refuses what
is not what it should be, so a broken or impostor agent costs a front end an error in
words, never a crash. Before anything is sent, the kernel says who serves the socket
(``SO_PEERCRED``): only root or this very user is taken for the agent, so a socket
someone else put in the way is refused. Nothing here reaches the store's write paths,
the approver or the agent (an import contract says so).

:class:`AgentClient` is synchronous, for commands and threads: one request at a time,
each with a deadline. :class:`Subscription` is the async stream of pushes a live view
consumes.
"""

from __future__ import annotations

import asyncio
import contextlib
import grp
import itertools
import os
import socket
import stat
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from setui.api.codec import (
    AgentState,
    Hello,
    Plan,
    VmIdentity,
    decode_audit,
    decode_claim,
    decode_health,
    decode_hello,
    decode_holes,
    decode_impact,
    decode_incarnation,
    decode_outcome,
    decode_plan,
    decode_progress,
    decode_recording,
    decode_state,
    decode_story,
    decode_verify,
    decode_vm,
    encode_confirmed,
)
from setui.api.peer import credentials
from setui.api.protocol import (
    BAD_REQUEST,
    BUSY,
    ERROR_CODES,
    FORBIDDEN,
    INTERNAL,
    MAX_ANSWER,
    QUERIES,
    TOO_LARGE,
    UNAVAILABLE,
    Fields,
    Frames,
    ProtocolError,
    ServerFrame,
    decode_frame,
    encode_frame,
    parse_server_frame,
    time_text,
)
from setui.approval.outcome import ApprovalOutcome, Progress
from setui.approval.snapshot import Confirmed
from setui.core.health import Health
from setui.core.holes import Hole
from setui.core.impact import Impact
from setui.core.textsafe import printable
from setui.store.errors import RecordError
from setui.store.reading import RecordingParts
from setui.store.records import (
    AuditRecord,
    Claim,
    IncarnationRecord,
    StoryEntry,
    VerifyResult,
)

__all__ = ["CONNECT_TIMEOUT", "DEFAULT_SOCKET", "AgentClient", "ApiError", "ConnectionLost",
           "HoldAnswer", "NoAgent", "NotASocket", "PlanPush", "Push", "StatePush",
           "Subscription", "Tick", "VmPush"]

DEFAULT_SOCKET = Path("/run/setui/api.sock")
CONNECT_TIMEOUT = 1.0  # connect and hello: an agent that takes longer is not answering
QUERY_TIMEOUT = 60.0  # seconds without a frame before a query is given up
# An approval retries within 70 s (core.client.APPROVAL_DEADLINE) and reports each try.
APPROVE_TIMEOUT = 120.0
SILENCE = 30.0  # a subscription hears a tick every 5 s; this long without one: gone
_READ = 256 * 1024
# Asked at a time of a long record; a page too large for a frame is asked again in halves.
HISTORY_PAGE = 200  # incarnations (a document is kept whole up to 256 KiB)
AUDIT_PAGE = 1000  # audit records
MAX_IDS = 1000  # EventIds asked about in one request (the agent's bound)
# Seconds to wait while the agent says a whole-record query (verify_audit, recording) was
# asked too recently by this user: it answers each user once every 5 s.
HEAVY_PATIENCE = 12.0

_T = TypeVar("_T")


class ApiError(RecordError):
    """The agent refused, failed or could not be reached; ``message`` is for people."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class NoAgent(ApiError):
    """Nothing answers at the socket: a front end runs standalone."""

    def __init__(self, message: str) -> None:
        super().__init__(UNAVAILABLE, message)


class NotASocket(NoAgent):
    """What is at the socket's path is a file, a directory or anything but a socket."""


class ConnectionLost(ApiError):
    """The connection failed, closed or went silent after a request may have left: what
    the agent made of it is not known (an approval's outcome is then unknown)."""

    def __init__(self, message: str) -> None:
        super().__init__(UNAVAILABLE, message)


class Unreadable(ConnectionLost):
    """What the agent sent could not be read: the connection cannot be trusted after it,
    and what the agent did with a request already sent is not known (an approval's
    outcome is then unknown, never "refused")."""


def _group_name(path: Path) -> str:
    """The group that may reach the socket: its own, or its directory's when that is
    what keeps this user out."""
    for place in (path, path.parent):
        try:
            return grp.getgrgid(os.stat(place).st_gid).gr_name
        except OSError:
            continue
        except KeyError:
            break
    return "setui"


def _connect(path: Path, timeout: float) -> socket.socket:
    """A connected socket to the agent, whose server the kernel vouches for."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    shown = printable(str(path), 200)
    try:
        sock.connect(str(path))
        server = credentials(sock)
    except (FileNotFoundError, NotADirectoryError):
        sock.close()
        raise NoAgent(f"no agent at {shown}") from None
    except OSError as exc:
        sock.close()
        kind = _not_a_socket(path)
        if kind is not None:  # what connect() says of a file or a directory misleads
            raise NotASocket(f"no agent at {shown}: it is {kind}, not a socket") from None
        _unreachable(exc, shown, path, timeout)
    if server.uid not in (0, os.getuid()):
        sock.close()
        raise ApiError(FORBIDDEN, f"the socket at {shown} is served by uid {server.uid}, "
                                  "neither root nor you: it is not setui's agent")
    return sock


def _not_a_socket(path: Path) -> str | None:
    """What is at ``path`` when it is there and is not a socket (followed, as connect()
    follows it); None when it is one, or cannot be looked at."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISSOCK(mode):
        return None
    return "a directory" if stat.S_ISDIR(mode) else "a regular file" if stat.S_ISREG(mode) \
        else "something else"


def _unreachable(exc: OSError, shown: str, path: Path, timeout: float) -> NoReturn:
    """Why a socket that is there cannot be reached, in words."""
    if isinstance(exc, ConnectionRefusedError):
        raise NoAgent(f"no agent at {shown} (a socket is left there; nothing answers)") from None
    if isinstance(exc, PermissionError):
        raise ApiError(FORBIDDEN, f"cannot reach the agent at {shown}: you are not in group "
                                  f"{printable(_group_name(path), 40)}") from None
    if isinstance(exc, TimeoutError):
        raise NoAgent(f"the agent at {shown} did not answer within {timeout:g} s") from None
    raise NoAgent(f"cannot reach the agent at {shown}: {exc.strerror or exc}") from None


def _error(answer: ServerFrame) -> ApiError:
    body = answer.body
    code = body.text("code", limit=40)
    return ApiError(code if code in ERROR_CODES else INTERNAL,
                    body.text("message", limit=4000))


def _unreadable(exc: ProtocolError) -> str:
    return f"the agent sent something unreadable: {exc.message}"


def _broken(exc: ProtocolError) -> Unreadable:
    return Unreadable(_unreadable(exc))


@dataclass(frozen=True)
class HoldAnswer:
    event_id: str  # as the document spells it
    held: bool
    running: str | None  # the step the agent was already running, if any: it goes on
    # The rule the event falls under (None: none applies, or an agent that does not say)
    # and whether it acts: a hold of an event no rule acts on changes nothing the agent
    # does. An agent that does not say is taken to act.
    rule: str | None = None
    acts: bool = True


def _failed(exc: OSError) -> ConnectionLost:
    return ConnectionLost(f"the connection to the agent failed: {exc.strerror or exc}")


class _Inbox:
    """What the agent sent, as frames: the one rule both readers follow."""

    def __init__(self) -> None:
        self._frames = Frames(MAX_ANSWER)
        self._ready: list[bytes] = []

    def __bool__(self) -> bool:
        return bool(self._ready)

    def add(self, data: bytes) -> None:
        """Bytes read; an empty read is the agent closing."""
        if not data:
            raise ConnectionLost("the agent closed the connection")
        frames, error = self._frames.feed(data)
        self._ready.extend(frames)
        if error is not None and not self._ready:
            raise _broken(error)

    def take(self) -> ServerFrame:
        try:
            return parse_server_frame(decode_frame(self._ready.pop(0)))
        except ProtocolError as exc:
            raise _broken(exc) from None


class _Frames:
    """Answers from a blocking socket, each within a deadline."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._inbox = _Inbox()

    def next(self, deadline: float) -> ServerFrame:
        while not self._inbox:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ConnectionLost("the agent did not answer in time")
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(_READ)
            except TimeoutError:
                raise ConnectionLost("the agent did not answer in time") from None
            except OSError as exc:
                raise _failed(exc) from None
            self._inbox.add(data)
        return self._inbox.take()


class AgentClient:
    """A blocking connection to the agent: one request at a time, each with a deadline.

    The connection may go under it (the agent closes one idle for a minute; a restarted
    agent is a new one): the next request opens another, and a query whose connection was
    lost before its answer is asked once more on a new one. A write never is: what the
    agent made of it is not known (:class:`ConnectionLost`)."""

    def __init__(self, frames: _Frames, hello: Hello, path: Path) -> None:
        self.path = path
        self.hello = hello  # the agent's, as it greeted the newest connection
        self._frames = frames
        self._sock = frames.sock
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._lost = False  # the connection failed: the next request opens another
        self._closed = False

    @classmethod
    def connect(cls, path: Path = DEFAULT_SOCKET, *,
                timeout: float = CONNECT_TIMEOUT) -> AgentClient:
        """Connect and read the hello within ``timeout``; :class:`NoAgent` when nothing
        answers, :class:`ApiError` when something does but is not a usable agent."""
        sock = _connect(path, timeout)
        frames = _Frames(sock)
        try:
            answer = frames.next(time.monotonic() + timeout)
            if answer.kind == "error":
                raise _error(answer)
            if answer.kind != "hello":
                raise ApiError(BAD_REQUEST, "the agent did not begin with a hello")
            return cls(frames, decode_hello(answer.body), path)
        except ProtocolError as exc:
            sock.close()
            raise ApiError(BAD_REQUEST, _unreadable(exc)) from None
        except Unreadable as exc:  # no request was sent: not an agent to attach to
            sock.close()
            raise ApiError(BAD_REQUEST, exc.message) from None
        except BaseException:
            sock.close()
            raise

    def another(self) -> AgentClient:
        """A connection of its own to the same agent: for a request that may take
        minutes (an approval), while the reads on this one go on."""
        return AgentClient.connect(self.path)

    def _reopen(self) -> None:
        """A new connection in place of a lost one (NoAgent while the agent is away)."""
        fresh = AgentClient.connect(self.path)
        with contextlib.suppress(OSError):
            self._sock.close()
        self._frames, self._sock, self.hello = fresh._frames, fresh._sock, fresh.hello
        self._lost = False

    def close(self, *, bye: bool = True) -> None:
        self._closed = True
        if bye:
            with contextlib.suppress(OSError):
                self._sock.sendall(encode_frame({"id": 0, "op": "bye"}))
        with contextlib.suppress(OSError):
            self._sock.close()

    def __enter__(self) -> AgentClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, op: str, *, timeout: float = QUERY_TIMEOUT,
                progress: Callable[[Fields], None] | None = None,
                **args: Any) -> Fields:
        """Send one request; its ``ok`` body. ``timeout``: the longest silence allowed
        between two frames of the answer. ApiError for the agent's error answer."""
        with self._lock:
            if self._closed:
                raise ApiError(UNAVAILABLE, "the connection to the agent was closed")
            if self._lost:
                self._reopen()
            try:
                return self._ask(op, timeout, progress, args)
            except ConnectionLost:
                if op not in QUERIES:
                    raise
            self._reopen()  # a read may be asked again
            return self._ask(op, timeout, progress, args)

    def _ask(self, op: str, timeout: float, progress: Callable[[Fields], None] | None,
             args: dict[str, Any]) -> Fields:
        request_id = next(self._ids)
        try:
            self._sock.sendall(encode_frame({"id": request_id, "op": op, **args}))
        except OSError as exc:
            self._lost = True
            raise _failed(exc) from None
        try:
            while True:
                answer = self._frames.next(time.monotonic() + timeout)
                if answer.kind == "push" or (answer.id is not None
                                             and answer.id != request_id):
                    continue  # not this request's
                if answer.kind == "error" and answer.id is None:
                    # The agent's last word on this connection (it closed an idle one):
                    # whether it saw this request first is not known.
                    raise ConnectionLost(_error(answer).message)
                if answer.kind == "error":
                    raise _error(answer)
                if answer.kind == "progress":
                    if progress is not None:
                        progress(answer.body)
                    continue
                if answer.kind == "ok":
                    return answer.body
                raise Unreadable(f"the agent sent a {answer.kind} in answer")
        except ConnectionLost:
            self._lost = True
            raise
        except ProtocolError as exc:
            self._lost = True  # what follows on this connection cannot be trusted
            raise _broken(exc) from None

    def _read(self, fn: Callable[[], _T]) -> _T:
        try:
            return fn()
        except ProtocolError as exc:
            raise _broken(exc) from None

    # -- the ops --------------------------------------------------------------------------
    def state(self) -> tuple[AgentState, Plan]:
        body = self.request("state")
        vm = self._read(lambda: _vm_in(body))
        if vm is not None:
            self.hello = self.hello.with_vm(vm)
        return self._read(lambda: (decode_state(body.fields("state"), time.monotonic()),
                                   decode_plan(body.fields("plan"))))

    # -- the record (setui.store.reading.Record: what a Store answers, the same way) -----
    def _paged(self, ask: Callable[[int, _T | None], list[_T]], limit: int | None,
               page: int) -> list[_T]:
        """Up to ``limit`` items (all without), asked ``page`` at a time: ``ask(n, last)``
        asks for the n after ``last`` (None: from the start). A page the agent finds too
        large for a frame is asked again in halves."""
        found: list[_T] = []
        size = page
        while limit is None or len(found) < limit:
            want = size if limit is None else min(size, limit - len(found))
            try:
                got = ask(want, found[-1] if found else None)
            except ApiError as exc:
                if exc.code != TOO_LARGE or want == 1:
                    raise
                size = max(1, want // 2)
                continue
            found += got
            if len(got) < want:
                break
        return found

    def history(self, *, limit: int | None = 50, since: datetime | None = None,
                endpoint: str | None = None, event_id: str | None = None,
                before: IncarnationRecord | None = None) -> list[IncarnationRecord]:
        def ask(count: int, last: IncarnationRecord | None) -> list[IncarnationRecord]:
            args: dict[str, Any] = {"limit": count, "since": time_text(since),
                                    "endpoint": endpoint, "event_id": event_id}
            after = last or before
            if after is not None:
                args["before"] = {"first_seen": time_text(after.first_seen),
                                  "row_id": after.row_id}
            body = self.request("history", **args)
            return self._read(lambda: [decode_incarnation(Fields(r, f"records[{i}]")) for
                                       i, r in enumerate(body.items("records", limit=count))])

        return self._paged(ask, limit, HISTORY_PAGE)

    def incarnation(self, number: int, *, endpoint: str | None = None
                    ) -> IncarnationRecord | None:
        body = self.request("incarnation", number=number, endpoint=endpoint)
        return self._read(lambda: None if not body.has("record")
                          else decode_incarnation(body.fields("record")))

    def previous(self, record: IncarnationRecord) -> IncarnationRecord | None:
        body = self.request("previous", endpoint=record.endpoint,
                            first_seen=time_text(record.first_seen), row_id=record.row_id)
        return self._read(lambda: None if not body.has("record")
                          else decode_incarnation(body.fields("record")))

    def event_story(self, event_id: str) -> list[StoryEntry]:
        body = self.request("event_story", event_id=event_id)
        return self._read(lambda: [decode_story(Fields(e, f"story[{i}]")) for i, e in
                                   enumerate(body.items("story", limit=1_000_000))])

    def event_ids(self, prefix: str, *, limit: int = 20) -> list[str]:
        body = self.request("event_ids", prefix=prefix, limit=max(1, min(limit, MAX_IDS)))
        return self._read(lambda: list(body.texts("event_ids", limit=MAX_IDS, each=1000)))

    def holes(self, *, endpoint: str, now: datetime | None = None) -> tuple[Hole, ...]:
        """When nothing recorded ``endpoint``, oldest first, each whole (core.holes)."""
        body = self.request("holes", endpoint=endpoint, now=time_text(now))
        return self._read(lambda: decode_holes(body))

    def impacts(self, *, endpoint: str, since: datetime | None = None,
                until: datetime | None = None, newest: int | None = None) -> list[Impact]:
        body = self.request("impacts", endpoint=endpoint, since=time_text(since),
                            until=time_text(until), newest=newest)
        return self._read(lambda: [decode_impact(Fields(i, f"impacts[{n}]")) for n, i in
                                   enumerate(body.items("impacts", limit=1_000_000))])

    def approvals(self, event_ids: Sequence[str], *,
                  unknown: bool = False) -> dict[str, AuditRecord]:
        ids = list(event_ids)
        found: dict[str, AuditRecord] = {}
        for start in range(0, len(ids), MAX_IDS):
            found.update(self._approvals(ids[start:start + MAX_IDS], unknown))
        return found

    def _approvals(self, ids: list[str], unknown: bool) -> dict[str, AuditRecord]:
        body = self.request("approvals", event_ids=ids, unknown=unknown)

        def read() -> dict[str, AuditRecord]:
            given = body.fields("approvals")
            return {i: decode_audit(given.fields(i)) for i in ids if given.has(i)}
        return self._read(read)

    def claim(self, event_id: str, endpoint: str, *,
              vm_id: str | None = None) -> Claim | None:
        """The earlier approval that claims the event on this VM: its ``vm_id`` when
        known, else ``endpoint`` (store.vmkeys, as ``AuditLog.claim``)."""
        body = self.request("claim", event_id=event_id, endpoint=endpoint, vm_id=vm_id)
        return self._read(lambda: None if not body.has("claim")
                          else decode_claim(body.fields("claim")))

    def audit(self, *, limit: int | None = None,
              oldest_first: bool = False) -> list[AuditRecord]:
        """All the records, or the ``limit`` first in the order asked (newest first unless
        ``oldest_first``), asked a page at a time."""
        def ask(count: int, last: AuditRecord | None) -> list[AuditRecord]:
            args: dict[str, Any] = {"limit": count, "oldest_first": oldest_first}
            if last is not None:
                args["after" if oldest_first else "before"] = last.seq
            body = self.request("audit", **args)
            return self._read(lambda: [decode_audit(Fields(r, f"records[{i}]")) for
                                       i, r in enumerate(body.items("records", limit=count))])

        return self._paged(ask, limit, AUDIT_PAGE)

    def unforwarded(self) -> dict[int, str]:
        """Records that did not leave the VM: seq -> why (the audit op says it beside
        any page)."""
        body = self.request("audit", limit=1)

        def read() -> dict[int, str]:
            unforwarded = body.fields("unforwarded", optional=True)
            told = {}
            for key in (unforwarded.data if unforwarded is not None else {}):
                if not key.isdigit() or len(key) > 19:
                    raise ProtocolError(BAD_REQUEST, "unforwarded: keys must be numbers")
                told[int(key)] = unforwarded.text(key, limit=4000)
            return dict(sorted(told.items()))
        return self._read(read)

    def missing_records(self) -> str | None:
        """Why the log is shorter than its witness says (None if it is not)."""
        body = self.request("audit", limit=1)
        missing: str | None = self._read(lambda: body.text("missing", limit=4000,
                                                           optional=True))
        return missing

    def verify_audit(self) -> VerifyResult:
        body = self._heavy("verify_audit")
        return self._read(lambda: decode_verify(body.fields("result")))

    def recording(self, *, since: datetime | None = None, until: datetime | None = None,
                  endpoint: str | None = None) -> RecordingParts | None:
        body = self._heavy("recording", since=time_text(since), until=time_text(until),
                           endpoint=endpoint)
        return self._read(lambda: None if not body.has("recording")
                          else decode_recording(body.fields("recording")))

    def _heavy(self, op: str, **args: Any) -> Fields:
        """A query of the whole record, which the agent answers each user once every few
        seconds: asked again while it says busy, for as long as that lasts."""
        deadline = time.monotonic() + HEAVY_PATIENCE
        while True:
            try:
                return self.request(op, timeout=300.0, **args)
            except ApiError as exc:
                if exc.code != BUSY or time.monotonic() >= deadline:
                    raise
            time.sleep(1.0)

    def approve(self, event_ids: Sequence[str], confirmed: Mapping[str, Confirmed], *,
                allow_other_vms: bool = False, again: bool = False,
                progress: Callable[[Progress], None] | None = None,
                ) -> list[ApprovalOutcome]:
        """Approve in the agent, bound to what the operator confirmed; ``progress`` hears
        of each failed try. The agent acts as who the kernel says this process is."""
        def heard(body: Fields) -> None:
            if progress is not None:
                progress(self._read(lambda: decode_progress(body)))

        body = self.request("approve", timeout=APPROVE_TIMEOUT, progress=heard,
                            event_ids=list(event_ids),
                            confirmed={i: encode_confirmed(c) for i, c in confirmed.items()},
                            allow_other_vms=allow_other_vms, again=again)
        return self._read(lambda: [decode_outcome(Fields(o, f"outcomes[{i}]")) for i, o in
                                   enumerate(body.items("outcomes", limit=len(event_ids)))])

    def dismiss(self, event_ids: Sequence[str]) -> bool:
        """Record that the operator said no; whether it was recorded."""
        body = self.request("dismiss", event_ids=list(event_ids))
        return self._read(lambda: body.flag("recorded"))

    def hold(self, event_id: str) -> HoldAnswer:
        return self._hold("hold", event_id)

    def release(self, event_id: str) -> HoldAnswer:
        return self._hold("release", event_id)

    def _hold(self, op: str, event_id: str) -> HoldAnswer:
        body = self.request(op, event_id=event_id)
        return self._read(lambda: HoldAnswer(body.text("event_id", limit=1000),
                                             body.flag("held"),
                                             body.text("running", limit=40, optional=True),
                                             body.text("rule", limit=1000, optional=True),
                                             body.flag("acts", default=True)))


# -- the subscription ---------------------------------------------------------------------
@dataclass(frozen=True)
class StatePush:
    state: AgentState


@dataclass(frozen=True)
class PlanPush:
    plan: Plan


@dataclass(frozen=True)
class Tick:
    """Nothing changed; the agent is alive, and this is its clock and connection."""

    now: datetime
    health: Health


@dataclass(frozen=True)
class VmPush:
    """The agent learned this VM's name or vmId after it greeted (the subscription's
    ``hello`` says them from now on)."""

    vm: VmIdentity


Push = StatePush | PlanPush | Tick | VmPush


def _vm_in(body: Fields) -> VmIdentity | None:
    """The ``vm`` of a state answer; None from an agent that does not send one."""
    vm = body.fields("vm", optional=True)
    return decode_vm(vm) if vm is not None else None


def _push(answer: ServerFrame) -> Push | None:
    """A push decoded; None for one this version does not know (ignored, as the version
    rule says)."""
    body, mono = answer.body, time.monotonic()
    if answer.push == "state":
        return StatePush(decode_state(body.fields("state"), mono))
    if answer.push == "plan":
        return PlanPush(decode_plan(body.fields("plan")))
    if answer.push == "tick":
        return Tick(body.time("now"), decode_health(body.fields("health"), mono))
    if answer.push == "vm":
        return VmPush(decode_vm(body.fields("vm")))
    return None


class _StreamFrames:
    """Answers from an asyncio stream, each within a silence it may not exceed."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader
        self._inbox = _Inbox()

    async def next(self, timeout: float) -> ServerFrame:
        while not self._inbox:
            try:
                data = await asyncio.wait_for(self.reader.read(_READ), timeout)
            except asyncio.TimeoutError:
                raise ConnectionLost(f"the agent said nothing for {timeout:g} s") from None
            except OSError as exc:
                raise _failed(exc) from None
            self._inbox.add(data)
        return self._inbox.take()

    async def expect(self, kind: str, timeout: float) -> Fields:
        answer = await self.next(timeout)
        if answer.kind == "error":
            raise _error(answer)
        if answer.kind != kind:
            raise ApiError(BAD_REQUEST, f"the agent sent a {answer.kind}, not a {kind}")
        return answer.body


class Subscription:
    """``sub = await Subscription.open(path)``: ``sub.state`` and ``sub.plan`` as they
    are now, then ``async for push in sub`` until the agent goes (ApiError then)."""

    def __init__(self, frames: _StreamFrames, writer: asyncio.StreamWriter, hello: Hello,
                 state: AgentState, plan: Plan) -> None:
        self.hello = hello
        self.state = state
        self.plan = plan
        self._frames = frames
        self._writer = writer

    @classmethod
    async def open(cls, path: Path = DEFAULT_SOCKET, *,
                   timeout: float = CONNECT_TIMEOUT) -> Subscription:
        sock = await asyncio.to_thread(_connect, path, timeout)
        sock.setblocking(False)
        reader, writer = await asyncio.open_unix_connection(sock=sock, limit=_READ)
        frames = _StreamFrames(reader)
        try:
            hello = await frames.expect("hello", timeout)
            writer.write(encode_frame({"id": 1, "op": "subscribe"}))
            ok = await frames.expect("ok", max(timeout, 10.0))
            mono = time.monotonic()
            greeted, vm = decode_hello(hello), _vm_in(ok)
            return cls(frames, writer, greeted.with_vm(vm) if vm is not None else greeted,
                       decode_state(ok.fields("state"), mono), decode_plan(ok.fields("plan")))
        except ProtocolError as exc:
            writer.close()
            raise _broken(exc) from None
        except BaseException:
            writer.close()
            raise

    async def next(self) -> Push:
        """The next push; ApiError when the agent goes or sends what it must not."""
        while True:
            answer = await self._frames.next(SILENCE)
            if answer.kind == "error":
                raise _error(answer)
            if answer.kind != "push":
                continue
            try:
                push = _push(answer)
            except ProtocolError as exc:
                raise _broken(exc) from None
            if isinstance(push, StatePush):
                self.state = push.state
            elif isinstance(push, PlanPush):
                self.plan = push.plan
            elif isinstance(push, VmPush):
                self.hello = self.hello.with_vm(push.vm)
            if push is not None:
                return push

    def __aiter__(self) -> AsyncIterator[Push]:
        return self._pushes()

    async def _pushes(self) -> AsyncIterator[Push]:
        while True:
            yield await self.next()

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            self._writer.write(encode_frame({"id": 2, "op": "bye"}))
            self._writer.close()
            await asyncio.wait_for(self._writer.wait_closed(), 1.0)
