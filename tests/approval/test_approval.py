"""The Approver against the real emulator over loopback: refuse, record, post, record."""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from setui.approval.approver import Approver
from setui.approval.outcome import ApprovalOutcome
from setui.approval.snapshot import confirmed
from setui.core.client import ApprovalResult, FetchResult, ImdsClient
from setui.core.model import Document
from setui.emulator.faults import Faults
from setui.emulator.server import Emulator, ManualClock
from setui.store import Store
from setui.system.identity import Identity
from tests.support.emulated import freeze_announced, posts

EVENT_ID = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"  # the documented live migration
WHO = Identity(user="alice", ssh_client="10.1.2.3", host="vm-web-0")
NOW = datetime(2024, 5, 14, 9, 30, tzinfo=timezone.utc)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def emulator(clock: ManualClock) -> Iterator[Emulator]:
    with freeze_announced(clock) as emu:
        yield emu


@pytest.fixture
async def client(emulator: Emulator) -> AsyncIterator[ImdsClient]:
    imds = ImdsClient(emulator.url)
    try:
        yield imds
    finally:
        await imds.aclose()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open_dir(tmp_path / "data") as opened:
        yield opened


def approver(client: Any, store: Store | None, **kw: Any) -> Approver:
    """An Approver whose operator accepted that the Freeze also starts for WestNO_1 (as
    typing "yes", or --allow-other-vms, does)."""
    made = Approver(client, None if store is None else store.audit_log,
                    endpoint="http://imds", identity=WHO, wall=lambda: NOW,
                    vm_name="WestNO_0", **kw)
    made.approve = functools.partial(made.approve, allow_other_vms=True)  # type: ignore[method-assign]
    return made


async def current(client: ImdsClient) -> Document:
    document = (await client.fetch()).document
    assert document is not None
    return document


async def test_approve_posts_the_documented_request_and_records_both_halves(
        client: ImdsClient, store: Store, emulator: Emulator, clock: ManualClock) -> None:
    document = await current(client)
    [outcome] = await approver(client, store).approve([EVENT_ID], document)
    assert outcome.approved and not outcome.refused and outcome.status == 200
    assert "HTTP 200" in outcome.message and outcome.latency is not None
    [post] = posts(emulator)
    assert post.headers["metadata"] == "true"
    assert post.query["api-version"] == "2020-07-01"
    assert json.loads(post.body) == {"StartRequests": [{"EventId": EVENT_ID}]}
    outcome_record, attempt = store.audit_log.records()
    assert outcome.record_seq == outcome_record.seq
    assert (attempt.action, outcome_record.action) == ("approve-attempt", "approve-outcome")
    assert outcome_record.attempt_seq == attempt.seq and attempt.has_outcome
    assert outcome_record.status == 200 and outcome_record.error is None
    assert outcome_record.latency_ms is not None and outcome_record.latency_ms >= 0
    assert attempt.incarnation == document.incarnation == 2
    assert attempt.event is not None
    assert attempt.event["EventType"] == "Freeze"
    assert attempt.event["EventStatus"] == "Scheduled"
    assert attempt.event["Resources"] == ["WestNO_0", "WestNO_1"]
    assert attempt.event["NotBefore"].endswith("GMT")
    assert attempt.event["EventSource"] == "Platform"
    assert attempt.event["DurationInSeconds"] == 5
    assert (attempt.user, attempt.ssh_client, attempt.host) == ("alice", "10.1.2.3", "vm-web-0")
    assert attempt.time == NOW and attempt.endpoint == "http://imds"
    assert attempt.details["event_ids"] == [EVENT_ID]
    assert store.audit_log.verify().ok
    clock.advance(2)  # the emulator starts an approved event a second later
    started = (await current(client)).event(EVENT_ID)
    assert started is not None and started.is_started


class SpyClient:
    """The real client, but it looks at the database (from another connection) first."""

    def __init__(self, real: ImdsClient, path: Path) -> None:
        self.real = real
        self.path = path
        self.api_version = real.api_version
        self.timeout = real.timeout
        self.approval_retry = real.approval_retry
        self.seen_before_post: list[tuple[str, str]] = []

    async def fetch(self) -> FetchResult:
        return await self.real.fetch()

    async def approve(self, event_ids: Sequence[str], *, incarnation: int | None = None,
                      **_: Any) -> ApprovalResult:
        conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
        self.seen_before_post = conn.execute(
            "SELECT action, event_id FROM audit ORDER BY seq").fetchall()
        conn.close()
        return await self.real.approve(event_ids, incarnation=incarnation)


async def test_the_attempt_is_committed_before_the_post(client: ImdsClient, store: Store,
                                                         emulator: Emulator) -> None:
    spy = SpyClient(client, store.path)
    [outcome] = await approver(spy, store).approve([EVENT_ID], await current(client))
    assert outcome.approved
    assert spy.seen_before_post == [("approve-attempt", EVENT_ID)]
    assert len(posts(emulator)) == 1


@pytest.mark.parametrize("kind", ["unknown", "started", "no-document", "empty"])
async def test_refusals_post_nothing_and_are_recorded(
        client: ImdsClient, store: Store, emulator: Emulator, clock: ManualClock,
        kind: str) -> None:
    event_id, words = {"unknown": ("NOT-AN-EVENT", "is not in the current document"),
                       "started": (EVENT_ID, "has already started"),
                       "no-document": (EVENT_ID, "no current events document"),
                       "empty": ("  ", "empty EventId")}[kind]
    if kind == "started":
        clock.advance(15 * 60)  # NotBefore passes: it starts without approval
    document = None if kind == "no-document" else await current(client)
    [outcome] = await approver(client, store).approve([event_id], document)
    assert outcome.refused and not outcome.approved and words in outcome.message
    assert posts(emulator) == []
    [record] = store.audit_log.records()
    assert record.action == "refused" and words in (record.error or "")
    assert outcome.record_seq == record.seq


@pytest.mark.parametrize("setup, words", [
    ("read-only", "read-only"),
    ("no-store", "the data directory is read-only"),
])
async def test_refused_without_a_writable_audit_log(client: ImdsClient, emulator: Emulator,
                                                   setup: str, words: str) -> None:
    if setup == "read-only":
        who = approver(client, None, read_only=True)
    else:
        who = approver(client, None, store_problem="the data directory is read-only")
    document = await current(client)
    assert words in (who.refusal(EVENT_ID, document) or "")
    [outcome] = await who.approve([EVENT_ID], document)
    assert outcome.refused and words in outcome.message and outcome.record_seq is None
    assert posts(emulator) == []


async def test_a_store_opened_read_only_refuses(client: ImdsClient, emulator: Emulator,
                                                tmp_path: Path) -> None:
    Store.open_dir(tmp_path / "d").close()
    with Store.open_dir(tmp_path / "d", readonly=True) as reader:
        [outcome] = await approver(client, reader).approve([EVENT_ID], await current(client))
    assert outcome.refused and "read-only" in outcome.message
    assert posts(emulator) == []


async def test_a_locked_audit_log_refuses_and_posts_nothing(
        client: ImdsClient, emulator: Emulator, tmp_path: Path) -> None:
    with Store.open_dir(tmp_path / "data", timeout=0.2) as store:
        holder = sqlite3.connect(store.path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        try:
            [outcome] = await approver(client, store).approve([EVENT_ID],
                                                              await current(client))
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert outcome.refused and not outcome.approved
        assert "nothing was sent" in outcome.message and "locked" in outcome.message
        assert posts(emulator) == []
        assert store.audit_log.records() == []


async def test_a_rejected_approval_is_recorded_as_failed(
        client: ImdsClient, store: Store, emulator: Emulator) -> None:
    emulator.set_faults(Faults(approve_statuses={400: 1.0}))
    [outcome] = await approver(client, store).approve([EVENT_ID], await current(client))
    assert not outcome.approved and not outcome.refused and outcome.status == 400
    assert outcome.message.startswith("not approved:")
    assert len(posts(emulator)) == 1
    record = store.audit_log.records()[0]
    assert record.action == "approve-outcome" and record.status == 400 and record.error
    assert record.details.get("kind") == "rejected"


async def test_several_events_one_post_and_refusals_apart(
        client: ImdsClient, store: Store, emulator: Emulator) -> None:
    document = await current(client)
    outcomes = await approver(client, store).approve(
        [EVENT_ID.lower(), "NOPE", EVENT_ID, EVENT_ID.lower()], document)
    assert [(o.event_id, o.approved, o.refused) for o in outcomes] == [
        (EVENT_ID.lower(), True, False), ("NOPE", False, True), (EVENT_ID, False, True)]
    assert "already in this approval" in outcomes[2].message
    [post] = posts(emulator)
    assert json.loads(post.body) == {"StartRequests": [{"EventId": EVENT_ID}]}
    actions = [(r.action, r.event_id) for r in store.audit_log.records(oldest_first=True)]
    assert actions == [("refused", "NOPE"), ("refused", EVENT_ID),
                       ("approve-attempt", EVENT_ID), ("approve-outcome", EVENT_ID)]


async def test_cancel_is_recorded(client: ImdsClient, store: Store,
                                  emulator: Emulator) -> None:
    document = await current(client)
    assert approver(client, store).record_cancel([EVENT_ID], document) is True
    [record] = store.audit_log.records()
    assert record.action == "dismissed" and record.event is not None
    assert record.incarnation == document.incarnation
    assert approver(client, None).record_cancel([EVENT_ID], document) is False
    assert posts(emulator) == []


class BrokenClient:
    api_version = "2020-07-01"

    def __init__(self, real: ImdsClient) -> None:
        self.fetch = real.fetch
        self.timeout = real.timeout
        self.approval_retry = real.approval_retry

    async def approve(self, event_ids: Sequence[str], *, incarnation: int | None = None,
                      **_: Any) -> ApprovalResult:
        raise RuntimeError("boom")


async def test_an_unexpected_error_is_an_outcome_not_a_crash(client: ImdsClient,
                                                             store: Store) -> None:
    """Nobody knows what left before setui's own failure: the outcome is unknown."""
    [outcome] = await approver(BrokenClient(client), store).approve([EVENT_ID],
                                                              await current(client))
    assert not outcome.approved and outcome.unknown
    assert "RuntimeError: boom" in outcome.message
    record = store.audit_log.records()[0]
    assert "RuntimeError: boom" in (record.error or "")
    assert record.details["outcome"] == "unknown" and record.details["ending"] == "failed"


def test_identity_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    me = Identity.current({"SSH_CONNECTION": "10.1.2.3 50000 10.0.0.4 22", "USER": "spoof",
                           "LOGNAME": "spoof", "LNAME": "spoof", "USERNAME": "spoof"})
    assert me.ssh_client == "10.1.2.3" and me.user and me.host
    # The account comes from the process's uid, never from variables anyone can set.
    assert me.user != "spoof"
    assert me.label == f"{me.user} from 10.1.2.3 (claimed) on {me.host}"
    local = Identity.current({})
    assert local.ssh_client is None and local.label == f"{local.user} on {local.host}"
    sudo = Identity("root", None, "vm", sudo_user="alice")
    assert sudo.label == "root (sudo by alice) on vm"


def test_outcome_shape_is_the_agreed_one() -> None:
    assert set(ApprovalOutcome.__dataclass_fields__) == {
        "event_id", "approved", "refused", "status", "message", "latency", "record_seq",
        "ask_again", "changes", "unknown"}


async def test_check_is_a_dry_run_that_writes_and_sends_nothing(
        client: ImdsClient, store: Store, emulator: Emulator) -> None:
    """What approve would decide, for the agent's --dry-run: the same checks, the
    document read once more, and nothing recorded or posted."""
    document = await current(client)
    who = approver(client, store)
    [ready, unknown] = await who.check([EVENT_ID, "NOT-AN-EVENT"], document,
                                       allow_other_vms=True)
    assert ready.reason is None and ready.seen is not None
    assert ready.seen.snapshot["EventType"] == "Freeze"
    assert unknown.reason is not None and "is not in the current document" in unknown.reason
    [beyond] = await who.check([EVENT_ID], document)  # WestNO_1 too, not allowed
    assert beyond.reason is not None and "add --allow-other-vms" in beyond.reason
    assert posts(emulator) == [] and store.audit_log.records() == []
    # The operator's read, and one more by the first check (the second refused before).
    assert len([r for r in emulator.requests if r.method == "GET"]) == 2


async def test_a_send_held_back_for_other_vms_names_the_approvers_consent(
        client: ImdsClient, store: Store) -> None:
    """The still-as-shown rule (snapshot.difference) says what would accept an event of
    other VMs in the approver's own words, as its refusal does: the agent's rule key, not
    the command line's flag. Here the event was confirmed as it is (WestNO_1 too) while
    the caller's document showed it for this VM alone: the re-read holds it back."""
    document = await current(client)
    seen = confirmed(document, EVENT_ID)
    assert seen is not None
    alone = replace(document, events=tuple(
        replace(e, resources=("WestNO_0",)) for e in document.events))
    words = "other_vms = true in the rule (rule r does not say it)"
    agents = Approver(client, store.audit_log, endpoint="http://imds", identity=WHO,
                      vm_name="WestNO_0", consent=words)
    [held] = await agents.check([EVENT_ID], alone, confirmed_as={EVENT_ID: seen})
    assert held.reason == f"it also starts for 1 other VM: WestNO_1; it needs {words}"
    plain = Approver(client, store.audit_log, endpoint="http://imds", identity=WHO,
                     vm_name="WestNO_0")
    [held] = await plain.check([EVENT_ID], alone, confirmed_as={EVENT_ID: seen})
    assert held.reason is not None and held.reason.endswith("it needs --allow-other-vms")
