"""The server's bounds that take a minute to reach, on a manual clock: the server runs in
this test's loop over a real socket, its agent stood in for by the parts it reads (the
real ones are served end to end in test_api_agent.py)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from setui.api import codec
from setui.api import server as server_module
from setui.api.codec import AgentInfo
from setui.api.peer import Authority, Credentials
from setui.api.protocol import ProtocolError
from setui.api.queries import QueryThread
from setui.api.server import IDLE_AFTER, MAX_CONNECTIONS, STALLED_AFTER, ApiServer, Complaints
from setui.api.socketfile import bind_socket
from setui.api.source import AgentSource
from setui.api.writes import REFUSAL_EVERY, REFUSALS_BURST, Refusals
from setui.core.model import parse_document
from setui.monitor.state import MonitorState
from setui.store import Store
from tests.support.waiting import until

T0 = datetime(2026, 11, 25, 19, 0, tzinfo=timezone.utc)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _source(store: Store | None, *, dry_run: bool = False) -> AgentSource:
    monitor = SimpleNamespace(state=MonitorState(), now=lambda: T0, interval=1.0,
                              recorder=None, endpoint="http://127.0.0.1:9", vm_name="vm")
    monitor.health = lambda: monitor.state.health  # no quiet polls to take in
    agent = SimpleNamespace(steps={}, held=set(), log=None, vm_name="vm", vm_id=None)
    info = AgentInfo(1, T0, "vm", None, "http://127.0.0.1:9", None, None, dry_run)
    return AgentSource(monitor=monitor, agent=agent, client=None, store=store,  # type: ignore[arg-type]
                       info=info, host="vm")


class Peer:
    """A raw client: frames in, frames out."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def frame(self) -> dict[str, Any] | None:
        line = await asyncio.wait_for(self.reader.readline(), 10)
        return json.loads(line) if line else None

    async def ask(self, **request: Any) -> dict[str, Any]:
        self.writer.write(json.dumps(request).encode() + b"\n")
        while True:
            frame = await self.frame()
            assert frame is not None, "closed"
            if "push" not in frame:
                return frame


@pytest.fixture
async def serving(tmp_path: Path) -> AsyncIterator[tuple[ApiServer, Clock, Any]]:
    clock = Clock()
    said: list[str] = []
    store = Store.open_dir(tmp_path / "data")
    server = ApiServer(_source(store), authority=Authority([]),
                       queries=QueryThread(store.path), say=said.append, mono=clock)
    bound = bind_socket(tmp_path / "api.sock", group=None)
    await server.serve(bound.sock)

    async def connect() -> Peer:
        reader, writer = await asyncio.open_unix_connection(str(tmp_path / "api.sock"),
                                                            limit=16 * 1024 * 1024)
        peer = Peer(reader, writer)
        hello = await peer.frame()
        assert hello is not None and "hello" in hello, hello
        return peer

    yield server, clock, connect
    await server.aclose()
    bound.remove()
    bound.sock.close()
    store.close()


async def _closed(peer: Peer) -> list[dict[str, Any]]:
    """What the server said before closing; fails if it does not close."""
    said = []
    while (frame := await peer.frame()) is not None:
        said.append(frame)
    return said


async def test_a_client_that_asks_nothing_is_closed_after_a_minute_a_subscriber_is_not(
        serving: tuple[ApiServer, Clock, Any]) -> None:
    server, clock, connect = serving
    idle, subscriber = await connect(), await connect()
    assert "ok" in await subscriber.ask(id=1, op="subscribe")
    clock.now += IDLE_AFTER - 1
    server._sweep()
    assert "ok" in await idle.ask(id=2, op="state")  # a request: the minute starts again
    assert "ok" in await subscriber.ask(id=2, op="state")  # it reads what it is sent
    clock.now += IDLE_AFTER
    server._sweep()
    said = await _closed(idle)
    assert said[-1]["error"]["code"] == "unavailable"
    assert "no request for 60 s" in said[-1]["error"]["message"]
    assert "ok" in await subscriber.ask(id=3, op="state")


async def test_a_subscriber_that_reads_nothing_for_a_minute_is_dropped(
        serving: tuple[ApiServer, Clock, Any], tmp_path: Path) -> None:
    server, clock, connect = serving
    reader = await connect()
    assert "ok" in await reader.ask(id=1, op="subscribe")
    # A plain socket nothing reads from (an asyncio stream would read in the background).
    silent = socket.socket(socket.AF_UNIX)
    silent.setblocking(False)
    await asyncio.get_running_loop().sock_connect(silent, str(tmp_path / "api.sock"))
    silent.send(b'{"id": 1, "op": "subscribe"}\n')
    await asyncio.sleep(0.1)
    server._broadcast(lambda: {"push": "tick", "pad": "x" * 1000})  # waits, unread, for silent
    await asyncio.sleep(0.1)
    assert (await reader.frame() or {}).get("push") == "tick"
    server._sweep()
    clock.now += STALLED_AFTER
    server._sweep()
    await asyncio.sleep(0.1)  # the transport tells the server it is gone
    assert len(server.connections) == 1  # the silent one, dropped
    assert "ok" in await reader.ask(id=2, op="state")
    silent.close()


async def test_a_tick_comes_every_five_seconds_while_nothing_changes(
        serving: tuple[ApiServer, Clock, Any]) -> None:
    server, clock, connect = serving
    peer = await connect()
    assert "ok" in await peer.ask(id=1, op="subscribe")
    clock.now += 5
    server._sweep()
    frame = await peer.frame()
    while frame is not None and frame.get("push") != "tick":
        frame = await peer.frame()
    assert frame is not None and frame["now"] == "2026-11-25T19:00:00.000000Z"
    assert frame["health"]["state"] == "enabling"


async def test_past_the_connection_limit_a_client_hears_busy(
        serving: tuple[ApiServer, Clock, Any], tmp_path: Path) -> None:
    _server, _clock, connect = serving
    peers = [await connect() for _ in range(MAX_CONNECTIONS)]
    reader, writer = await asyncio.open_unix_connection(str(tmp_path / "api.sock"))
    turned_away = Peer(reader, writer)
    said = await _closed(turned_away)
    assert said == [{"error": {"code": "busy", "message":
                               f"the agent serves {MAX_CONNECTIONS} connections already: "
                               "try again later"}}]
    assert len(peers) == MAX_CONNECTIONS


async def test_one_query_at_a_time_and_an_answer_past_the_frame_limit_is_refused(
        serving: tuple[ApiServer, Clock, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    server, _clock, connect = serving
    store = server.source.store
    assert store is not None
    big = "x" * 200_000
    for number in range(1, 60):
        document = parse_document({"DocumentIncarnation": number, "Events": [
            {"EventId": f"E{number}", "EventType": "Reboot", "EventStatus": "Scheduled",
             "Resources": ["vm"], "NotBefore": "Mon, 30 Nov 2026 00:00:00 GMT",
             "Description": big}]})
        store.history.record(document, seen_at=T0, endpoint="http://127.0.0.1:9")
    peer = await connect()
    answer = await peer.ask(id=1, op="history", limit=1000)
    assert answer["error"]["code"] == "too-large", answer
    assert "ask for fewer (limit) or page on (before)" in answer["error"]["message"]
    answer = await peer.ask(id=2, op="history", limit=2)
    assert [r["incarnation"] for r in answer["ok"]["records"]] == [59, 58]

    hold = threading.Event()
    answer_of = server.queries._answer

    def slow(*args: Any) -> bytes:
        hold.wait(30)
        return answer_of(*args)

    monkeypatch.setattr(server.queries, "_answer", slow)
    peer.writer.write(b'{"id": 3, "op": "audit"}\n{"id": 4, "op": "audit"}\n')
    busy = await peer.frame()
    assert busy == {"id": 4, "error": {"code": "busy", "message":
                                       "one query at a time per connection: wait for the "
                                       "answer"}}
    hold.set()
    assert (await peer.frame() or {}).get("id") == 3


async def test_a_dry_run_agent_approves_nothing_for_anyone(tmp_path: Path) -> None:
    server = ApiServer(_source(None, dry_run=True), authority=Authority([]),
                       queries=QueryThread(None, "no store"), say=print)
    bound = bind_socket(tmp_path / "api.sock", group=None)
    await server.serve(bound.sock)
    try:
        reader, writer = await asyncio.open_unix_connection(str(tmp_path / "api.sock"))
        peer = Peer(reader, writer)
        await peer.frame()
        snapshot = {"EventId": "E1", "EventType": "Reboot", "EventStatus": "Scheduled",
                    "NotBefore": "", "Resources": ["vm"]}
        answer = await peer.ask(id=1, op="approve", event_ids=["E1"],
                                confirmed={"E1": {"snapshot": snapshot, "incarnation": 1}})
        assert answer["error"]["code"] == "unavailable"
        assert "--dry-run" in answer["error"]["message"]
        answer = await peer.ask(id=2, op="history")
        assert answer["error"] == {"code": "unavailable", "message":
                                   "the agent keeps no history or audit log: no store"}
        writer.close()
    finally:
        await server.aclose()
        bound.remove()
        bound.sock.close()


def test_refusals_are_recorded_three_in_a_row_then_one_in_ten_seconds_with_a_count() -> None:
    clock = Clock()
    refusals = Refusals(clock)
    assert [refusals.take(7) for _ in range(REFUSALS_BURST + 2)] == [0, 0, 0, None, None]
    assert refusals.take(8) == 0  # another uid has its own
    clock.now += REFUSAL_EVERY
    assert refusals.take(7) == 2  # this record stands for the two not written
    clock.now += 10 * REFUSAL_EVERY
    refusals.forget_idle()
    assert refusals._buckets == {}


def test_complaints_are_said_once_a_minute_per_kind_with_how_many_more() -> None:
    clock, said = Clock(), list[str]()
    complaints = Complaints(said.append, clock)
    for n in range(5):
        complaints.note("bad-client", f"bad frame {n}")
    complaints.note("busy", "turned away")
    complaints.flush()
    assert said == ["bad frame 0", "turned away"]
    clock.now += 60
    complaints.flush()
    assert said[-1] == "bad frame 4 (and 3 more like it in the last minute)"
    clock.now += 60
    complaints.flush()
    assert len(said) == 3


async def test_a_client_asking_for_the_state_in_a_loop_costs_one_encoding_a_second(
        serving: tuple[ApiServer, Clock, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    server, clock, connect = serving
    peer = await connect()
    made = []
    encode = codec.encode_state  # the one the server imported
    monkeypatch.setattr(server_module, "encode_state",
                        lambda *a: made.append(1) or encode(*a))  # type: ignore[func-returns-value]
    for request_id in range(10):
        assert "ok" in await peer.ask(id=request_id, op="state")
    assert len(made) == 1
    clock.now += 1
    assert "ok" in await peer.ask(id=11, op="state")
    server.changed()  # anything in it changed: encoded again at once
    await asyncio.sleep(0.1)
    assert "ok" in await peer.ask(id=12, op="state")
    # That second, and the answer after the change; no state frame pushed: nobody is
    # subscribed, so none is encoded.
    assert len(made) == 3


def test_whole_record_queries_are_asked_at_most_every_five_seconds_per_user(
        tmp_path: Path) -> None:
    clock = Clock()
    server = ApiServer(_source(None), authority=Authority([]),
                       queries=QueryThread(None, "no store"), say=print, mono=clock)
    user = SimpleNamespace(creds=Credentials(1, 1000, 1000, ()))
    root = SimpleNamespace(creds=Credentials(1, 0, 0, ()))
    server._heavy_allowed(user, "verify_audit")  # type: ignore[arg-type]
    with pytest.raises(ProtocolError, match="at most once every 5 s"):
        server._heavy_allowed(user, "verify_audit")  # type: ignore[arg-type]
    server._heavy_allowed(user, "recording")  # type: ignore[arg-type]
    server._heavy_allowed(user, "history")  # type: ignore[arg-type]
    server._heavy_allowed(user, "history")  # type: ignore[arg-type]
    for _ in range(3):
        server._heavy_allowed(root, "verify_audit")  # type: ignore[arg-type]
    clock.now += 5
    server._heavy_allowed(user, "verify_audit")  # type: ignore[arg-type]


async def test_with_nothing_to_sweep_the_agent_sleeps_until_a_client_or_a_complaint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No client, no complaint, nothing to forget: no sweep, at a poll or by a timer (the
    agent's loop sleeps between quiet polls' results). A complaint arms it again, and
    it stops again once the complaint is told."""
    from setui.core.health import Health, PollResult
    from setui.monitor.state import MonitorUpdate

    monkeypatch.setattr(server_module, "SWEEP_EVERY", 0.05)
    clock = Clock()
    store = Store.open_dir(tmp_path / "data")
    said: list[str] = []
    server = ApiServer(_source(store), authority=Authority([]),
                       queries=QueryThread(store.path), say=said.append, mono=clock)
    swept: list[float] = []
    sweep = server._sweep
    monkeypatch.setattr(server, "_sweep",
                        lambda: (swept.append(clock.now), sweep()))  # type: ignore[func-returns-value]
    bound = bind_socket(tmp_path / "api.sock", group=None)
    await server.serve(bound.sock)
    poll = MonitorUpdate(PollResult(Health(), None, fresh=True), (), None)
    try:
        await until(lambda: len(swept) == 1, what="the first sweep")
        await until(lambda: server._sweep_timer is None, what="no timer after it")
        clock.now += 3600
        server.publish(poll)
        assert len(swept) == 1  # nothing to sweep: the poll sweeps nothing either
        server.complain("busy", "one")
        server.complain("busy", "two")  # counted, to be told a minute on
        assert said == ["setui agent: api: one"]
        await until(lambda: len(swept) >= 3, what="sweeps while a complaint is owed")
        clock.now += 61
        await until(lambda: len(said) == 2 and server._sweep_timer is None,
                    what="the complaint told, and no more sweeps")
        assert said[1] == "setui agent: api: two"
    finally:
        await server.aclose()
        bound.remove()
        bound.sock.close()
        store.close()


async def test_the_sweep_rides_a_poll_that_comes_when_it_is_due_else_it_has_its_timer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Polled once a second, the agent sweeps in the poll's turn of the loop, not at a
    wake of its own: a poll sooner than the sweep is due sweeps nothing, one at about
    SWEEP_EVERY since the last sweep does it at once. Without polls the timer sweeps
    alone, a little after SWEEP_EVERY each time."""
    from setui.core.health import Health, PollResult
    from setui.monitor.state import MonitorUpdate

    monkeypatch.setattr(server_module, "SWEEP_EVERY", 3600.0)  # the timer: not in this test
    clock = Clock()
    store = Store.open_dir(tmp_path / "data")
    server = ApiServer(_source(store), authority=Authority([]),
                       queries=QueryThread(store.path), say=lambda line: None, mono=clock)
    swept: list[float] = []
    monkeypatch.setattr(server, "_sweep", lambda: swept.append(clock.now))
    monkeypatch.setattr(server, "_sweep_wanted", lambda: True)  # a client, say
    bound = bind_socket(tmp_path / "api.sock", group=None)
    await server.serve(bound.sock)
    poll = MonitorUpdate(PollResult(Health(), None, fresh=True), (), None)
    try:
        await asyncio.sleep(0.05)
        clock.now += 1800
        server.publish(poll)
        await asyncio.sleep(0.05)
        assert swept == []  # half the time since the last sweep: not due
        clock.now += 1800 - 20
        server.publish(poll)
        await until(lambda: swept == [4580.0], what="the sweep at the poll")
        clock.now += 3600 - 20
        server.publish(poll)
        await until(lambda: swept == [4580.0, 8160.0], what="the next sweep at the poll")
        # No polls: the timer alone (real time, SWEEP_EVERY made short).
        monkeypatch.setattr(server_module, "SWEEP_EVERY", 0.05)
        clock.now += 3600
        server.publish(poll)  # one more sweep, and the timer is armed with the short time
        await until(lambda: len(swept) >= 5, what="sweeps by the timer alone")
    finally:
        await server.aclose()
        bound.remove()
        bound.sock.close()
        store.close()
