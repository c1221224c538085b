"""PlainTransport on its own, over real loopback HTTP: the emulator, and a raw server for
the wire shapes the emulator does not make. (tests/core/test_client.py drives it through
ImdsClient, which uses it for every http:// endpoint.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from setui.core.transport import MAX_HEAD_BYTES, PlainTransport
from setui.emulator.clock import ManualClock
from setui.emulator.faults import parse_faults
from setui.emulator.server import Emulator

MakeEmulator = Callable[..., Emulator]
MakeRelay = Callable[[str], Awaitable[Any]]
MakeRawServer = Callable[..., Awaitable[Any]]

EVENTS = "/metadata/scheduledevents?api-version=2020-07-01"
TIMEOUT = {"connect": 2.0, "read": 2.0, "write": 2.0, "pool": 2.0}


@pytest.fixture
async def transport() -> AsyncIterator[PlainTransport]:
    made = PlainTransport()
    yield made
    await made.aclose()


async def send(transport: PlainTransport, url: str, *, method: str = "GET",
               timeout: dict[str, float] | None = None, content: bytes | None = None,
               headers: dict[str, str] | None = None) -> tuple[httpx.Response, bytes]:
    """One exchange, the body read whole."""
    request = httpx.Request(method, url, headers={"Metadata": "true", **(headers or {})},
                            content=content, extensions={"timeout": timeout or TIMEOUT})
    response = await transport.handle_async_request(request)
    try:
        body = b"".join([chunk async for chunk in response.aiter_raw()])
    finally:
        await response.aclose()
    return response, body


async def test_a_kept_alive_connection_carries_every_request(
        make_emulator: MakeEmulator, transport: PlainTransport, relay: MakeRelay) -> None:
    emulator = make_emulator()
    through = await relay(emulator.url)
    for _ in range(5):
        response, body = await send(transport, through.url + EVENTS)
        assert response.status_code == 200 and b"DocumentIncarnation" in body
        assert response.reason_phrase == "OK" and response.http_version == "HTTP/1.1"
    assert through.connections == 1 and transport.opened == 1


async def test_a_body_the_caller_did_not_finish_closes_the_connection(
        make_emulator: MakeEmulator, transport: PlainTransport, relay: MakeRelay) -> None:
    emulator = make_emulator()
    through = await relay(emulator.url)
    request = httpx.Request("GET", through.url + EVENTS, headers={"Metadata": "true"},
                            extensions={"timeout": TIMEOUT})
    response = await transport.handle_async_request(request)
    await response.aclose()  # nothing read: the rest is still on the wire
    await send(transport, through.url + EVENTS)
    assert through.connections == 2


async def test_a_connection_the_server_closed_while_idle_is_replaced(
        make_emulator: MakeEmulator, transport: PlainTransport, relay: MakeRelay) -> None:
    emulator = make_emulator(faults=parse_faults("idle-close=0.1"))
    through = await relay(emulator.url)
    await send(transport, through.url + EVENTS)
    await asyncio.sleep(0.3)  # the server's idle timeout, not a wait for a condition
    response, _ = await send(transport, through.url + EVENTS)
    assert response.status_code == 200
    assert through.connections == 2 and transport.opened == 2


async def test_keepalive_expiry_makes_a_new_connection(
        make_emulator: MakeEmulator, relay: MakeRelay) -> None:
    now = [0.0]
    transport = PlainTransport(keepalive_expiry=10.0, mono=lambda: now[0])
    through = await relay(make_emulator().url)
    try:
        await send(transport, through.url + EVENTS)
        now[0] = 9.0
        await send(transport, through.url + EVENTS)
        assert transport.opened == 1
        now[0] = 20.0
        await send(transport, through.url + EVENTS)
        assert transport.opened == 2
    finally:
        await transport.aclose()


async def test_overlapping_requests_use_a_second_connection_that_is_not_kept(
        make_emulator: MakeEmulator, transport: PlainTransport, relay: MakeRelay) -> None:
    emulator = make_emulator(faults=parse_faults("slow=0.3"))
    through = await relay(emulator.url)
    await asyncio.gather(send(transport, through.url + EVENTS),
                         send(transport, through.url + EVENTS))
    assert through.connections == 2
    await send(transport, through.url + EVENTS)
    assert through.connections == 2  # one of the two was kept


async def test_a_cut_off_body_is_a_protocol_error(
        make_emulator: MakeEmulator, transport: PlainTransport) -> None:
    emulator = make_emulator(faults=parse_faults("truncate=1"))
    with pytest.raises(httpx.RemoteProtocolError):
        await send(transport, emulator.url + EVENTS)


async def test_closed_without_an_answer_is_a_protocol_error(
        transport: PlainTransport, raw_server: MakeRawServer) -> None:
    async def handler(request: Any, writer: asyncio.StreamWriter) -> None:
        pass

    server = await raw_server(handler)
    with pytest.raises(httpx.RemoteProtocolError, match="without an answer"):
        await send(transport, server.url + EVENTS)


async def test_an_oversized_head_is_refused(transport: PlainTransport,
                                            raw_server: MakeRawServer) -> None:
    async def handler(request: Any, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nX-Filler: " + b"a" * (MAX_HEAD_BYTES + 10))
        await writer.drain()
        await asyncio.sleep(5)  # never ends its head: the bound must stop reading

    server = await raw_server(handler)
    with pytest.raises(httpx.RemoteProtocolError):
        await send(transport, server.url + EVENTS)


async def test_a_hanging_server_is_a_read_timeout(
        make_emulator: MakeEmulator, transport: PlainTransport) -> None:
    emulator = make_emulator(faults=parse_faults("hang=1"))
    with pytest.raises(httpx.ReadTimeout):
        await send(transport, emulator.url + EVENTS, timeout={**TIMEOUT, "read": 0.2})
    assert transport._idle is None  # the hung connection is not kept


async def test_nothing_listening_is_a_connect_error_with_the_os_reason(
        transport: PlainTransport, dead_url: str) -> None:
    with pytest.raises(httpx.ConnectError) as caught:
        await send(transport, dead_url + EVENTS)
    assert isinstance(caught.value.__cause__, ConnectionRefusedError)


async def test_retry_after_and_status_pass_through(
        make_emulator: MakeEmulator, transport: PlainTransport) -> None:
    emulator = make_emulator(faults=parse_faults("429=1,retry-after=7"))
    response, _ = await send(transport, emulator.url + EVENTS)
    assert response.status_code == 429 and response.headers["retry-after"] == "7"
    # An error answer with a body read whole leaves the connection fit for the next one.
    await send(transport, emulator.url + EVENTS)
    assert transport.opened == 1


async def test_304_has_no_body_and_keeps_the_connection(
        make_emulator: MakeEmulator, transport: PlainTransport, clock: ManualClock) -> None:
    emulator = make_emulator(etag=True)
    first, _ = await send(transport, emulator.url + EVENTS)
    tag = first.headers["etag"]
    again, body = await send(transport, emulator.url + EVENTS, headers={"If-None-Match": tag})
    assert again.status_code == 304 and body == b""
    clock.advance(61)
    changed, body = await send(transport, emulator.url + EVENTS,
                               headers={"If-None-Match": tag})
    assert changed.status_code == 200 and body
    assert transport.opened == 1


async def test_a_post_body_is_sent_whole(make_emulator: MakeEmulator,
                                         transport: PlainTransport) -> None:
    emulator = make_emulator()
    content = b'{"StartRequests": []}'
    await send(transport, emulator.url + EVENTS, method="POST", content=content,
               headers={"Content-Type": "application/json"})
    posted = [r for r in emulator.requests if r.method == "POST"]
    assert len(posted) == 1 and posted[0].body == content


async def test_only_plain_http_and_not_after_close(transport: PlainTransport,
                                                   make_emulator: MakeEmulator) -> None:
    with pytest.raises(httpx.UnsupportedProtocol):
        await send(transport, "https://127.0.0.1:1" + EVENTS)
    url = make_emulator().url
    await transport.aclose()
    with pytest.raises(httpx.ConnectError, match="closed"):
        await send(transport, url + EVENTS)


async def test_bytes_beyond_the_answer_are_never_taken_for_the_next_one(
        transport: PlainTransport, raw_server: MakeRawServer) -> None:
    """A server (or a proxy) that sends two answers to one request: the second is no
    answer to the next request, which goes out on a new connection and gets its own."""
    connections: list[asyncio.StreamWriter] = []

    async def handler(request: Any, writer: asyncio.StreamWriter) -> None:
        if writer not in connections:
            connections.append(writer)
        mark = b"new" if len(connections) > 1 else b"old"
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n" + mark
                     + b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale")

    server = await raw_server(handler, keep_alive=True)
    first = await send(transport, server.url + EVENTS)
    second = await send(transport, server.url + EVENTS)
    assert first[1] == b"old"
    assert second[1] == b"new"
    assert transport.opened == 2


async def test_a_request_the_server_does_not_take_is_a_write_timeout(
        transport: PlainTransport) -> None:
    """A request that does not fit the socket's buffers is waited for while it goes
    out (a small one is with the kernel at once, and is not): a server that reads
    nothing makes it a write timeout, not a wait for an answer."""
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(10)  # reads nothing
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}{EVENTS}"
    try:
        with pytest.raises(httpx.WriteTimeout):
            await send(transport, url, method="POST", content=b"x" * (32 * 1024 * 1024),
                       timeout={**TIMEOUT, "write": 0.5})
    finally:
        server.close()
