"""The API's approve as a client hears it: each try's progress, a held retry included,
and the outcome as far as it is known. The real server, Approver, IMDS client and
AgentClient over a real socket, against the scripted metadata service (tests/support/scripted.py);
the agent is stood in for by the parts the server reads, so that the approver's reads are
the only GETs the script answers (the whole agent is served in test_api_agent.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from setui.api.client import AgentClient
from setui.approval.outcome import HELD, ApprovalOutcome, Progress
from setui.approval.snapshot import confirmed
from setui.core.backoff import Backoff
from setui.core.client import ImdsClient
from setui.core.model import parse_document
from setui.monitor.state import MonitorState
from setui.store import APPROVE_OUTCOME, REFUSED, Store
from tests.support.api_helpers import agent_in_process
from tests.support.scripted import Answer, Drop, ScriptedImds, document, event

MINE = "F02C2EDE-3B1C-4D5E-9F00-0123456789AB"
T0 = datetime(2026, 11, 25, 19, 0, tzinfo=timezone.utc)
SHOWN = document(7, event(MINE, ["web-0"]))

@pytest.fixture
async def approve_through_api(tmp_path: Path, scripted: ScriptedImds,
                              ) -> AsyncIterator[tuple[Any, Store]]:
    """A server in this loop over a real socket; ``approve()`` approves MINE through a
    real client on a thread, as confirmed from the document shown, and returns the
    outcome and the progress frames heard."""
    scripted.serve(SHOWN)
    client = ImdsClient(scripted.url, timeout=10.0, enabling_timeout=10.0,
                        backoff=Backoff(base=0.02, cap=0.05), rate=100, burst=100)
    shown = parse_document(SHOWN)

    def run(path: Path) -> tuple[ApprovalOutcome, list[Progress]]:
        heard: list[Progress] = []
        with AgentClient.connect(path, timeout=10) as api:
            seen = confirmed(shown, MINE)
            assert seen is not None
            [outcome] = api.approve([MINE], {MINE: seen}, progress=heard.append)
        return outcome, heard

    with Store.open_dir(tmp_path / "data") as store:
        async with agent_in_process(tmp_path, store, endpoint=scripted.url, started=T0,
                                    state=MonitorState(document=shown), imds=client) as path:

            async def approve() -> tuple[ApprovalOutcome, list[Progress]]:
                return await asyncio.to_thread(run, path)

            yield approve, store
        await client.aclose()


def outcome_record(store: Store) -> Any:
    return next(r for r in store.audit_log.records() if r.action == APPROVE_OUTCOME)


async def test_each_try_reaches_the_client_a_held_retry_as_held(
        scripted: ScriptedImds, approve_through_api: tuple[Any, Store]) -> None:
    """The first POST is answered 503; the read before the retry fails, so that try is
    held (nothing sent); the next read passes and the POST is approved. The client hears
    both failed tries, the held one as held, and the outcome."""
    approve, store = approve_through_api
    scripted.on_posts(Answer(503))
    scripted.on_gets(Answer(200), Answer(500), Answer(200))  # before tries 1, 2 and 3
    outcome, heard = await approve()
    assert outcome.approved and outcome.message.endswith(", at try 3")
    assert [(p.attempt, p.status, p.kind) for p in heard] == [
        (1, 503, "server-error"), (2, None, HELD)]
    assert heard[1].last_error.startswith("not sent: the document could not be read again")
    assert len(scripted.posts()) == 2
    tries = outcome_record(store).details["tries"]
    assert [t["status"] for t in tries] == [503, None, 200] and "held" in tries[1]


async def test_an_outcome_nobody_knows_reaches_the_client_as_unknown(
        scripted: ScriptedImds, approve_through_api: tuple[Any, Store]) -> None:
    """The first POST is read and its connection closed unanswered (it may have
    arrived); the retry is answered 400. Not approved, and not failed either."""
    approve, store = approve_through_api
    scripted.on_posts(Drop(), Answer(400))
    outcome, heard = await approve()
    assert outcome.unknown and not outcome.approved and not outcome.refused
    assert outcome.message.startswith("outcome unknown: try 1 of 2 may have reached the "
                                      "service")
    assert [p.attempt for p in heard] == [1]
    assert outcome_record(store).details["outcome"] == "unknown"
    # nothing is sent again without again
    assert store.audit_log.claim(MINE, scripted.url) is not None


async def test_an_event_that_changed_since_the_client_confirmed_it_is_refused(
        tmp_path: Path, scripted: ScriptedImds) -> None:
    """The operator confirmed a Freeze; by the time the request reaches the agent, its
    document and the service's both say Reboot. The agent holds the approval against
    what the client confirmed, not against its own newer document: refused, nothing
    sent, the changes said and the operator asked again."""
    changed = document(8, event(MINE, ["web-0"], kind="Reboot"))
    scripted.serve(changed)
    client = ImdsClient(scripted.url, timeout=10.0, enabling_timeout=10.0,
                        backoff=Backoff(base=0.02, cap=0.05), rate=100, burst=100)
    seen = confirmed(parse_document(SHOWN), MINE)
    assert seen is not None

    def run(path: Path) -> ApprovalOutcome:
        with AgentClient.connect(path, timeout=10) as api:
            [outcome] = api.approve([MINE], {MINE: seen})
        return outcome

    with Store.open_dir(tmp_path / "data") as store:
        async with agent_in_process(tmp_path, store, endpoint=scripted.url, started=T0,
                                    state=MonitorState(document=parse_document(changed)),
                                    imds=client) as path:
            outcome = await asyncio.to_thread(run, path)
        await client.aclose()
        assert not outcome.approved and outcome.refused, \
            f"approved as the agent's document has it: {outcome}"
        assert outcome.ask_again
        assert "type: Freeze -> Reboot" in outcome.changes
        assert scripted.posts() == []
        [record] = store.audit_log.records()
        assert record.action == REFUSED and record.incarnation == 7
        assert record.event is not None and record.event["EventType"] == "Freeze"
