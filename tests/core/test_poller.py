"""The poller: its schedule on a fake clock, its behaviour against the real emulator.

The scheduling arithmetic (grid, skipped ticks, backoff, the slow pace) is tested with
a scripted client on fake time, where exact instants can be asserted. Everything that
crosses the wire (enabling, outages, restarts, 304, clock skew, poll_now) is tested
against the emulator over loopback in real time.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from setui.core.backoff import Backoff
from setui.core.client import FetchResult, ImdsClient
from setui.core.errors import ImdsError, NotFound, RateLimited, ServerError, Unreachable
from setui.core.health import ConnectionState, Health, PollResult
from setui.core.model import Document, parse_document
from setui.core.poller import Poller
from setui.core.tracker import Change, ChangeKind, Tracker
from setui.emulator.clock import ManualClock
from setui.emulator.faults import parse_faults
from setui.emulator.server import Emulator
from tests.support.faketime import WALL, FakeTime
from tests.support.waiting import PATIENCE

MakeEmulator = Callable[..., Emulator]
MakeClient = Callable[..., ImdsClient]
MakePoller = Callable[..., tuple[Poller, Emulator]]
MakeRelay = Callable[[str], Awaitable[Any]]
EVENTS = "/metadata/scheduledevents"
FREEZE_ID = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
EMPTY = parse_document({"DocumentIncarnation": 1, "Events": []})
ONE_EVENT = parse_document({"DocumentIncarnation": 2, "Events": [{
    "EventId": FREEZE_ID, "EventStatus": "Scheduled", "EventType": "Freeze",
    "ResourceType": "VirtualMachine", "Resources": ["WestNO_0"],
    "NotBefore": "Mon, 11 Apr 2022 22:26:58 GMT"}]})
GONE = parse_document({"DocumentIncarnation": 3, "Events": []})


def gets(emulator: Emulator) -> list[Any]:
    return [r for r in emulator.requests if r.method == "GET" and r.path == EVENTS]


# -- a scripted client on fake time ---------------------------------------------------------
Outcome = Document | None | BaseException


class ScriptedClient:
    """Stands in for ImdsClient where only timing matters: each fetch takes
    ``duration`` fake seconds and gives the next scripted outcome (then EMPTY)."""

    def __init__(self, t: FakeTime, script: Sequence[tuple[float, Outcome]] | None = None,
                 *, skew: float = 0.0) -> None:
        self.t = t
        self.script = list(script or [])
        self.skew = skew
        self.first_call_pending = True
        self.starts: list[float] = []
        self.in_flight = 0
        self.forgot = 0

    async def fetch(self) -> FetchResult:
        self.starts.append(self.t.now)
        self.in_flight += 1
        assert self.in_flight == 1, "two requests in flight"
        duration, outcome = self.script.pop(0) if self.script else (0.05, EMPTY)
        await self.t.sleep(duration)
        self.in_flight -= 1
        if isinstance(outcome, BaseException):
            if isinstance(outcome, ImdsError) and outcome.status is not None:
                self.first_call_pending = False
            raise outcome
        self.first_call_pending = False
        date = self.t.wall() + timedelta(seconds=self.skew)
        return FetchResult(outcome, 304 if outcome is None else 200, duration, date, self.t.now)

    def forget_etag(self) -> None:
        self.forgot += 1


async def take(poller: Poller, count: int, timeout: float = 3.0) -> list[PollResult]:
    """The next ``count`` results of a fresh loop, then the loop is closed."""
    results = poller.results()
    try:
        return [await asyncio.wait_for(results.__anext__(), timeout) for _ in range(count)]
    finally:
        await results.aclose()  # type: ignore[attr-defined]  # an async generator


def fake_poller(script: Sequence[tuple[float, Outcome]] | None = None, *, start: float = 0.0,
                **kwargs: Any) -> tuple[Poller, ScriptedClient, FakeTime]:
    t = FakeTime(start)
    client = ScriptedClient(t, script, skew=kwargs.pop("skew", 0.0))
    poller = Poller(client, mono=t.mono, sleep=t.sleep, wall=t.wall,  # type: ignore[arg-type]
                    **kwargs)
    return poller, client, t


# -- schedule ---------------------------------------------------------------------------------
@pytest.mark.parametrize("interval", [0.2, 1.0, 2.5])
async def test_ticks_stay_on_the_grid_however_long_answers_take(interval: float) -> None:
    durations = [0.1, 0.7, 0.35, 0.95, 0.01]
    script = [(d * interval, EMPTY) for d in durations * 6]
    poller, client, _ = fake_poller(script, start=1000.3, interval=interval)
    await take(poller, 30)
    assert client.starts == pytest.approx([1000.3 + k * interval for k in range(30)])


async def test_a_slow_answer_skips_missed_ticks_instead_of_catching_up() -> None:
    script: list[tuple[float, Outcome]] = [(2.5, EMPTY), (0.1, EMPTY), (0.1, EMPTY),
                                           *[(2.5, EMPTY)] * 4]
    poller, client, _ = fake_poller(script, interval=1.0)
    await take(poller, 7)
    # 0 ends at 2.5: ticks 1 and 2 are gone, the next poll is tick 3, then the grid again
    assert client.starts == pytest.approx([0, 3, 4, 5, 8, 11, 14])


async def test_failures_back_off_then_polling_returns_to_the_grid() -> None:
    failure = ServerError("the metadata service failed (500 Internal Server Error): x",
                          status=500)
    script: list[tuple[float, Outcome]] = [(0.1, EMPTY), *[(0.1, failure)] * 4, (0.1, EMPTY),
                                           (0.1, EMPTY)]
    backoff = Backoff(base=1.0, cap=4.0, random=lambda: 1.0)
    poller, client, _ = fake_poller(script, interval=1.0, backoff=backoff)
    results = await take(poller, 7)
    assert client.starts == pytest.approx([0, 1, 2.1, 4.2, 8.3, 12.4, 13])
    failed = results[1:5]
    assert [r.health.consecutive_failures for r in failed] == [1, 2, 3, 4]
    assert [r.health.next_attempt_in for r in failed] == pytest.approx([1, 2, 4, 4])
    assert all(r.health.state is ConnectionState.RETRYING and not r.fresh for r in failed)
    assert all(r.health.last_error == failure.message and r.error is failure for r in failed)
    assert all(r.document is EMPTY for r in failed)  # the latest known document stays
    assert failed[-1].health.last_success == results[0].health.last_success
    recovered = results[5].health
    assert recovered.state is ConnectionState.LIVE and recovered.consecutive_failures == 0
    assert recovered.last_error is None and recovered.next_attempt_in is None


async def test_backoff_never_polls_faster_than_the_interval() -> None:
    failure = ServerError("down", status=500)
    poller, client, _ = fake_poller([(0.0, failure)] * 3, interval=2.0,
                                    backoff=Backoff(base=0.1, cap=0.2))
    await take(poller, 3)
    assert client.starts == pytest.approx([0, 2, 4])


async def test_retry_after_is_honoured() -> None:
    limited = RateLimited("rate limited (429)", status=429, retry_after=7.0)
    poller, client, _ = fake_poller([(0.5, limited)], interval=1.0,
                                    backoff=Backoff(random=lambda: 0.0))
    results = await take(poller, 2)
    assert client.starts == pytest.approx([0, 7.5])
    assert results[0].health.next_attempt_in == pytest.approx(7.0)


@pytest.mark.parametrize(("slow", "expected"), [({}, 10.0), ({"slow_interval": 3.0}, 3.0),
                                                ({"slow_interval": 0.5}, 1.0)])
async def test_what_retrying_cannot_fix_is_asked_again_slowly(slow: dict[str, float],
                                                              expected: float) -> None:
    wrong = NotFound("not found (404): Not found.", status=404)
    poller, client, _ = fake_poller([(0.0, wrong), (0.0, wrong)], interval=1.0, **slow)
    results = await take(poller, 3)
    assert client.starts == pytest.approx([0, expected, 2 * expected])
    assert results[0].health.state is ConnectionState.RETRYING
    assert results[0].health.next_attempt_in == pytest.approx(expected)
    assert results[2].fresh and results[2].health.state is ConnectionState.LIVE


async def test_unreachable_is_its_own_state() -> None:
    down = Unreachable("nothing answers at http://169.254.169.254 — is this an Azure VM? "
                       "(connection refused)")
    poller, _, _ = fake_poller([(0.0, down)])
    assert poller.health.state is ConnectionState.ENABLING
    [result] = await take(poller, 1)
    assert result.health.state is ConnectionState.UNREACHABLE
    assert result.health.last_error is not None
    assert result.health.last_error.startswith("nothing answers at")
    assert result.health.first_call_pending  # nothing ever answered


async def test_an_unexpected_exception_is_a_failed_poll_not_a_dead_loop(
        caplog: pytest.LogCaptureFixture) -> None:
    poller, client, _ = fake_poller([(0.1, RuntimeError("boom\nsecond line")), (0.1, EMPTY)],
                                    backoff=Backoff(random=lambda: 1.0))
    results = await take(poller, 2)
    error = results[0].error
    assert error is not None and error.message == "internal error: RuntimeError: boom"
    assert not results[0].fresh and results[0].health.state is ConnectionState.RETRYING
    assert client.starts[1] == pytest.approx(1.1)  # backed off, not the 10 s slow pace
    assert results[1].fresh
    assert "unexpected error while polling" in caplog.text


async def test_a_broken_tracker_does_not_end_polling() -> None:
    class Broken:
        def update(self, doc: Document, seen_at: datetime, **_: Any) -> list[Any]:
            raise KeyError("tracker bug")

    poller, _, _ = fake_poller(tracker=Broken())
    results = await take(poller, 2)
    assert all(r.error is not None and "KeyError" in r.error.message for r in results)


async def test_a_success_fills_the_health_and_runs_the_tracker() -> None:
    poller, _, _ = fake_poller([(0.25, ONE_EVENT), (0.1, None), (0.1, GONE)], skew=-42.0)
    first, unchanged, gone = await take(poller, 3)
    assert first.fresh and first.document is ONE_EVENT and first.error is None
    # The service's clock is 42 s behind this VM's: times are stamped in the service's.
    assert first.seen_at == WALL + timedelta(seconds=0.25 - 42)
    health = first.health
    assert health.state is ConnectionState.LIVE and not health.first_call_pending
    assert health.latency == 0.25 and health.last_success == first.seen_at
    assert health.last_success_mono == pytest.approx(0.25)
    assert health.clock_skew == pytest.approx(-42.0)
    assert [(c.kind, c.event_id, c.initial) for c in first.changes] == [
        (ChangeKind.APPEARED, FREEZE_ID, True)]
    # 304: a success that keeps the previous document and changes nothing
    assert unchanged.fresh and unchanged.document is ONE_EVENT and unchanged.changes == ()
    assert unchanged.details["unchanged"] is True
    assert [c.kind for c in gone.changes] == [ChangeKind.CANCELLED]
    assert poller.document is GONE and poller.tracker.incarnation == 3


async def test_a_304_with_nothing_known_asks_again_in_full() -> None:
    poller, client, _ = fake_poller([(0.1, None), (0.1, ONE_EVENT)])
    [result] = await take(poller, 1)
    assert client.forgot == 1 and len(client.starts) == 2
    assert result.fresh and result.document is ONE_EVENT


@pytest.mark.parametrize("interval", [0.19, 0.0, -1.0, float("nan"), float("inf"), 300.5, 1e9])
def test_an_interval_outside_what_imds_allows_is_refused(interval: float) -> None:
    with pytest.raises(ValueError) as caught:
        Poller(ScriptedClient(FakeTime()), interval=interval)  # type: ignore[arg-type]
    assert str(caught.value).startswith("the interval must be 0.2 to 300 seconds")
    assert str(caught.value).endswith(f"got {interval:g}")


@pytest.mark.parametrize("interval", [0.2, 300.0])
def test_the_interval_bounds_themselves_are_accepted(interval: float) -> None:
    assert Poller(ScriptedClient(FakeTime()), interval=interval).interval == interval  # type: ignore[arg-type]


async def test_one_loop_per_poller() -> None:
    poller, _, _ = fake_poller()
    first = poller.results()
    await first.__anext__()
    second = poller.results()
    with pytest.raises(RuntimeError, match="already running"):
        await second.__anext__()
    await first.aclose()  # type: ignore[attr-defined]  # an async generator
    assert (await take(poller, 1))[0].fresh  # free again once the first loop ended


# -- against the emulator ---------------------------------------------------------------------
@pytest.fixture
async def emulator_poller(make_emulator: MakeEmulator, make_client: MakeClient
                          ) -> AsyncIterator[MakePoller]:
    def make(scenario: str = "live-migration", *, emulator: dict[str, Any] | None = None,
             client: dict[str, Any] | None = None, **kwargs: Any) -> tuple[Poller, Emulator]:
        emu = make_emulator(scenario, **(emulator or {}))
        kwargs.setdefault("interval", 0.2)
        kwargs.setdefault("backoff", Backoff(base=0.05, cap=0.1))
        return Poller(make_client(emu.url, **(client or {})), **kwargs), emu

    yield make


async def test_health_goes_enabling_live_retrying_unreachable_live(
        emulator_poller: MakePoller) -> None:
    poller, emulator = emulator_poller(emulator={"faults": parse_faults("first-delay=0.4")})
    assert poller.health.state is ConnectionState.ENABLING
    assert poller.health.first_call_pending
    results = poller.results()
    try:
        live = await asyncio.wait_for(results.__anext__(), 3)
        assert live.health.state is ConnectionState.LIVE and live.fresh
        assert not live.health.first_call_pending and live.health.latency is not None
        assert live.health.latency >= 0.35

        emulator.set_faults(parse_faults("500=1"))
        failing = await asyncio.wait_for(results.__anext__(), 3)
        assert failing.health.state is ConnectionState.RETRYING
        assert isinstance(failing.error, ServerError)
        assert failing.health.last_error is not None
        assert failing.health.last_error.startswith("the metadata service failed (500")
        assert failing.document is live.document and failing.health.consecutive_failures == 1

        await asyncio.to_thread(emulator.stop)
        down = await asyncio.wait_for(results.__anext__(), 3)
        assert down.health.state is ConnectionState.UNREACHABLE
        assert down.health.last_error == (f"nothing answers at {emulator.url} — is this an "
                                          "Azure VM? (connection refused)")
        assert down.health.consecutive_failures == 2 and down.health.next_attempt_in

        emulator.set_faults(None)
        await asyncio.to_thread(emulator.start)  # the same port again
        back = await asyncio.wait_for(results.__anext__(), 3)
        assert back.health.state is ConnectionState.LIVE and back.fresh
        assert back.health.consecutive_failures == 0 and back.health.last_error is None
        assert back.health.last_success is not None and live.health.last_success is not None
        assert back.health.last_success > live.health.last_success
    finally:
        await results.aclose()  # type: ignore[attr-defined]  # an async generator


@pytest.mark.parametrize(("faults", "per_poll"), [("idle-close=0.3", 1), ("idle-drop=0.3", 2)])
async def test_polls_after_the_server_dropped_the_idle_connection_just_succeed(
        emulator_poller: MakePoller, faults: str, per_poll: int) -> None:
    # Polls 0.5 s apart, and the server ends connections idle for 0.3 s: closed before
    # the next poll (idle-close) or just as it is sent (idle-drop). Neither is an outage.
    poller, emulator = emulator_poller(interval=0.5, emulator={"faults": parse_faults(faults)})
    results = poller.results()
    try:
        seen = [await asyncio.wait_for(results.__anext__(), 3) for _ in range(4)]
    finally:
        await results.aclose()  # type: ignore[attr-defined]  # an async generator
    assert all(r.fresh and r.error is None for r in seen)
    assert all(r.health.state is ConnectionState.LIVE for r in seen)
    assert seen[-1].health.consecutive_failures == 0 and seen[-1].health.last_error is None
    assert len(gets(emulator)) == 1 + 3 * per_poll


async def test_no_pile_up_when_answers_are_slower_than_the_interval(
        make_emulator: MakeEmulator, make_client: MakeClient, relay: MakeRelay) -> None:
    emulator = make_emulator(faults=parse_faults("slow=0.5"))
    through = await relay(emulator.url)
    poller = Poller(make_client(through.url), interval=0.2)
    results = poller.results()
    try:
        for _ in range(4):
            result = await asyncio.wait_for(results.__anext__(), PATIENCE)
            assert result.fresh
    finally:
        await results.aclose()  # type: ignore[attr-defined]  # an async generator
    sent = through.request_times("GET")
    # one request per slow answer (plus the wait for the next free tick), not one per
    # 0.2 s tick, and never a second one while the first is unanswered
    assert len(sent) == len(gets(emulator)) == 4
    assert all(b - a >= 0.5 for a, b in itertools.pairwise(sent))


async def test_the_tracker_tells_the_documented_story(emulator_poller: MakePoller,
                                                      clock: ManualClock) -> None:
    def wall() -> datetime:
        return datetime.fromtimestamp(clock(), timezone.utc)

    poller, _ = emulator_poller(wall=wall)
    results = poller.results()
    story = []
    try:
        for advance in (0, 61, 900, 200):  # empty, Scheduled, Started, gone
            clock.advance(advance)
            result = await asyncio.wait_for(results.__anext__(), 3)
            assert result.fresh and result.seen_at == wall()
            assert result.health.clock_skew is not None and abs(result.health.clock_skew) < 0.1
            story.append([(c.kind, c.event_id) for c in result.changes])
    finally:
        await results.aclose()  # type: ignore[attr-defined]  # an async generator
    assert story == [[], [(ChangeKind.APPEARED, FREEZE_ID)], [(ChangeKind.STARTED, FREEZE_ID)],
                     [(ChangeKind.COMPLETED, FREEZE_ID)]]


async def test_a_304_is_a_success_with_the_previous_document(emulator_poller: MakePoller) -> None:
    poller, emulator = emulator_poller(emulator={"etag": True})
    first, second = await take(poller, 2)
    assert second.fresh and second.details["status"] == 304 and second.changes == ()
    assert second.document is first.document and first.document is not None
    assert second.health.state is ConnectionState.LIVE
    assert gets(emulator)[1].headers.get("if-none-match") == '"1"'


@pytest.mark.parametrize("skew", [30, -90, 0])
async def test_clock_skew_is_measured_from_the_date_header(emulator_poller: MakePoller,
                                                           skew: int) -> None:
    poller, _ = emulator_poller(emulator={"faults": parse_faults(f"skew={skew}"),
                                          "clock": time.time})
    [result] = await take(poller, 1)
    # Date has whole seconds, so the measure reads up to 1 s low
    assert result.health.clock_skew is not None
    assert skew - 1.2 < result.health.clock_skew <= skew + 0.1


async def test_poll_now_polls_at_once_even_during_a_backoff(emulator_poller: MakePoller) -> None:
    # A backoff of an hour: the answer can only come before it ends through poll_now.
    waits: list[float] = []
    waiting = asyncio.Event()

    async def sleep(delay: float) -> None:  # the real sleep, and a sign that it began
        waits.append(delay)
        waiting.set()
        await asyncio.sleep(delay)

    poller, emulator = emulator_poller(interval=5.0, backoff=Backoff(base=3600, cap=3600),
                                       emulator={"faults": parse_faults("500=1")}, sleep=sleep)
    results = poller.results()
    try:
        failed = await asyncio.wait_for(results.__anext__(), 30)
        assert failed.health.next_attempt_in is not None
        assert failed.health.next_attempt_in > 60  # far beyond any wait of this test
        emulator.set_faults(None)
        waiting.clear()
        pending = asyncio.ensure_future(results.__anext__())
        await asyncio.wait_for(waiting.wait(), 30)  # the poller is waiting out the hour
        assert waits[-1] > 60
        assert not pending.done() and len(gets(emulator)) == 1
        poller.poll_now()
        recovered = await asyncio.wait_for(pending, 30)
        assert recovered.fresh and len(gets(emulator)) == 2
    finally:
        await results.aclose()  # type: ignore[attr-defined]  # an async generator


async def test_poll_now_ends_the_loops_own_wait(emulator_poller: MakePoller) -> None:
    # No sleep of the test's: the poller's own timer, which poll_now must cut short.
    poller, emulator = emulator_poller(interval=300.0)
    results = poller.results()
    try:
        await asyncio.wait_for(results.__anext__(), 30)
        pending = asyncio.ensure_future(results.__anext__())
        await asyncio.sleep(0.2)
        assert not pending.done() and len(gets(emulator)) == 1  # waiting out the 300 s
        poller.poll_now()
        second = await asyncio.wait_for(pending, 30)
        assert second.fresh and len(gets(emulator)) == 2
    finally:
        await results.aclose()  # type: ignore[attr-defined]  # an async generator


async def test_poll_now_during_a_request_is_folded_into_it(
        make_emulator: MakeEmulator, make_client: MakeClient, relay: MakeRelay) -> None:
    emulator = make_emulator(faults=parse_faults("slow=0.3"))
    through = await relay(emulator.url)
    poller = Poller(make_client(through.url), interval=5.0)
    results = poller.results()
    try:
        first = asyncio.ensure_future(results.__anext__())
        for _ in range(5):  # an impatient operator
            await asyncio.sleep(0.04)
            poller.poll_now()
        await asyncio.wait_for(first, 3)
        second = asyncio.ensure_future(results.__anext__())
        await asyncio.sleep(0.5)
        assert not second.done() and len(gets(emulator)) == 1
        poller.poll_now()
        assert (await asyncio.wait_for(second, 2)).fresh
    finally:
        await results.aclose()  # type: ignore[attr-defined]  # an async generator
    sent = through.request_times("GET")
    assert len(sent) == 2 and sent[1] - sent[0] >= 0.8


# -- never backing off into blindness ---------------------------------------------------------
@pytest.mark.parametrize("urgent", [False, True])
async def test_near_an_event_of_this_vm_the_wait_between_tries_stays_short(urgent: bool) -> None:
    failure = ServerError("the metadata service failed (500 Internal Server Error): x",
                          status=500)
    script: list[tuple[float, Outcome]] = [(0.01, EMPTY), *[(0.01, failure)] * 8]
    poller, client, _ = fake_poller(script, interval=1.0, urgent=lambda: urgent,
                                    backoff=Backoff(base=0.5, cap=30.0, random=lambda: 1.0))
    results = await take(poller, 9)
    waits = [b - a for a, b in zip(client.starts[1:], client.starts[2:], strict=False)]
    if urgent:
        assert max(waits) == pytest.approx(5.0, abs=0.05)  # max(interval, URGENT_CAP)
    else:
        assert max(waits) > 15.0  # the backoff grows as it would for a quiet VM
    assert results[-1].health.next_attempt_mono is not None


async def test_retry_after_still_wins_over_the_urgent_cap() -> None:
    busy = RateLimited("too many requests", status=429, retry_after=12.0)
    poller, client, _ = fake_poller([(0.01, EMPTY), (0.01, busy)], interval=1.0,
                                    urgent=lambda: True)
    await take(poller, 3)
    assert client.starts[2] - client.starts[1] >= 12.0


async def test_an_answer_after_failures_or_a_long_silence_says_why_it_may_have_missed() -> None:
    failure = ServerError("the metadata service failed (500 Internal Server Error): x",
                          status=500)
    poller, _, _ = fake_poller([(0.01, EMPTY), (0.01, failure), (0.01, failure),
                                (0.01, ONE_EVENT), (9.0, GONE)], interval=1.0)
    results = await take(poller, 5)
    assert [r.gap for r in results[:3]] == [None, None, None]
    assert results[3].gap is not None and results[3].gap.startswith("2 polls failed")
    assert results[4].gap is not None and results[4].gap.startswith("no answer for ")
    assert [c.kind for c in results[4].changes] == [ChangeKind.GONE]


def test_live_turns_stale_by_itself_and_the_next_try_counts_down() -> None:
    health = Health(state=ConnectionState.LIVE, last_success_mono=100.0, stale_after=3.0)
    assert health.at(102.9).state is ConnectionState.LIVE
    assert health.at(103.1).state is ConnectionState.STALE and health.is_stale(103.1)
    failing = Health(state=ConnectionState.RETRYING, last_success_mono=100.0,
                     next_attempt_mono=110.0)
    assert failing.at(104.0).next_attempt_in == pytest.approx(6.0)
    assert failing.at(104.0).state is ConnectionState.RETRYING


async def test_the_same_document_again_is_not_tracked_but_one_after_another_is() -> None:
    """The client hands back the very document of the last answer for the same bytes:
    the tracker is not asked (it would compare the document with itself), yet the answer
    is a fresh one that moves the health on. The same object after a different one in
    between is tracked like any other answer: it brings the event back."""
    class Counting(Tracker):
        def __init__(self) -> None:
            super().__init__()
            self.fed: list[Document] = []

        def update(self, doc: Document, seen_at: datetime, **kwargs: Any) -> list[Change]:
            self.fed.append(doc)
            return super().update(doc, seen_at, **kwargs)

    tracker = Counting()
    script: list[tuple[float, Outcome]] = [(0.1, ONE_EVENT), (0.1, ONE_EVENT), (0.1, GONE),
                                           (0.1, ONE_EVENT), (0.1, ONE_EVENT)]
    poller, _, _ = fake_poller(script, tracker=tracker)
    results = await take(poller, 5)
    assert tracker.fed == [ONE_EVENT, GONE, ONE_EVENT]
    assert [[c.kind for c in r.changes] for r in results] == [
        [ChangeKind.APPEARED], [], [ChangeKind.CANCELLED], [ChangeKind.ANOMALY,
                                                            ChangeKind.APPEARED], []]
    again = results[1]
    assert again.fresh and again.document is ONE_EVENT and again.details["unchanged"] is True
    assert again.health.last_success is not None and again.health.last_success_mono is not None
    assert again.health.last_success > results[0].health.last_success
    assert poller.document is ONE_EVENT
