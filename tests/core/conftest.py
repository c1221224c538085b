"""Fixtures of the client and poller tests: everything crosses real loopback HTTP.

The built-in emulator is the test server. ``raw_server`` is a few lines of HTTP for
the wire shapes the emulator does not produce (a chunked body without Content-Length,
Retry-After on an approval, a redirect, a proxy's HTML page); ``relay`` counts the TCP
connections a client opens.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from setui.core.client import ImdsClient
from setui.emulator.server import Emulator

MakeEmulator = Callable[..., Emulator]
MakeClient = Callable[..., ImdsClient]


@pytest.fixture
def dead_url() -> str:
    """A loopback URL nothing listens on: connections are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
async def make_client() -> AsyncIterator[MakeClient]:
    """ImdsClients with test-sized timeouts; all are closed at the end of the test."""
    made: list[ImdsClient] = []

    def make(endpoint: str, **kwargs: Any) -> ImdsClient:
        kwargs.setdefault("timeout", 2.0)
        kwargs.setdefault("enabling_timeout", 2.0)
        client = ImdsClient(endpoint, **kwargs)
        made.append(client)
        return client

    yield make
    for client in made:
        await client.aclose()


# -- a TCP relay that counts connections ----------------------------------------------------
@dataclass
class Relay:
    url: str
    connections: int = 0
    # (time.monotonic(), bytes) of every piece the client sent, as it arrived here
    sent: list[tuple[float, bytes]] = field(default_factory=list)
    server: asyncio.Server | None = None

    def request_times(self, method: str = "") -> list[float]:
        """When each request (``method`` only, if given) reached the relay."""
        return [t for t, data in self.sent
                if data[:8].split(b" ")[0] in (b"GET", b"POST")
                and (not method or data.startswith(method.encode() + b" "))]


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                log: list[tuple[float, bytes]] | None = None) -> None:
    try:
        while data := await reader.read(65536):
            if log is not None:
                log.append((time.monotonic(), data))
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


@pytest.fixture
async def relay() -> AsyncIterator[Callable[[str], Awaitable[Relay]]]:
    """``await relay(emulator.url)``: a loopback forwarder that counts the TCP
    connections made through it and timestamps what the client sends. (The emulator's
    ``RecordedRequest.time`` is taken when it starts waiting for a request, so on a kept-
    alive connection it is the end of the previous answer, not the arrival.)"""
    relays: list[Relay] = []

    async def make(target: str) -> Relay:
        host, port = target.removeprefix("http://").rsplit(":", 1)
        state = Relay(url="")

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            state.connections += 1
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
            await asyncio.gather(_pipe(reader, up_writer, state.sent), _pipe(up_reader, writer))

        state.server = await asyncio.start_server(handle, "127.0.0.1", 0)
        state.url = f"http://127.0.0.1:{state.server.sockets[0].getsockname()[1]}"
        relays.append(state)
        return state

    yield make
    for state in relays:
        assert state.server is not None
        state.server.close()


# -- a raw HTTP server for the shapes the emulator does not make ----------------------------
@dataclass
class RawRequest:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes


Handler = Callable[[RawRequest, asyncio.StreamWriter], Awaitable[None]]


@dataclass
class RawServer:
    url: str
    requests: list[RawRequest] = field(default_factory=list)


@pytest.fixture
async def raw_server() -> AsyncIterator[Callable[..., Awaitable[RawServer]]]:
    """``await raw_server(handler)``: the handler writes whatever bytes it likes as the
    answer to each request; the connection closes after each answer, or with
    ``keep_alive=True`` only when the client closes it."""
    servers: list[asyncio.Server] = []

    async def make(handler: Handler, *, keep_alive: bool = False) -> RawServer:
        state = RawServer(url="")

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                while True:
                    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1") \
                        .split("\r\n")
                    method, target, _ = head[0].split(" ", 2)
                    headers = {k.strip().lower(): v.strip() for k, _, v in
                               (line.partition(":") for line in head[1:] if line)}
                    body = await reader.readexactly(int(headers.get("content-length", "0")))
                    request = RawRequest(method, target, headers, body)
                    state.requests.append(request)
                    await handler(request, writer)
                    await writer.drain()
                    if not keep_alive:
                        break
            except (ConnectionError, asyncio.IncompleteReadError):
                pass
            finally:
                writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        servers.append(server)
        state.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        return state

    yield make
    for server in servers:
        server.close()
