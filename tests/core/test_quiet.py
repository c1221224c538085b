"""Quiet polls (core.quiet) under the real poller and client, over real loopback HTTP: a
raw keep-alive server answers each request from a script, so every answer the thread
meets (the same document, another one, an error, too much, nothing, bytes nobody asked
for) is one the test chose, and its request count is the truth the results must add
up to."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any

import pytest

from setui.core import poller as poller_module
from setui.core.client import ImdsClient
from setui.core.errors import RequestTimeout, ServerError, TooLarge
from setui.core.health import ConnectionState, PollResult
from setui.core.poller import Poller
from setui.core.tracker import ChangeKind
from tests.support.waiting import until

MakeRawServer = Callable[..., Awaitable[Any]]
MakeClient = Callable[..., ImdsClient]
INTERVAL = 0.2


def document(incarnation: int, *ids: str) -> bytes:
    events = [{"EventId": i, "EventType": "Reboot", "ResourceType": "VirtualMachine",
               "Resources": ["vm-0"], "EventStatus": "Scheduled",
               "NotBefore": "Mon, 30 Nov 2026 00:00:00 GMT", "Description": "",
               "EventSource": "Platform", "DurationInSeconds": -1} for i in ids]
    return json.dumps({"DocumentIncarnation": incarnation, "Events": events}).encode()


def answer(body: bytes, status: str = "200 OK", *, length: int | None = None,
           etag: str | None = None) -> bytes:
    tag = f"ETag: {etag}\r\n" if etag is not None else ""
    return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
            f"Date: {formatdate(usegmt=True)}\r\n{tag}"
            f"Content-Length: {len(body) if length is None else length}\r\n\r\n"
            ).encode() + body


A = document(1, "e-1")
B = document(2, "e-1", "e-2")


@dataclass
class Script:
    """What the server answers to its n-th request (the last entry for all later ones):
    bytes, b"" to close the connection without an answer, None to answer nothing until
    the test ends, or (bytes, more) to send more a moment after the answer."""

    answers: Sequence[bytes | tuple[bytes, bytes] | None]
    requests: int = 0
    headers: list[dict[str, str]] = field(default_factory=list)  # each request's, in order
    connections: list[asyncio.StreamWriter] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def __call__(self, request: Any, writer: asyncio.StreamWriter) -> None:
        if writer not in self.connections:
            self.connections.append(writer)
        n = self.requests
        self.requests += 1
        self.headers.append(request.headers)
        reply = self.answers[min(n, len(self.answers) - 1)]
        if reply is None:
            await self.release.wait()
            return
        if isinstance(reply, tuple):
            writer.write(reply[0])
            await writer.drain()
            # Half an interval on: read by the client as the answer's end, before its
            # next request (the server's pace, not a wait of the test's).
            await asyncio.sleep(INTERVAL / 2)
            writer.write(reply[1])
        elif not reply:
            writer.close()
        else:
            writer.write(reply)


@dataclass
class Run:
    poller: Poller
    results: list[PollResult]
    task: asyncio.Task[None]
    asked: list[int]  # the server's count of requests as each result arrived

    @property
    def told(self) -> int:
        """The polls the results stand for."""
        return sum(r.polls for r in self.results)


@pytest.fixture
async def run_quiet(make_client: MakeClient, raw_server: MakeRawServer,
                    monkeypatch: pytest.MonkeyPatch
                    ) -> AsyncIterator[Callable[..., Awaitable[Run]]]:
    """``await run_quiet(script, span=..., quiet=...)``: a poller polling the script's
    server quietly, its results collected; stopped (and the server released) after."""
    runs: list[Run] = []
    scripts: list[Script] = []

    async def start(script: Script, *, span: float = 0.6, quiet: bool = True,
                    **client: Any) -> Run:
        monkeypatch.setattr(poller_module, "QUIET_SPAN", span)
        server = await raw_server(script, keep_alive=True)
        poller = Poller(make_client(server.url, **client), interval=INTERVAL,
                        quiet_ok=lambda: quiet)
        results: list[PollResult] = []
        asked: list[int] = []

        async def collect() -> None:
            async for result in poller.results():
                results.append(result)
                asked.append(script.requests)

        run = Run(poller, results, asyncio.ensure_future(collect()), asked)
        runs.append(run)
        scripts.append(script)
        return run

    yield start
    for script in scripts:
        script.release.set()
    for run in runs:
        run.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run.task


def quiet_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "setui-quiet-polls"]


async def test_answers_that_say_nothing_new_are_told_once_a_span_with_their_count(
        run_quiet: Callable[..., Awaitable[Run]]) -> None:
    script = Script([answer(A)])
    run = await run_quiet(script)
    await until(lambda: len(run.results) >= 4, what="four results")
    first, *later = run.results
    assert first.polls == 1 and first.changes  # the first answer is read on the loop
    # The span is three intervals: each later result stands for about as many polls,
    # and every one of them is an answer of the server's, none made twice.
    assert all(r.polls > 1 and r.fresh and not r.changes and r.error is None for r in later)
    assert run.asked == [sum(r.polls for r in run.results[:n + 1])
                         for n in range(len(run.results))]
    assert len(quiet_threads()) == 1
    # The loop made its connection, the thread its own, kept alive for every poll.
    assert len(script.connections) == 2


async def test_health_stays_live_between_results(
        run_quiet: Callable[..., Awaitable[Run]]) -> None:
    """Longer than "live" allows without a result: the thread's answers keep it live."""
    script = Script([answer(A)])
    run = await run_quiet(script, span=60.0)
    await until(lambda: len(run.results) == 1 and script.requests >= 3, what="quiet polls")
    poller = run.poller
    before = poller.health.last_success_mono
    await until(lambda: script.requests >= 6, what="more quiet polls")
    assert poller.fold_quiet()
    assert poller.health.state is ConnectionState.LIVE
    assert before is not None and poller.health.last_success_mono is not None
    assert poller.health.last_success_mono > before
    assert len(run.results) == 1


async def test_a_new_document_is_told_at_the_poll_that_brought_it(
        run_quiet: Callable[..., Awaitable[Run]]) -> None:
    script = Script([answer(A)] * 4 + [answer(B)])
    run = await run_quiet(script, span=60.0)
    await until(lambda: any(r.changes for r in run.results[1:]), what="the new event")
    news = next(r for r in run.results[1:] if r.changes)
    assert [c.kind for c in news.changes] == [ChangeKind.APPEARED]
    assert news.document is not None and news.document.incarnation == 2
    # Read from the thread's answer: the server was not asked again for it.
    assert news.polls == 4
    assert run.asked[run.results.index(news)] == 5


async def test_an_error_on_the_thread_reads_as_it_does_on_the_loop(
        run_quiet: Callable[..., Awaitable[Run]]) -> None:
    failed = answer(b'{"error": "the service is on fire"}', "500 Internal Server Error")
    script = Script([answer(A)] * 3 + [failed, answer(A)])
    run = await run_quiet(script, span=60.0)
    await until(lambda: any(r.error for r in run.results), what="the failure")
    error = next(r.error for r in run.results if r.error)
    assert isinstance(error, ServerError) and error.status == 500
    assert "the service is on fire" in error.message
    # The same answer made on the loop reads in the same words.
    on_loop = await run_quiet(Script([failed]), quiet=False)
    await until(lambda: bool(on_loop.results), what="the loop's failure")
    assert on_loop.results[0].error is not None
    assert on_loop.results[0].error.message == error.message
    # After the failure, polling goes on (on the loop, then quietly again).
    await until(lambda: run.results[-1].fresh and run.results[-1].polls > 1,
                what="quiet polls again")


async def test_too_large_an_answer_is_the_clients_error(
        run_quiet: Callable[..., Awaitable[Run]]) -> None:
    big = answer(b" " * 5000 + A)
    script = Script([answer(A)] * 3 + [big, answer(A)])
    run = await run_quiet(script, span=60.0, max_body=4096)
    await until(lambda: any(r.error for r in run.results), what="the failure")
    error = next(r.error for r in run.results if r.error)
    assert isinstance(error, TooLarge) and "not read" in error.message


async def test_no_answer_in_time_is_a_timeout_and_the_thread_lets_go(
        run_quiet: Callable[..., Awaitable[Run]]) -> None:
    script = Script([answer(A)] * 3 + [None])
    run = await run_quiet(script, span=60.0, timeout=0.5)
    await until(lambda: any(r.error for r in run.results), what="the timeout")
    error = next(r.error for r in run.results if r.error)
    assert isinstance(error, RequestTimeout)
    assert "no answer from" in error.message and "within 0.5 s" in error.message


async def test_a_connection_closed_as_the_request_left_is_asked_again_once(
        run_quiet: Callable[..., Awaitable[Run]]) -> None:
    """The server's idle timeout fired just as the thread's request went out: a GET is
    asked again on a new connection, as the loop's exchange does; no error is told."""
    script = Script([answer(A)] * 3 + [b"", answer(A)])
    run = await run_quiet(script, span=1.0)
    await until(lambda: script.requests >= 7 and len(run.results) >= 3, what="polls after")
    assert all(r.error is None for r in run.results)


@pytest.mark.parametrize("later", [False, True], ids=["with-the-answer", "after-it"])
async def test_bytes_nobody_asked_for_are_never_read_as_the_next_answer(
        run_quiet: Callable[..., Awaitable[Run]], later: bool) -> None:
    """An answer followed by a second one to the same request (a broken proxy), in the
    same read or after the answer was read: the next poll goes out on a new
    connection, and B stays unseen."""
    stale: bytes | tuple[bytes, bytes] = (answer(A), answer(B)) if later \
        else answer(A) + answer(B)
    script = Script([answer(A)] * 3 + [stale, answer(A)])
    run = await run_quiet(script, span=1.0)
    await until(lambda: script.requests >= 7, what="polls after the stale bytes")
    assert all(not r.changes for r in run.results[1:])
    assert len(script.connections) == 3  # the loop's, the thread's, and its new one


async def test_poll_now_is_answered_at_once_while_quiet(
        run_quiet: Callable[..., Awaitable[Run]]) -> None:
    script = Script([answer(A)])
    run = await run_quiet(script, span=600.0)
    await until(lambda: script.requests >= 3, what="quiet polls")
    assert len(run.results) == 1
    run.poller.poll_now()
    await until(lambda: len(run.results) == 2, what="the result asked for")
    assert run.results[1].fresh and run.results[1].polls >= 1


async def test_want_next_tells_the_next_answer_without_an_extra_request(
        run_quiet: Callable[..., Awaitable[Run]]) -> None:
    script = Script([answer(A)])
    run = await run_quiet(script, span=600.0)
    await until(lambda: script.requests >= 3, what="quiet polls")
    asked_at = script.requests
    run.poller.want_next()
    await until(lambda: len(run.results) == 2, what="the next answer")
    assert run.asked[1] <= asked_at + 1  # the next on the grid (or the one under way)


async def test_no_quiet_polls_while_the_consumers_want_every_answer(
        run_quiet: Callable[..., Awaitable[Run]]) -> None:
    script = Script([answer(A)])
    run = await run_quiet(script, quiet=False)
    await until(lambda: len(run.results) >= 5, what="five results")
    assert all(r.polls == 1 for r in run.results)
    assert not quiet_threads()


async def test_stopping_ends_the_thread_even_while_it_waits_for_an_answer(
        run_quiet: Callable[..., Awaitable[Run]]) -> None:
    script = Script([answer(A)] * 3 + [None])
    run = await run_quiet(script, span=60.0, timeout=60.0)
    await until(lambda: script.requests >= 4, what="the request that is never answered")
    assert len(quiet_threads()) == 1
    run.task.cancel()
    await until(lambda: not quiet_threads(), what="the thread's end")


async def test_quiet_polls_take_their_tokens_from_the_clients_rate_limit(
        run_quiet: Callable[..., Awaitable[Run]]) -> None:
    """Every request of the client's takes a token, the thread's too: at one token a
    second, polls every 0.2 s come once a second."""
    script = Script([answer(A)])
    run = await run_quiet(script, span=600.0, rate=1.0, burst=1)
    await until(lambda: len(run.results) == 1, what="the first result")
    start, before = time.monotonic(), script.requests
    await until(lambda: script.requests >= before + 4, what="four quiet polls")
    made = script.requests - before
    assert made <= (time.monotonic() - start) * 1.0 + 2, made


async def test_a_bug_on_the_thread_ends_the_quiet_not_the_polling(
        run_quiet: Callable[..., Awaitable[Run]], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    script = Script([answer(A)])
    run = await run_quiet(script, span=600.0)
    client = run.poller.client
    repeat = client.repeat

    def broken() -> Any:
        def judge(*args: Any) -> bool:
            raise ValueError("a bug in the judge")
        made = repeat()
        return None if made is None else dataclasses.replace(made, nothing_new=judge)

    monkeypatch.setattr(client, "repeat", broken)
    await until(lambda: len(run.results) >= 4, what="polls on the loop after the bug")
    assert all(r.polls == 1 and r.error is None for r in run.results)
    assert "quiet polls failed" in caplog.text


async def test_a_bug_describing_the_poll_ends_the_quiet_not_the_polling(
        run_quiet: Callable[..., Awaitable[Run]], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    script = Script([answer(A)])
    run = await run_quiet(script, span=600.0)

    def broken() -> Any:
        raise UnicodeEncodeError("ascii", "é", 0, 1, "a header that is not ASCII")

    monkeypatch.setattr(run.poller.client, "repeat", broken)
    await until(lambda: len(run.results) >= 4, what="polls on the loop after the bug")
    assert all(r.polls == 1 and r.error is None for r in run.results)
    assert "quiet polls failed" in caplog.text


async def test_the_same_bytes_under_a_new_etag_are_read_by_the_client(
        run_quiet: Callable[..., Awaitable[Run]]) -> None:
    """The same document under another ETag is not "nothing new" to the thread: the
    client reads it and keeps the new tag, which the next polls send back."""
    script = Script([answer(A, etag='"one"')] * 3 + [answer(A, etag='"two"')])
    run = await run_quiet(script, span=60.0)
    await until(lambda: script.requests >= 6, what="polls after the new ETag")
    sent = [h.get("if-none-match") for h in script.headers]
    assert sent[1:3] == ['"one"', '"one"']
    assert set(sent[4:]) == {'"two"'}, f"the polls after the new tag sent {sent[4:]}"
    assert all(not r.changes and r.error is None for r in run.results[1:])


async def test_a_304_to_a_request_without_if_none_match_is_an_error(
        run_quiet: Callable[..., Awaitable[Run]]) -> None:
    """Without an ETag the polls send no If-None-Match, so a 304 is no "unchanged":
    the thread hands it to the client, which names it, as it would on the loop."""
    script = Script([answer(A)] * 3 + [answer(b"", "304 Not Modified")])
    run = await run_quiet(script, span=60.0)
    await until(lambda: any(r.error for r in run.results), what="the 304 told as an error")
    assert all("if-none-match" not in h for h in script.headers)
    error = next(r.error for r in run.results if r.error)
    assert "304 Not Modified to a request that had nothing cached" in error.message
