"""PlainTransport on its own, over real loopback HTTP: what only the transport does (a
body left unread, a second connection, a request's body). The exchange's rules, which it
keeps with the quiet polls' thread, are tests/core/test_wire.py's; tests/core/
test_client.py drives it through ImdsClient, which uses it for every http:// endpoint."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from setui.core.transport import PlainTransport
from setui.emulator.faults import parse_faults
from setui.emulator.server import Emulator

MakeEmulator = Callable[..., Emulator]
MakeRelay = Callable[[str], Awaitable[Any]]

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


async def test_overlapping_requests_use_a_second_connection_that_is_not_kept(
        make_emulator: MakeEmulator, transport: PlainTransport, relay: MakeRelay) -> None:
    emulator = make_emulator(faults=parse_faults("slow=0.3"))
    through = await relay(emulator.url)
    await asyncio.gather(send(transport, through.url + EVENTS),
                         send(transport, through.url + EVENTS))
    assert through.connections == 2
    await send(transport, through.url + EVENTS)
    assert through.connections == 2  # one of the two was kept


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
