"""The rules of an HTTP/1.1 exchange (core.wire), held by both of its drivers over real
loopback HTTP: the lean transport on the event loop (core.transport) and the quiet
polls' blocking socket (core.quiet, its exchange made here on a worker thread). The
emulator, a relay that counts connections, and a raw server for the wire shapes the
emulator does not make. (tests/core/test_transport.py has what only the transport does;
tests/core/test_client.py and tests/core/test_quiet.py drive both through the client.)"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from setui.core.quiet import QuietPolls, Repeat
from setui.core.transport import PlainTransport
from setui.core.wire import KEEPALIVE_EXPIRY, MAX_HEAD_BYTES, Wire
from setui.emulator.clock import ManualClock
from setui.emulator.faults import parse_faults
from setui.emulator.server import Emulator
from tests.support.waiting import until

MakeEmulator = Callable[..., Emulator]
MakeRelay = Callable[[str], Awaitable[Any]]
MakeRawServer = Callable[..., Awaitable[Any]]

EVENTS = "/metadata/scheduledevents?api-version=2020-07-01"


@dataclass
class Got:
    """An answer, its body read whole."""

    status: int
    reason: str
    http_version: str
    fields: Mapping[str, str]
    body: bytes


class OnTheLoop:
    """The transport: one exchange as httpx makes it, the body read whole."""

    def __init__(self, mono: Callable[[], float]) -> None:
        self.expiry = 10.0
        self.transport = PlainTransport(keepalive_expiry=self.expiry, mono=mono)

    @property
    def opened(self) -> int:
        return self.transport.opened

    def kept(self) -> Wire | None:
        return self.transport._idle

    async def get(self, url: str, *, timeout: float = 2.0,
                  headers: dict[str, str] | None = None) -> Got:
        request = httpx.Request("GET", url, headers={"Metadata": "true", **(headers or {})},
                                extensions={"timeout": dict.fromkeys(
                                    ("connect", "read", "write", "pool"), timeout)})
        response = await self.transport.handle_async_request(request)
        try:
            body = b"".join([chunk async for chunk in response.aiter_raw()])
        finally:
            await response.aclose()
        return Got(response.status_code, response.reason_phrase, response.http_version,
                   response.headers, body)

    async def aclose(self) -> None:
        await self.transport.aclose()


class OnTheThread:
    """The quiet polls' exchange, made on a worker thread as the polls' thread makes it."""

    def __init__(self, mono: Callable[[], float]) -> None:
        self.expiry = KEEPALIVE_EXPIRY
        self.quiet = QuietPolls(mono=mono)

    @property
    def opened(self) -> int:
        return self.quiet.opened

    def kept(self) -> Wire | None:
        return self.quiet._kept

    async def get(self, url: str, *, timeout: float = 2.0,
                  headers: dict[str, str] | None = None) -> Got:
        parsed = httpx.URL(url)
        sent = {"Host": parsed.netloc.decode("ascii"), "Metadata": "true", **(headers or {})}
        repeat = Repeat(host=parsed.host, port=parsed.port or 80, target=parsed.raw_path,
                        headers=tuple((k.encode(), v.encode()) for k, v in sent.items()),
                        timeout=timeout, max_body=1 << 20, token=lambda: 0.0,
                        nothing_new=lambda *_: False)
        made = await asyncio.to_thread(self.quiet.exchange, repeat)
        answer = made.answer()  # its failure raised
        if made.cut is not None:
            raise made.cut
        head = answer.head
        return Got(head.status_code, answer.reason, f"HTTP/{head.http_version.decode()}",
                   answer.fields(), made.body())

    async def aclose(self) -> None:
        self.quiet.close()
        self.quiet._drop()  # no thread ran to drop it
        self.quiet._kick.close()


Driver = OnTheLoop | OnTheThread


@pytest.fixture(params=["loop", "thread"])
async def make_driver(request: pytest.FixtureRequest
                      ) -> AsyncIterator[Callable[..., Driver]]:
    made: list[Driver] = []

    def make(mono: Callable[[], float] = time.monotonic) -> Driver:
        driver = (OnTheLoop if request.param == "loop" else OnTheThread)(mono)
        made.append(driver)
        return driver

    yield make
    for driver in made:
        await driver.aclose()


@pytest.fixture
def driver(make_driver: Callable[..., Driver]) -> Driver:
    return make_driver()


async def test_a_kept_alive_connection_carries_every_request(
        make_emulator: MakeEmulator, driver: Driver, relay: MakeRelay) -> None:
    emulator = make_emulator()
    through = await relay(emulator.url)
    for _ in range(5):
        got = await driver.get(through.url + EVENTS)
        assert got.status == 200 and b"DocumentIncarnation" in got.body
        assert got.reason == "OK" and got.http_version == "HTTP/1.1"
    assert through.connections == 1 and driver.opened == 1


async def test_a_connection_the_server_closed_while_idle_is_replaced(
        make_emulator: MakeEmulator, driver: Driver, relay: MakeRelay) -> None:
    emulator = make_emulator(faults=parse_faults("idle-close=0.1"))
    through = await relay(emulator.url)
    await driver.get(through.url + EVENTS)
    await asyncio.sleep(0.3)  # the server's idle timeout, not a wait for a condition
    got = await driver.get(through.url + EVENTS)
    assert got.status == 200
    assert through.connections == 2 and driver.opened == 2


async def test_keepalive_expiry_makes_a_new_connection(
        make_emulator: MakeEmulator, make_driver: Callable[..., Driver],
        relay: MakeRelay) -> None:
    now = [0.0]
    driver = make_driver(lambda: now[0])
    through = await relay(make_emulator().url)
    await driver.get(through.url + EVENTS)
    now[0] = driver.expiry - 1
    await driver.get(through.url + EVENTS)
    assert driver.opened == 1
    now[0] = driver.expiry * 2
    await driver.get(through.url + EVENTS)
    assert driver.opened == 2


async def test_a_cut_off_body_is_a_protocol_error(
        make_emulator: MakeEmulator, driver: Driver) -> None:
    emulator = make_emulator(faults=parse_faults("truncate=1"))
    with pytest.raises(httpx.RemoteProtocolError):
        await driver.get(emulator.url + EVENTS)


async def test_closed_without_an_answer_is_a_protocol_error(
        driver: Driver, raw_server: MakeRawServer) -> None:
    async def handler(request: Any, writer: asyncio.StreamWriter) -> None:
        pass

    server = await raw_server(handler)
    with pytest.raises(httpx.RemoteProtocolError, match="without an answer"):
        await driver.get(server.url + EVENTS)


async def test_an_oversized_head_is_refused(driver: Driver,
                                            raw_server: MakeRawServer) -> None:
    async def handler(request: Any, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nX-Filler: " + b"a" * (MAX_HEAD_BYTES + 10))
        await writer.drain()
        await asyncio.sleep(5)  # never ends its head: the bound must stop reading

    server = await raw_server(handler)
    with pytest.raises(httpx.RemoteProtocolError):
        await driver.get(server.url + EVENTS)


async def test_a_hanging_server_is_a_read_timeout(
        make_emulator: MakeEmulator, driver: Driver) -> None:
    emulator = make_emulator(faults=parse_faults("hang=1"))
    with pytest.raises(httpx.ReadTimeout):
        await driver.get(emulator.url + EVENTS, timeout=0.2)
    assert driver.kept() is None  # the hung connection is not kept


async def test_nothing_listening_is_a_connect_error_with_the_os_reason(
        driver: Driver, dead_url: str) -> None:
    with pytest.raises(httpx.ConnectError) as caught:
        await driver.get(dead_url + EVENTS)
    assert isinstance(caught.value.__cause__, ConnectionRefusedError)


async def test_retry_after_and_status_pass_through(
        make_emulator: MakeEmulator, driver: Driver) -> None:
    emulator = make_emulator(faults=parse_faults("429=1,retry-after=7"))
    got = await driver.get(emulator.url + EVENTS)
    assert got.status == 429 and got.fields["retry-after"] == "7"
    # An error answer with a body read whole leaves the connection fit for the next one.
    await driver.get(emulator.url + EVENTS)
    assert driver.opened == 1


async def test_304_has_no_body_and_keeps_the_connection(
        make_emulator: MakeEmulator, driver: Driver, clock: ManualClock) -> None:
    emulator = make_emulator(etag=True)
    first = await driver.get(emulator.url + EVENTS)
    tag = first.fields["etag"]
    again = await driver.get(emulator.url + EVENTS, headers={"If-None-Match": tag})
    assert again.status == 304 and again.body == b""
    clock.advance(61)
    changed = await driver.get(emulator.url + EVENTS, headers={"If-None-Match": tag})
    assert changed.status == 200 and changed.body
    assert driver.opened == 1


@pytest.mark.parametrize("later", [False, True], ids=["with-the-answer", "after-it"])
async def test_bytes_beyond_the_answer_are_never_taken_for_the_next_one(
        driver: Driver, raw_server: MakeRawServer, later: bool) -> None:
    """A server (or a proxy) that sends two answers to one request, in the same read or
    a moment after the first was read (then it waits in the stream's buffer on the loop,
    in the kernel's for the thread): the second is no answer to the next request, which
    goes out on a new connection and gets its own."""
    connections: list[asyncio.StreamWriter] = []
    first_read, stale_sent = asyncio.Event(), asyncio.Event()
    stale = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale"

    async def handler(request: Any, writer: asyncio.StreamWriter) -> None:
        if writer not in connections:
            connections.append(writer)
        mark = b"new" if len(connections) > 1 else b"old"
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n" + mark)
        if mark == b"old" and not later:
            writer.write(stale)
        elif mark == b"old":
            await writer.drain()
            await first_read.wait()
            writer.write(stale)
            await writer.drain()
            stale_sent.set()

    server = await raw_server(handler, keep_alive=True)
    first = await driver.get(server.url + EVENTS)
    if later:
        first_read.set()
        await stale_sent.wait()
        # The stale answer at the client (read from the socket on the loop), before the
        # next request.
        await until(lambda: (kept := driver.kept()) is not None and kept.waiting(),
                    what="the stale bytes at the client")
    second = await driver.get(server.url + EVENTS)
    assert first.body == b"old"
    assert second.body == b"new"
    assert driver.opened == 2
