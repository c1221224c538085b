"""The Approver's tries, against the scripted metadata service (tests/support/scripted.py) over
loopback: each retry is checked as the first send was, and what became of an approval
is told as far as it is known: approved, failed, or unknown when a try may have arrived
and no answer says what the service made of it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from setui.approval.approver import Approver
from setui.approval.outcome import ApprovalOutcome, Progress
from setui.core.backoff import Backoff
from setui.core.client import ImdsClient
from setui.core.tracker import ChangeKind
from setui.emulator.faults import parse_faults
from setui.emulator.scenario import load_scenario
from setui.emulator.server import Emulator, ManualClock
from setui.monitor import Monitor
from setui.store import APPROVE_OUTCOME, AuditRecord, Store
from setui.system.identity import Identity
from tests.support.scripted import FAR, Answer, Drop, Hang, Refuse, ScriptedImds, document, event
from tests.support.waiting import PATIENCE, until

MINE = "F02C2EDE-3B1C-4D5E-9F00-0123456789AB"
ELEVEN = ["web-0", *(f"web-{i}" for i in range(1, 11))]
WHO = Identity(user="alice", ssh_client=None, host="vm-web-0")
FAST = Backoff(base=0.02, cap=0.05)  # real waits between tries, kept short


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open_dir(tmp_path / "data") as opened:
        yield opened


def client_of(imds: ScriptedImds, timeout: float = 2.0) -> ImdsClient:
    return ImdsClient(imds.url, timeout=timeout, enabling_timeout=timeout, backoff=FAST,
                      rate=50, burst=20)


async def approve(imds: ScriptedImds, store: Store, *, timeout: float = 2.0,
                  again: bool = False, progress: Any = None,
                  **kw: Any) -> ApprovalOutcome:
    """Read the document as an operator would have seen it, then approve MINE."""
    async with client_of(imds, timeout) as client:
        shown = (await client.fetch()).document
        approver = Approver(client, store.audit_log, endpoint=imds.url, identity=WHO,
                            vm_name="web-0", wall=lambda: datetime.now(timezone.utc), **kw)
        [outcome] = await approver.approve([MINE], shown, again=again, progress=progress)
        return outcome


def outcome_record(store: Store) -> AuditRecord:
    return next(r for r in store.audit_log.records() if r.action == APPROVE_OUTCOME)


@pytest.mark.parametrize("ending, changed", [
    ("changed", document(8, event(MINE, ELEVEN, kind="Redeploy"))),
    ("started", document(8, event(MINE, ["web-0"], status="Started"))),
    ("left", document(8)),
    ("repeated", document(8, event(MINE, ["web-0"]), event(MINE, ELEVEN, kind="Redeploy"))),
])
async def test_a_retry_is_checked_as_the_first_send_was(
        scripted: ScriptedImds, store: Store, ending: str, changed: dict[str, Any]) -> None:
    """The first POST is answered 503 and, from that moment, the document differs: the
    retry is never sent, and the record says how the tries ended."""
    scripted.serve(document(7, event(MINE, ["web-0"])))
    scripted.on_posts(Answer(503, then=changed))
    outcome = await approve(scripted, store)
    assert not outcome.approved and not outcome.refused and not outcome.unknown
    assert len(scripted.posts()) == 1
    record = outcome_record(store)
    assert record.details["ending"] == ending and record.details["outcome"] == "failed"
    assert "nothing more was sent" in outcome.message
    if ending == "changed":  # the others cannot be approved as they are: nothing to ask
        assert outcome.ask_again and "type: Freeze -> Redeploy" in outcome.changes
    assert store.audit_log.claim(MINE, scripted.url) is None  # a 503 approved nothing: free again


async def test_a_timed_out_try_then_200_is_approved(scripted: ScriptedImds,
                                                    store: Store) -> None:
    scripted.serve(document(7, event(MINE, ["web-0"])))
    scripted.on_posts(Hang(), Answer(200))
    outcome = await approve(scripted, store, timeout=0.5)
    assert outcome.approved and outcome.status == 200
    assert len(scripted.posts()) == 2
    record = outcome_record(store)
    assert record.details["outcome"] == "approved" and record.details["attempts"] == 2
    first, second = record.details["tries"]
    assert first["may_have_arrived"] is True and second["status"] == 200


async def test_a_timed_out_try_then_giving_up_is_unknown_and_claims_the_event(
        scripted: ScriptedImds, store: Store) -> None:
    """The retry is answered 503 with a Retry-After past the 70 s an approval is tried
    for: the tries end, and the first may have arrived."""
    scripted.serve(document(7, event(MINE, ["web-0"])))
    scripted.on_posts(Hang(), Answer(503, retry_after=100))
    outcome = await approve(scripted, store, timeout=0.5)
    assert outcome.unknown and not outcome.approved and not outcome.refused
    assert outcome.message.startswith("outcome unknown: try 1 of 2 may have reached the "
                                      "service")
    record = outcome_record(store)
    assert record.details["outcome"] == "unknown" and record.details["ending"] == "gave-up"
    claim = store.audit_log.claim(MINE, scripted.url)
    assert claim is not None and claim.unknown
    assert "may already have been sent by alice" in claim.describe()
    again = await approve(scripted, store)
    assert again.refused and "may already have been sent" in again.message
    assert len(scripted.posts()) == 2
    assert (await approve(scripted, store, again=True)).approved
    assert len(scripted.posts()) == 3


async def test_a_connection_lost_after_the_request_left_is_unknown(
        scripted: ScriptedImds, store: Store) -> None:
    scripted.serve(document(7, event(MINE, ["web-0"])))
    scripted.on_posts(Drop(), Answer(400))
    outcome = await approve(scripted, store)
    assert outcome.unknown and "HTTP 400" in outcome.message
    record = outcome_record(store)
    assert record.details["outcome"] == "unknown" and record.status is None
    assert [t.get("status") for t in record.details["tries"]] == [None, 400]


async def test_a_refused_connection_cannot_have_arrived(scripted: ScriptedImds,
                                                        store: Store) -> None:
    """The service stops listening just after the last read before the POST: every try
    is refused before a byte of it leaves, so the approval failed (and claims nothing)."""
    scripted.serve(document(7, event(MINE, ["web-0"])))
    scripted.on_gets(Answer(200), Refuse())  # the operator's read, then the approver's
    outcome = await approve(scripted, store, deadline=0.5)
    assert not outcome.approved and not outcome.unknown
    assert scripted.posts() == []
    record = outcome_record(store)
    assert record.details["outcome"] == "failed" and record.details["ending"] == "gave-up"
    assert record.details["attempts"] >= 1
    assert not any(t.get("may_have_arrived") for t in record.details["tries"])
    assert store.audit_log.claim(MINE, scripted.url) is None


async def test_a_failed_read_before_a_retry_sends_nothing_that_round(
        scripted: ScriptedImds, store: Store) -> None:
    scripted.serve(document(7, event(MINE, ["web-0"])))
    scripted.on_gets(Answer(200), Answer(200), Answer(500))
    scripted.on_posts(Answer(503))
    outcome = await approve(scripted, store)
    assert outcome.approved
    assert len(scripted.posts()) == 2
    tries = outcome_record(store).details["tries"]
    assert tries[0]["status"] == 503 and "not sent" in tries[1]["held"]
    assert tries[2]["status"] == 200
    assert outcome_record(store).details["attempts"] == 2


async def interrupt(task: asyncio.Future[Any], store: Store) -> AuditRecord:
    """Stop the approval as Ctrl-C would; the outcome it recorded on its way out."""
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    record = outcome_record(store)
    assert record.details["ending"] == "interrupted"
    return record


async def test_interrupted_mid_request_is_unknown(scripted: ScriptedImds,
                                                  store: Store) -> None:
    scripted.serve(document(7, event(MINE, ["web-0"])))
    scripted.on_posts(Hang())
    task = asyncio.ensure_future(approve(scripted, store, timeout=PATIENCE))
    await until(lambda: bool(scripted.posts()), what="the POST")
    record = await interrupt(task, store)
    assert record.details["outcome"] == "unknown"
    assert "may have reached the service" in (record.error or "")
    assert store.audit_log.claim(MINE, scripted.url) is not None
    assert store.audit_log.verify().ok


async def test_interrupted_between_tries_after_an_answer_is_failed(
        scripted: ScriptedImds, store: Store) -> None:
    """Stopped while waiting to retry: the one POST was answered 503, nothing is in
    flight, so nothing can have approved it."""
    scripted.serve(document(7, event(MINE, ["web-0"])))
    scripted.on_posts(Answer(503, retry_after=30))
    waiting = asyncio.Event()

    def heard(progress: Progress) -> None:
        waiting.set()

    task = asyncio.ensure_future(approve(scripted, store, progress=heard))
    await asyncio.wait_for(waiting.wait(), PATIENCE)
    record = await interrupt(task, store)
    assert record.details["outcome"] == "failed"
    assert store.audit_log.claim(MINE, scripted.url) is None


async def test_an_early_start_is_linked_to_an_approval_of_unknown_outcome(
        scripted: ScriptedImds, store: Store) -> None:
    scripted.serve(document(7, event(MINE, ["web-0"])))
    scripted.on_posts(Hang(), Answer(400))
    await approve(scripted, store, timeout=0.5)
    async with client_of(scripted) as client:
        monitor = Monitor(client, endpoint=scripted.url, interval=0.2, store=store,
                          vm_name="web-0")
        updates = monitor.updates()
        try:
            await asyncio.wait_for(updates.__anext__(), PATIENCE)
            scripted.serve(document(8, event(MINE, ["web-0"], status="Started")))
            started = None
            while started is None:
                update = await asyncio.wait_for(updates.__anext__(), PATIENCE)
                started = next((c for c in update.result.changes
                                if c.kind is ChangeKind.STARTED), None)
        finally:
            await updates.aclose()
    assert "approval by alice at " in started.detail
    assert started.detail.endswith("UTC, outcome unknown: it may be what started it")


# -- the service's rule for another try (ImdsClient.approval_retry), kept by the Approver ------
@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with Emulator(load_scenario("quiet"), clock=ManualClock()) as emu:
        emu.pin_document(document(7, event(MINE, ["web-0"])))
        yield emu


async def approve_at(emulator: Emulator, store: Store, **kw: Any) -> ApprovalOutcome:
    async with ImdsClient(emulator.url, timeout=2.0, backoff=FAST, rate=100,
                          burst=100) as client:
        shown = (await client.fetch()).document
        approver = Approver(client, store.audit_log, endpoint=emulator.url, identity=WHO,
                            vm_name="web-0", **kw)
        [outcome] = await approver.approve([MINE], shown)
        return outcome


@pytest.mark.parametrize("code", [410, 429, 500, 503])
async def test_an_approval_is_tried_again_on_what_the_service_says_to_retry(
        scripted: ScriptedImds, store: Store, code: int) -> None:
    scripted.serve(document(7, event(MINE, ["web-0"])))
    scripted.on_posts(Answer(code), Answer(code))
    outcome = await approve(scripted, store)
    assert outcome.approved and outcome.message.endswith(", at try 3")
    assert len(scripted.posts()) == 3
    record = outcome_record(store)
    assert [t["status"] for t in record.details["tries"]] == [code, code, 200]
    assert record.details["attempts"] == 3


async def test_an_approval_rides_out_a_service_restart(emulator: Emulator,
                                                      store: Store) -> None:
    """The service goes away after the first try failed: each retry is held (the event
    cannot be checked) until it is back; then the check passes and one POST goes."""
    emulator.set_faults(parse_faults("approve-500=1"))
    heard: list[Progress] = []

    def stop_once(progress: Progress) -> None:
        heard.append(progress)
        if len(heard) == 1:
            emulator.stop()
        elif len(heard) == 3:
            emulator.set_faults(None)
            emulator.start()

    async with ImdsClient(emulator.url, timeout=2.0, backoff=FAST, rate=100,
                          burst=100) as client:
        shown = (await client.fetch()).document
        approver = Approver(client, store.audit_log, endpoint=emulator.url, identity=WHO,
                            vm_name="web-0")
        [outcome] = await approver.approve([MINE], shown, progress=stop_once)
    assert outcome.approved
    assert len([r for r in emulator.requests if r.method == "POST"]) == 2
    tries = outcome_record(store).details["tries"]
    assert tries[0]["status"] == 500 and all("held" in t for t in tries[1:-1])
    assert len(tries) >= 4 and tries[-1]["status"] == 200


async def test_an_approval_gives_up_at_its_deadline(emulator: Emulator,
                                                    store: Store) -> None:
    emulator.set_faults(parse_faults("approve-500=1"))
    outcome = await approve_at(emulator, store, deadline=0.4)
    assert not outcome.approved and not outcome.unknown
    record = outcome_record(store)
    attempts = record.details["attempts"]
    assert attempts >= 3 and record.details["ending"] == "gave-up"
    assert f"(approval gave up after {attempts} tries in " in outcome.message
    assert record.status == 500 and record.details["outcome"] == "failed"


async def test_a_retry_after_is_obeyed_and_never_waited_past_the_deadline(
        scripted: ScriptedImds, store: Store) -> None:
    scripted.serve(document(7, event(MINE, ["web-0"])))
    scripted.on_posts(Answer(429, retry_after=0.5), Answer(503, retry_after=100))
    heard: list[Progress] = []
    outcome = await approve(scripted, store, progress=heard.append)
    assert [p.next_in for p in heard] == [0.5]  # the second's 100 s is past the 70 s
    assert not outcome.approved and len(scripted.posts()) == 2
    assert outcome_record(store).details["ending"] == "gave-up"


@pytest.mark.parametrize("before, approved", [(timedelta(seconds=0.1), False),
                                              (timedelta(seconds=30), True)])
async def test_a_retry_is_never_waited_for_past_not_before(
        scripted: ScriptedImds, store: Store, before: timedelta, approved: bool) -> None:
    """The first POST is answered 503 with a Retry-After of 0.3 s. A tenth of a second
    before NotBefore, that wait reaches past it (Azure starts the event then by itself):
    no second try, and the outcome says why. Thirty seconds before, the retry goes."""
    not_before = datetime(2035, 1, 1, tzinfo=timezone.utc)
    scripted.serve(document(7, event(MINE, ["web-0"], not_before=FAR)))
    scripted.on_posts(Answer(503, retry_after=0.3))
    async with client_of(scripted) as client:
        shown = (await client.fetch()).document
        approver = Approver(client, store.audit_log, endpoint=scripted.url, identity=WHO,
                            vm_name="web-0", wall=lambda: not_before - before)
        [outcome] = await approver.approve([MINE], shown)
    if approved:
        assert outcome.approved and len(scripted.posts()) == 2
        return
    assert not outcome.approved, f"a retry waited past NotBefore: {outcome.message}"
    assert len(scripted.posts()) == 1
    assert "its NotBefore passes before the next try" in outcome.message
    record = outcome_record(store)
    assert record.details["ending"] == "stopped" and record.status == 503
