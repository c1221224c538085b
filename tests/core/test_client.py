"""ImdsClient over real loopback HTTP: the emulator answers, faults break it on purpose."""

from __future__ import annotations

import asyncio
import json
import random
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from typing import Any

import httpx
import pytest

from setui.core.apiversions import KNOWN_API_VERSIONS
from setui.core.backoff import MAX_RETRY_AFTER, Backoff
from setui.core.client import KEEPALIVE_EXPIRY, ImdsClient
from setui.core.endpoint import DEFAULT_API_VERSION, check_api_version, check_endpoint
from setui.core.errors import (
    BadDocument,
    Gone,
    ImdsError,
    MethodNotAllowed,
    NotFound,
    RateLimited,
    Rejected,
    RequestTimeout,
    ServerError,
    TooLarge,
    Unreachable,
)
from setui.core.poller import SLOW_INTERVAL
from setui.core.transport import PlainTransport
from setui.emulator.clock import DEFAULT_START, ManualClock
from setui.emulator.faults import parse_faults
from setui.emulator.scenario import Scenario, parse_scenario
from setui.emulator.server import Emulator
from tests.support.faketime import FakeTime
from tests.support.waiting import PATIENCE, until

MakeEmulator = Callable[..., Emulator]
MakeClient = Callable[..., ImdsClient]
MakeRelay = Callable[[str], Awaitable[Any]]
MakeRawServer = Callable[[Callable[[Any, asyncio.StreamWriter], Awaitable[None]]], Awaitable[Any]]

FAST = Backoff(base=0.02, cap=0.05)  # retries in tests: real waits, kept short

EVENTS = "/metadata/scheduledevents"
REBOOT_ID = "F020BA2E-3BC0-4C40-A10B-86575A9EABD5"
FREEZE_ID = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
# Two events present from scenario second 0, so approvals are accepted at once.
APPROVABLE = f"""
name = "approvable"
vm_name = "vm-a"
tail = 60
[[events]]
id = "{REBOOT_ID}"
type = "Reboot"
source = "User"
notice = "15m"
[[events]]
id = "{FREEZE_ID}"
type = "Freeze"
notice = "15m"
duration = 5
"""

def approvable() -> Scenario:
    return parse_scenario(APPROVABLE, source="approvable.toml", default_name="approvable")


def seed_failing_first(failures: int, share: float = 0.5) -> int:
    """A fault seed whose first ``failures`` draws hit a fault of ``share`` and whose
    next draw does not: "fail N times, then succeed", deterministically."""
    for seed in range(100_000):
        rng = random.Random(seed)
        rolls = [rng.random() for _ in range(failures + 1)]
        if all(r < share for r in rolls[:-1]) and rolls[-1] >= share:
            return seed
    raise AssertionError("no such seed")


def gets(emulator: Emulator) -> list[Any]:
    return [r for r in emulator.requests if r.method == "GET" and r.path == EVENTS]


def posts(emulator: Emulator) -> list[Any]:
    return [r for r in emulator.requests if r.method == "POST"]

def reply(status: int, body: bytes = b"", *headers: str, phrase: str = "X") -> bytes:
    """The bytes of a complete HTTP/1.1 answer."""
    lines = [f"HTTP/1.1 {status} {phrase}", f"Content-Length: {len(body)}",
             "Connection: close", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def test_known_api_versions_are_the_documented_ones() -> None:
    assert KNOWN_API_VERSIONS[0] == "2017-03-01" and KNOWN_API_VERSIONS[-1] == DEFAULT_API_VERSION
    assert len(KNOWN_API_VERSIONS) == 7 and list(KNOWN_API_VERSIONS) == sorted(KNOWN_API_VERSIONS)


@pytest.mark.parametrize("endpoint", ["ftp://x", "169.254.169.254", "http://", "http://h/?a=1"])
def test_a_bad_endpoint_is_refused_at_once(endpoint: str) -> None:
    with pytest.raises(ValueError, match="endpoint"):
        ImdsClient(endpoint)


def test_a_bad_api_version_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="api-version"):
        ImdsClient(api_version="2020-07-01&x=1")


@pytest.mark.parametrize(("endpoint", "expected"), [
    ("http://169.254.169.254", "http://169.254.169.254"),
    (" http://169.254.169.254/ ", "http://169.254.169.254"),
    ("https://imds.example:8443/prefix/", "https://imds.example:8443/prefix"),
    ("http://[::1]:8080", "http://[::1]:8080"),
    ("HTTP://127.0.0.1:80", "HTTP://127.0.0.1:80"),
])
def test_check_endpoint_gives_what_the_client_uses(endpoint: str, expected: str) -> None:
    assert check_endpoint(endpoint) == expected
    assert ImdsClient(endpoint).endpoint == expected


@pytest.mark.parametrize(("endpoint", "words"), [
    ("", "the endpoint is empty"),
    ("169.254.169.254", "must start with http:// or https://"),
    ("ftp://x", "must start with http:// or https://"),
    ("http://", "has no host"),
    ("http:///metadata", "has no host"),
    ("http://x/?a=1", "has a query or fragment"),
    ("http://x?", "has a query or fragment"),
    ("http://x/#top", "has a query or fragment"),
    ("http://[::1", "is not a valid URL"),
    ("http://x:port", "not a number"),
    ("http://x:99999", "outside 1-65535"),
    ("http://x:0", "outside 1-65535"),
    ("http://ex ample", "spaces or control characters"),
    ("http://x\u202e/", "spaces or control characters"),
    ("http://user:secret@x", "user name or password"),
])
def test_check_endpoint_says_what_is_wrong(endpoint: str, words: str) -> None:
    with pytest.raises(ValueError) as caught:
        check_endpoint(endpoint)
    message = str(caught.value)
    assert words in message
    assert "like http://169.254.169.254" in message  # and what to give instead
    assert "secret" not in message


@pytest.mark.parametrize("version", ["2020-07-01", "2017-03-01", "2030-01-01-preview"])
def test_check_api_version_takes_any_well_shaped_version(version: str) -> None:
    assert check_api_version(version) == version


@pytest.mark.parametrize("version", ["", "{latest}", "2020-07-01\n", "2020-07-01&x=1",
                                     "2020 07 01", "x" * 33])
def test_check_api_version_refuses_the_rest(version: str) -> None:
    with pytest.raises(ValueError, match=r"api-version must look like 2020-07-01 .*known "
                                         r"versions: 2017-03-01, .*2020-07-01$"):
        check_api_version(version)


async def test_fetch_sends_the_documented_request_and_parses_the_answer(
        make_emulator: MakeEmulator, make_client: MakeClient, clock: ManualClock) -> None:
    emulator = make_emulator("live-migration")
    client = make_client(emulator.url + "/")  # a trailing slash is tolerated
    assert client.url == emulator.url + "/metadata/scheduledevents?api-version=2020-07-01"
    first = await client.fetch()
    assert first.status == 200 and first.document is not None
    assert first.document.incarnation == 1 and first.document.events == ()
    assert first.server_date == datetime.fromtimestamp(DEFAULT_START, timezone.utc)
    assert 0 < first.latency < 1 and first.received_mono <= time.monotonic()
    clock.advance(61)  # the documented Freeze appears at scenario second 60
    second = await client.fetch()
    assert second.document is not None and second.document.incarnation == 2
    assert [e.event_id for e in second.document.events] == [FREEZE_ID]
    request = gets(emulator)[0]
    assert request.query == {"api-version": "2020-07-01"}
    assert request.headers["metadata"] == "true"


async def test_every_request_says_metadata_true_and_never_x_forwarded_for(
        make_emulator: MakeEmulator, make_client: MakeClient) -> None:
    emulator = make_emulator(approvable(), faults=parse_faults("approve-500=0.5,seed="
                                                               f"{seed_failing_first(1)}"))
    client = make_client(emulator.url, backoff=FAST)
    with pytest.raises(ServerError):
        await client.approve([REBOOT_ID])
    await client.fetch()
    assert await client.vm_name() == "vm-a"
    await client.approve([REBOOT_ID])
    emulator.set_faults(parse_faults("404=1"))
    with pytest.raises(NotFound):
        await client.fetch()
    kinds = {(r.method, r.path) for r in emulator.requests}
    assert kinds == {("GET", "/metadata/scheduledevents"), ("POST", "/metadata/scheduledevents"),
                     ("GET", "/metadata/instance/compute/name")}
    assert len(emulator.requests) == 5
    for request in emulator.requests:
        assert request.headers.get("metadata") == "true"
        assert "x-forwarded-for" not in request.headers


async def test_proxy_settings_in_the_environment_are_ignored(
        make_emulator: MakeEmulator, make_client: MakeClient,
        monkeypatch: pytest.MonkeyPatch, dead_url: str) -> None:
    dead = dead_url
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(name, dead)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    emulator = make_emulator()
    # The environment is effective: an ordinary client goes to the dead proxy and fails.
    async with httpx.AsyncClient() as ordinary:
        with pytest.raises(httpx.TransportError):
            await ordinary.get(emulator.url + "/metadata/scheduledevents?api-version=2020-07-01",
                               headers={"Metadata": "true"})
    assert emulator.requests == []
    result = await make_client(emulator.url).fetch()
    assert result.status == 200 and len(emulator.requests) == 1


async def test_one_connection_carries_every_request(
        make_emulator: MakeEmulator, make_client: MakeClient, relay: MakeRelay) -> None:
    emulator = make_emulator(approvable())
    through = await relay(emulator.url)
    client = make_client(through.url, rate=100, burst=100)
    for _ in range(8):
        await client.fetch()
    await client.vm_name()
    await client.approve([REBOOT_ID])
    assert len(emulator.requests) == 10
    assert through.connections == 1


def test_a_pooled_connection_outlives_every_gap_the_poller_makes() -> None:
    assert max(SLOW_INTERVAL, Backoff().cap, MAX_RETRY_AFTER) < KEEPALIVE_EXPIRY


async def test_polls_the_longest_gap_apart_share_one_connection(
        make_emulator: MakeEmulator, make_client: MakeClient, relay: MakeRelay) -> None:
    # The slow pace after a 400/404 is 10 s; a 5 s keep-alive expiry once meant a new TCP
    # connection (and on a real VM, a new handshake with IMDS) for every such poll. The
    # gap is the client's own clock's: no real wait.
    emulator = make_emulator()
    through = await relay(emulator.url)
    mono = ManualClock(0.0)
    client = make_client(through.url, mono=mono)
    await client.fetch()
    mono.advance(max(SLOW_INTERVAL, Backoff().cap, MAX_RETRY_AFTER))
    await client.fetch()
    assert through.connections == 1
    mono.advance(KEEPALIVE_EXPIRY)  # idle longer than the expiry: a new connection
    await client.fetch()
    assert through.connections == 2


@pytest.mark.parametrize(("faults", "requests"), [
    ("idle-close=0.2", 2),  # the server closed it; the client notices before sending
    ("idle-drop=0.2", 3),  # the close raced the request: it is sent again, once
])
async def test_a_connection_the_server_dropped_while_idle_is_not_an_error(
        make_emulator: MakeEmulator, make_client: MakeClient, relay: MakeRelay,
        faults: str, requests: int) -> None:
    emulator = make_emulator(faults=parse_faults(faults))
    through = await relay(emulator.url)
    client = make_client(through.url)
    first = await client.fetch()
    await asyncio.sleep(0.4)
    second = await client.fetch()
    assert (first.status, second.status) == (200, 200)
    assert second.document == first.document
    assert len(gets(emulator)) == requests
    assert through.connections == 2


async def test_an_approval_is_not_silently_repeated_on_a_dropped_connection(
        make_emulator: MakeEmulator, make_client: MakeClient) -> None:
    # Only a GET is sent again behind the caller's back; an approval's retry is the
    # Approver's, checked as a new send. This one left, and the server read it.
    emulator = make_emulator(approvable(), faults=parse_faults("idle-drop=0.2"))
    client = make_client(emulator.url, backoff=FAST)
    await client.fetch()
    await asyncio.sleep(0.4)
    with pytest.raises(Unreachable, match="closed before any answer") as caught:
        await client.approve([REBOOT_ID])
    assert caught.value.may_have_arrived and len(posts(emulator)) == 1


async def test_a_new_connection_closed_without_an_answer_is_not_retried(
        make_client: MakeClient, raw_server: MakeRawServer) -> None:
    async def handler(request: Any, writer: asyncio.StreamWriter) -> None:
        pass  # read the request, answer nothing, close

    server = await raw_server(handler)
    with pytest.raises(Unreachable, match="closed before any answer"):
        await make_client(server.url).fetch()
    assert len(server.requests) == 1


async def test_an_approval_during_a_poll_in_flight_uses_a_second_connection_only_then(
        make_emulator: MakeEmulator, make_client: MakeClient, relay: MakeRelay) -> None:
    # The first answer is held long enough that a busy machine cannot finish it before
    # the approval: the approval's own answer must not wait for it.
    emulator = make_emulator(approvable(), faults=parse_faults("first-delay=2"))
    through = await relay(emulator.url)
    client = make_client(through.url, enabling_timeout=PATIENCE)
    poll = asyncio.ensure_future(client.fetch())
    await until(lambda: len(gets(emulator)) == 1, what="the poll")  # in flight
    await client.approve([REBOOT_ID])  # not stuck behind the slow first poll
    assert not poll.done()
    await poll
    for _ in range(3):
        await client.fetch()
    assert through.connections == 2


async def test_the_first_call_waits_for_enabling_later_calls_do_not(
        make_emulator: MakeEmulator, make_client: MakeClient) -> None:
    emulator = make_emulator(faults=parse_faults("first-delay=0.6"))
    client = make_client(emulator.url, timeout=0.25, enabling_timeout=3.0)
    assert client.first_call_pending
    result = await client.fetch()  # answered after 0.6 s: the enabling timeout applied
    assert result.status == 200
    assert not client.first_call_pending
    emulator.set_faults(parse_faults("slow=0.6"))
    with pytest.raises(RequestTimeout) as caught:  # and now the normal one
        await client.fetch()
    assert caught.value.message == f"no answer from {emulator.url} within 0.25 s"
    assert caught.value.retryable


async def test_a_first_call_that_times_out_says_why_and_stays_pending(
        make_emulator: MakeEmulator, make_client: MakeClient) -> None:
    emulator = make_emulator(faults=parse_faults("first-delay=2"))
    client = make_client(emulator.url, timeout=0.1, enabling_timeout=0.3)
    with pytest.raises(RequestTimeout) as caught:
        await client.fetch()
    assert "within 0.3 s" in caught.value.message
    assert "enables scheduled events and can take up to 2 minutes" in caught.value.message
    assert client.first_call_pending


async def test_nothing_listening_is_unreachable_in_words(make_client: MakeClient,
                                                         dead_url: str) -> None:
    endpoint = dead_url
    client = make_client(endpoint)
    with pytest.raises(Unreachable) as caught:
        await client.fetch()
    assert caught.value.message == (f"nothing answers at {endpoint} — is this an Azure VM? "
                                    "(connection refused)")
    assert caught.value.retryable and client.first_call_pending


@pytest.mark.parametrize(
    ("spec", "kind", "message", "retry_after"),
    [
        ("400=1", Rejected, "rejected: Bad request.", None),
        ("404=1", NotFound, "not found (404): Not found. — is {url} the metadata service?", None),
        ("410=1", Gone, "not ready yet (410 Gone): the service says to retry for up to 70 "
                        "seconds (Gone: retry after some time.)", None),
        ("429=1,retry-after=2", RateLimited, "rate limited (429): more than about 5 requests a "
                                             "second from this VM; it asks to wait 2 s", 2.0),
        ("429=1", RateLimited, "rate limited (429): more than about 5 requests a second from "
                               "this VM; backing off", None),
        ("500=1", ServerError, "the metadata service failed (500 Internal Server Error): "
                               "Internal server error: retry later.", None),
        ("503=1,retry-after=3", ServerError, "the metadata service failed (503 Service "
                                             "Unavailable): Service unavailable: retry later.",
         3.0),
        ("notjson=1", BadDocument, "the answer is not a scheduled-events document: the body is "
                                   "not JSON", None),
        ("notdoc=1", BadDocument, "the answer is not a scheduled-events document: ", None),
        ("truncate=1", BadDocument, "the answer was cut off: the connection closed after ", None),
    ],
)
async def test_each_failure_has_its_type_and_words(
        make_emulator: MakeEmulator, make_client: MakeClient, spec: str, kind: type[ImdsError],
        message: str, retry_after: float | None) -> None:
    emulator = make_emulator(faults=parse_faults(spec))
    with pytest.raises(ImdsError) as caught:
        await make_client(emulator.url).fetch()
    error = caught.value
    assert type(error) is kind
    assert error.message.startswith(message.format(url=emulator.url)), error.message
    assert error.retry_after == retry_after
    assert error.retryable is (kind not in (Rejected, NotFound))
    # every answer was an answer: the enabling call is over
    assert len(gets(emulator)) == 1


async def test_a_truncated_body_says_how_much_arrived(
        make_emulator: MakeEmulator, make_client: MakeClient) -> None:
    emulator = make_emulator(faults=parse_faults("truncate=1"))
    length = len(json.dumps(emulator.document()))
    with pytest.raises(BadDocument) as caught:
        await make_client(emulator.url).fetch()
    assert caught.value.message == ("the answer was cut off: the connection closed after "
                                    f"{length // 2} of {length} bytes")


async def test_not_a_document_quotes_the_parser(
        make_emulator: MakeEmulator, make_client: MakeClient) -> None:
    emulator = make_emulator(faults=parse_faults("notdoc=1,seed=3"))
    with pytest.raises(BadDocument) as caught:
        await make_client(emulator.url).fetch()
    # DocumentError names the field: "<field>: <problem>"
    assert ": " in caught.value.message.removeprefix("the answer is not a scheduled-events "
                                                     "document: ")


async def test_an_unknown_api_version_is_rejected_with_the_services_reason(
        make_emulator: MakeEmulator, make_client: MakeClient) -> None:
    emulator = make_emulator()
    with pytest.raises(Rejected) as caught:
        await make_client(emulator.url, api_version="2099-01-01").fetch()
    assert caught.value.message.startswith("rejected: Bad request. api-version is invalid")
    assert caught.value.message.endswith("(newest api-versions: 2020-07-01, 2019-08-01, "
                                         "2019-04-01)")
    assert not caught.value.retryable


async def test_a_hanging_service_times_out(make_emulator: MakeEmulator,
                                           make_client: MakeClient) -> None:
    emulator = make_emulator(faults=parse_faults("hang=1"))
    client = make_client(emulator.url, enabling_timeout=0.3)
    with pytest.raises(RequestTimeout, match=r"no answer from .* within 0\.3 s"):
        await client.fetch()


async def test_a_trickling_body_is_bounded_by_the_whole_request_timeout(
        make_emulator: MakeEmulator, make_client: MakeClient) -> None:
    # One byte every 20 ms never trips a per-read timeout; the total one must.
    emulator = make_emulator(faults=parse_faults("trickle=0.02"))
    client = make_client(emulator.url, enabling_timeout=0.4)
    with pytest.raises(RequestTimeout) as caught:
        await client.fetch()
    assert caught.value.message.startswith(f"the answer from {emulator.url} did not complete "
                                           "within 0.4 s (")


async def test_a_50_mb_answer_is_refused_without_reading_it(
        make_emulator: MakeEmulator, make_client: MakeClient) -> None:
    emulator = make_emulator(faults=parse_faults("big=50"))
    client = make_client(emulator.url)
    tracemalloc.start()
    try:
        with pytest.raises(TooLarge) as caught:
            await client.fetch()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024  # not read
    assert caught.value.message.startswith("the answer is 47.7 MiB, more than the 4.0 MiB")
    # the connection was dropped, not drained: the next poll works on a fresh one
    emulator.set_faults(None)
    assert (await client.fetch()).status == 200


async def test_a_limit_smaller_than_the_document_is_enforced(
        make_emulator: MakeEmulator, make_client: MakeClient) -> None:
    emulator = make_emulator(approvable())
    with pytest.raises(TooLarge):
        await make_client(emulator.url, max_body=200).fetch()
    assert (await make_client(emulator.url, max_body=4000).fetch()).status == 200


async def test_a_chunked_body_without_length_stops_being_read_at_the_limit(
        make_client: MakeClient, raw_server: MakeRawServer) -> None:
    sent = 0
    chunk = b"x" * 65536

    async def endless(request: Any, writer: asyncio.StreamWriter) -> None:
        nonlocal sent
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        while sent < 50 * 1024 * 1024:
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            await writer.drain()
            sent += len(chunk)

    server = await raw_server(endless)
    client = make_client(server.url, max_body=1024 * 1024)
    tracemalloc.start()
    try:
        with pytest.raises(TooLarge) as caught:
            await client.fetch()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    await asyncio.sleep(0.05)
    assert caught.value.message.startswith("the answer grew past 1.0 MiB")
    assert sent < 20 * 1024 * 1024, sent  # the sender was cut off long before 50 MB
    assert peak < 8 * 1024 * 1024


@pytest.mark.parametrize(
    ("answer", "kind", "message"),
    [
        (reply(405, b"Method not allowed here"), MethodNotAllowed,
         "method not allowed (405): Method not allowed here"),
        (reply(403, b"<html><head><title>403 Forbidden</title></head><body><h1>Access denied"
                    b"</h1> by proxy</body></html>", "Content-Type: text/html", phrase="Forbidden"),
         ImdsError, "unexpected answer (403 Forbidden): 403 Forbidden Access denied by proxy"),
        (reply(302, b"", "Location: http://evil.example/"), ImdsError,
         "unexpected redirect (302) to http://evil.example/: the metadata service never "
         "redirects — is a proxy in the way?"),
        (reply(400, b'{"error": "bad \\u001b[31mred\\u001b[0m\\nthing"}'), Rejected,
         "rejected: bad \\x1b[31mred\\x1b[0m thing"),
        (b"SSH-2.0-OpenSSH_9.6\r\n", Unreachable, "the connection to "),
    ],
)
async def test_answers_the_emulator_never_gives_are_typed_too(
        make_client: MakeClient, raw_server: MakeRawServer, answer: bytes,
        kind: type[ImdsError], message: str) -> None:
    async def handler(request: Any, writer: asyncio.StreamWriter) -> None:
        writer.write(answer)

    server = await raw_server(handler)
    with pytest.raises(ImdsError) as caught:
        await make_client(server.url).fetch()
    assert type(caught.value) is kind
    assert caught.value.message.startswith(message), caught.value.message


async def test_network_text_in_messages_is_trimmed_and_escaped(
        make_client: MakeClient, raw_server: MakeRawServer) -> None:
    async def handler(request: Any, writer: asyncio.StreamWriter) -> None:
        writer.write(reply(400, b"\x1b]0;owned\x07" + b"A" * 5000, "Content-Type: text/plain"))

    server = await raw_server(handler)
    with pytest.raises(Rejected) as caught:
        await make_client(server.url).fetch()
    text = caught.value.message
    assert len(text) <= len("rejected: ") + 200
    assert text.startswith("rejected: \\x1b]0;owned\\x07AAA") and text.endswith("…")
    assert all(ch.isprintable() for ch in text)


async def test_retry_after_as_an_http_date(make_client: MakeClient,
                                           raw_server: MakeRawServer) -> None:
    when = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=30), usegmt=True)

    async def handler(request: Any, writer: asyncio.StreamWriter) -> None:
        writer.write(reply(429, b"slow down", f"Retry-After: {when}"))

    server = await raw_server(handler)
    with pytest.raises(RateLimited) as caught:
        await make_client(server.url).fetch()
    assert caught.value.retry_after is not None and 27 <= caught.value.retry_after <= 30


async def test_etag_and_304_when_the_service_sends_etags(
        make_emulator: MakeEmulator, make_client: MakeClient, clock: ManualClock) -> None:
    emulator = make_emulator(etag=True)
    client = make_client(emulator.url)
    first = await client.fetch()
    assert first.status == 200 and first.document is not None
    unchanged = await client.fetch()
    assert unchanged.status == 304 and unchanged.document is None
    assert unchanged.server_date is not None
    clock.advance(61)
    changed = await client.fetch()
    assert changed.status == 200 and changed.document is not None
    assert changed.document.incarnation == 2
    sent = [r.headers.get("if-none-match") for r in gets(emulator)]
    assert sent == [None, '"1"', '"1"']
    client.forget_etag()
    assert (await client.fetch()).status == 200
    assert gets(emulator)[-1].headers.get("if-none-match") is None


async def test_without_etags_every_fetch_is_a_full_answer(
        make_emulator: MakeEmulator, make_client: MakeClient) -> None:
    emulator = make_emulator(etag=False)
    client = make_client(emulator.url)
    results = [await client.fetch() for _ in range(3)]
    assert [r.status for r in results] == [200, 200, 200]
    assert all(r.document is not None for r in results)
    assert all("if-none-match" not in r.headers for r in gets(emulator))


async def test_the_rate_limit_is_shared_and_paces_a_burst(
        make_emulator: MakeEmulator, make_client: MakeClient) -> None:
    emulator = make_emulator(approvable())
    fake = FakeTime()
    client = make_client(emulator.url, rate=10, burst=3, mono=fake.mono, sleep=fake.sleep)
    await client.fetch()
    fake.advance(0.3)  # the bucket is full again
    sent: list[float] = []  # the client's clock as each request goes out
    for _ in range(4):
        await client.fetch()
        sent.append(fake.now)
    await client.approve([REBOOT_ID])
    sent.append(fake.now)
    await client.vm_name()
    sent.append(fake.now)
    # 3 tokens at first, then 10 a second: the 4th, 5th and 6th requests wait 0.1 s each
    assert fake.slept == pytest.approx([0.1, 0.1, 0.1])
    assert len(emulator.requests) == 1 + 6
    # ... and no window of requests, approvals included, holds more than the bucket allows
    for i in range(len(sent)):
        for j in range(i + 1, len(sent)):
            assert j - i + 1 <= 3 + 10 * (sent[j] - sent[i]) + 1e-9, (i, j, sent)


async def test_an_approval_after_polling_once_a_second_goes_out_at_once(
        make_emulator: MakeEmulator, make_client: MakeClient) -> None:
    emulator = make_emulator(approvable())
    fake = FakeTime()
    client = make_client(emulator.url, mono=fake.mono, sleep=fake.sleep)  # 4/s, burst 3
    await client.fetch()
    fake.advance(1.0)
    await client.fetch()
    for event_id in (REBOOT_ID, FREEZE_ID):  # keystroke -> POST on the wire
        await client.approve([event_id])
    assert len(posts(emulator)) == 2
    assert fake.slept == []  # neither waited for the rate limit


async def test_the_approval_body_is_exactly_the_documented_one(
        make_emulator: MakeEmulator, make_client: MakeClient) -> None:
    emulator = make_emulator(approvable())
    client = make_client(emulator.url)
    result = await client.approve([REBOOT_ID], incarnation=1)  # ignored after 2017-03-01
    assert (result.event_ids, result.status) == ((REBOOT_ID,), 200) and result.latency > 0
    post = posts(emulator)[0]
    assert post.path == "/metadata/scheduledevents"
    assert post.query == {"api-version": "2020-07-01"}
    assert post.body == b'{"StartRequests": [{"EventId": "%s"}]}' % REBOOT_ID.encode()
    assert post.headers["content-type"] == "application/json"
    several = await client.approve([REBOOT_ID, FREEZE_ID, REBOOT_ID])
    assert several.event_ids == (REBOOT_ID, FREEZE_ID)
    assert json.loads(posts(emulator)[1].body) == {
        "StartRequests": [{"EventId": REBOOT_ID}, {"EventId": FREEZE_ID}]}


async def test_the_2017_preview_approval_carries_the_incarnation(
        make_emulator: MakeEmulator, make_client: MakeClient) -> None:
    emulator = make_emulator(approvable())
    client = make_client(emulator.url, api_version="2017-03-01")
    await client.approve([REBOOT_ID], incarnation=3)
    await client.approve([FREEZE_ID])  # no incarnation known: none sent
    bodies = [json.loads(p.body) for p in posts(emulator)]
    assert bodies == [{"DocumentIncarnation": 3, "StartRequests": [{"EventId": REBOOT_ID}]},
                      {"StartRequests": [{"EventId": FREEZE_ID}]}]
    assert list(bodies[0]) == ["DocumentIncarnation", "StartRequests"]


@pytest.mark.parametrize("code", [410, 429, 500, 503])
async def test_an_approval_is_one_try_and_says_to_retry_what_the_service_says_to(
        make_emulator: MakeEmulator, make_client: MakeClient, code: int) -> None:
    emulator = make_emulator(approvable(), faults=parse_faults(f"approve-{code}=1"))
    client = make_client(emulator.url, backoff=FAST)
    with pytest.raises(ImdsError) as caught:
        await client.approve([REBOOT_ID])
    assert caught.value.status == code and not caught.value.may_have_arrived
    wait = client.approval_retry(1, caught.value)
    assert wait is not None and 0 < wait <= FAST.cap
    assert len(posts(emulator)) == 1  # the one try: the Approver checks before another


@pytest.mark.parametrize("spec", ["", "approve-400=1"])
async def test_an_approval_is_never_retried_after_400(
        make_emulator: MakeEmulator, make_client: MakeClient, spec: str) -> None:
    emulator = make_emulator(approvable(), faults=parse_faults(spec))
    client = make_client(emulator.url, backoff=FAST)
    unknown = "00000000-0000-0000-0000-000000000000"
    with pytest.raises(Rejected) as caught:
        await client.approve([unknown if not spec else REBOOT_ID])
    assert caught.value.message.startswith("rejected: Bad request.")
    assert client.approval_retry(1, caught.value) is None
    assert len(posts(emulator)) == 1


async def test_a_retry_after_is_the_least_wait_before_another_try(
        make_client: MakeClient, raw_server: MakeRawServer) -> None:
    async def handler(request: Any, writer: asyncio.StreamWriter) -> None:
        writer.write(reply(429, b"", "Retry-After: 7"))

    client = make_client((await raw_server(handler)).url, backoff=FAST)
    with pytest.raises(RateLimited) as caught:
        await client.approve([REBOOT_ID])
    assert client.approval_retry(1, caught.value) == 7


async def test_an_approval_says_whether_it_may_have_arrived(
        make_client: MakeClient, raw_server: MakeRawServer, dead_url: str) -> None:
    """Refused before a byte left: it cannot have arrived. Read by the server and then
    answered with nothing (a closed connection, a timeout): it may have."""
    with pytest.raises(Unreachable, match="connection refused") as refused:
        await make_client(dead_url).approve([REBOOT_ID])
    assert not refused.value.may_have_arrived

    async def close(request: Any, writer: asyncio.StreamWriter) -> None:
        pass  # read the request, answer nothing, close

    with pytest.raises(Unreachable, match="closed before any answer") as closed:
        await make_client((await raw_server(close)).url).approve([REBOOT_ID])
    assert closed.value.may_have_arrived

    async def hang(request: Any, writer: asyncio.StreamWriter) -> None:
        await asyncio.Event().wait()  # until the client gives up

    with pytest.raises(RequestTimeout) as timed_out:
        await make_client((await raw_server(hang)).url, timeout=0.3).approve([REBOOT_ID])
    assert timed_out.value.may_have_arrived


async def test_an_answer_cut_off_after_an_accepting_head_is_accepted(
        make_client: MakeClient, raw_server: MakeRawServer) -> None:
    async def handler(request: Any, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{")

    result = await make_client((await raw_server(handler)).url).approve([REBOOT_ID])
    assert result.status == 200


@pytest.mark.parametrize(("status", "phrase"), [(500, "Internal Server Error"),
                                                 (400, "Bad Request"),
                                                 (503, "Service Unavailable")])
async def test_an_answer_cut_off_after_a_failing_head_is_not_accepted(
        make_client: MakeClient, raw_server: MakeRawServer, status: int, phrase: str) -> None:
    """The head said no; that its body never arrived whole changes nothing."""
    async def handler(request: Any, writer: asyncio.StreamWriter) -> None:
        writer.write(f"HTTP/1.1 {status} {phrase}\r\nContent-Type: application/json\r\n"
                     "Content-Length: 50\r\n\r\n{\"error\": ".encode())

    client = make_client((await raw_server(handler)).url)
    with pytest.raises(ImdsError) as caught:
        result = await client.approve([REBOOT_ID])
        pytest.fail(f"counted as accepted: {result}")
    assert caught.value.status == status  # type: ignore[unreachable]  # pytest.raises caught it


@pytest.mark.parametrize(("ids", "error"), [(REBOOT_ID, TypeError), ([], ValueError),
                                             (["", REBOOT_ID], ValueError)])
async def test_approving_nothing_is_a_programming_error(make_client: MakeClient, ids: object,
                                                        error: type[Exception]) -> None:
    with pytest.raises(error):
        await make_client("http://127.0.0.1:9").approve(ids)  # type: ignore[arg-type]


async def test_vm_name_asks_compute_metadata_and_never_raises(
        make_emulator: MakeEmulator, make_client: MakeClient, dead_url: str) -> None:
    emulator = make_emulator(vm_name="my-vm-7")
    client = make_client(emulator.url)
    assert await client.vm_name() == "my-vm-7"
    request = emulator.requests[-1]
    assert request.path == "/metadata/instance/compute/name"
    assert request.query == {"api-version": "2021-02-01", "format": "text"}
    assert client.first_call_pending  # the name is not the enabling call
    assert await make_client(dead_url).vm_name() is None
    assert await make_client(emulator.url + "/nowhere").vm_name() is None  # 404


# -- the same bytes again -------------------------------------------------------------------
def _body(incarnation: int, not_before: str = "Mon, 11 Apr 2022 22:26:58 GMT") -> bytes:
    return json.dumps({"DocumentIncarnation": incarnation, "Events": [{
        "EventId": FREEZE_ID, "EventStatus": "Scheduled", "EventType": "Freeze",
        "ResourceType": "VirtualMachine", "Resources": ["vm-a"],
        "NotBefore": not_before}]}).encode()


async def test_the_same_bytes_again_give_the_same_document_and_only_then(
        make_client: MakeClient, raw_server: MakeRawServer) -> None:
    """An answer of the very bytes of the one before is not parsed again: its document
    is the same object (what the poller takes for "nothing new"). Any other answer is
    read for what it says: one of the same length that differs in a single digit, the
    first bytes again after it, and the first bytes after an answer that was no
    document at all."""
    first, other = _body(1), _body(2)
    assert len(first) == len(other)
    garbage = b'{"DocumentIncarnation": "x"}'
    script = [first, first, other, first, garbage, first, first]

    async def handler(request: Any, writer: asyncio.StreamWriter) -> None:
        body = script.pop(0)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    server = await raw_server(handler)
    client = make_client(server.url)
    a = (await client.fetch()).document
    again = (await client.fetch()).document
    b = (await client.fetch()).document
    a2 = (await client.fetch()).document
    with pytest.raises(BadDocument):
        await client.fetch()
    a3 = (await client.fetch()).document
    a4 = (await client.fetch()).document
    assert a is not None and b is not None and a2 is not None and a3 is not None
    assert again is a
    assert (a.incarnation, b.incarnation, a2.incarnation, a3.incarnation) == (1, 2, 1, 1)
    assert a2 is not a and a2 == a  # parsed anew after an answer that differed
    assert a3 is not a2  # and after one that was no document
    assert a4 is a3


class _HttpxOnly(httpx.AsyncBaseTransport):
    """The lean transport seen through httpx's interface alone: what the client does
    with any transport but its own (an https endpoint's, a test's)."""

    def __init__(self) -> None:
        self.inner = PlainTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


_DOCUMENT = b'{"DocumentIncarnation": 3, "Events": []}'
_DATE = "Date: Mon, 11 Apr 2022 22:26:58 GMT"


@pytest.mark.parametrize("answer", [
    reply(200, _DOCUMENT, _DATE, 'ETag: "abc"', phrase="OK"),
    reply(200, _DOCUMENT, "date: Mon, 11 Apr 2022 22:26:58 GMT", "DATE: junk"),
    reply(503, b'{"error": "busy"}', "Retry-After: 3", "retry-after: 7",
          "Content-Type: application/json", phrase="Busy"),
    reply(503, b"down", "Retry-After: 7", phrase="Unavailable \xe9"),
    reply(429, b"", "Retry-After: 2"),
    reply(302, b"", "Location: http://proxy.example/\xc3\xa9t\xc3\xa9"),  # UTF-8 bytes
    reply(302, b"", "Location: http://proxy.example/\xe9t\xe9"),  # not UTF-8
    reply(502, b"<html><b>bad</b> gateway</html>", "Content-Type: Text/HTML; charset=utf-8"),
    reply(200, b"x" * 300),
    reply(200, b"not json"),
    b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + _DOCUMENT,
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"80\r\n" + b"x" * 128
    + b"\r\n" + b"80\r\n" + b"x" * 128 + b"\r\n0\r\n\r\n",
])
async def test_the_lean_path_and_httpx_response_give_the_same_outcome(
        make_client: MakeClient, raw_server: MakeRawServer, answer: bytes) -> None:
    """The client reads its own transport's answers without an httpx.Response (its
    headers made a dict, its reason phrase and body read as httpx would): every answer
    comes out as through httpx's interface, headers repeated, in any case, not ASCII,
    errors and the size cap included."""
    async def handler(request: Any, writer: asyncio.StreamWriter) -> None:
        writer.write(answer)

    server = await raw_server(handler)

    async def outcome(client: ImdsClient) -> tuple[object, ...]:
        try:
            got = await client.fetch()
        except ImdsError as exc:
            return (type(exc), exc.message, exc.status, exc.retry_after)
        return (got.status, got.document, got.server_date, client._etag)

    lean = make_client(server.url, max_body=256)
    general = make_client(server.url, max_body=256, transport=_HttpxOnly())
    assert isinstance(lean._transport, PlainTransport)
    assert await outcome(lean) == await outcome(general)
