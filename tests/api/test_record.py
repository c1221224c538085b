"""The record through the agent is the record in the store: every question of
setui.store.reading.Record gets the same answer from the agent's client as from the store
itself, so a command has one code path whichever it reads. The real server and client
over a real socket, in this process; the store is a recorded scenario with approvals, an
approval of unknown outcome, a refusal, a hole, and what the agent measured."""

from __future__ import annotations

import asyncio
import select
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from setui.api import client as client_module
from setui.api import server as server_module
from setui.api.client import AgentClient, ConnectionLost
from setui.core.impact import BOOT, STALL, STARTED, Impact
from setui.monitor.replay import load_recording
from setui.store import APPROVE_ATTEMPT, Store
from setui.store.reading import Record
from setui.store.records import AuditEntry
from tests.support.api_helpers import agent_in_process
from tests.support.recording import ENDPOINT, START, Approval, heartbeat, record_scenario
from tests.support.waiting import until

SCENARIO = """
name = "record"
vm_name = "web-0"
tail = 60

[[events]]
id = "A0000000-0000-4000-8000-000000000000"
type = "Reboot"
at = 5
notice = "15m"

[[events]]
id = "B0000000-0000-4000-8000-000000000000"
type = "Freeze"
at = 20
notice = "10m"
duration = 5

[[events]]
id = "C0000000-0000-4000-8000-000000000000"
type = "Redeploy"
at = 30
notice = "15m"
"""
FIRST, SECOND, THIRD = (f"{c}0000000-0000-4000-8000-000000000000" for c in "ABC")
# An event approved from a VM whose vmId the approval recorded (its store copied here, or
# this VM's own), at this endpoint, outcome not written down.
ELSEWHERE = "D0000000-0000-4000-8000-000000000000"
MADE_ON, ANOTHER = "5c2d0000-0000-4000-8000-00000000000a", "5c2d0000-0000-4000-8000-00000000000b"


def _store(path: Path) -> Store:
    store = record_scenario(path, SCENARIO, seconds=90, holes=[(50, 60)], approvals=[
        Approval(10, 0), Approval(25, 1, user="bob", refused="it lists other VMs")])
    # An approval of the third event whose outcome nobody wrote down.
    store.audit_log.append(AuditEntry(action=APPROVE_ATTEMPT, time=START + timedelta(seconds=35),
                                      user="carol", host="test", endpoint=ENDPOINT,
                                      event_id=THIRD))
    store.audit_log.append(AuditEntry(action=APPROVE_ATTEMPT, time=START + timedelta(seconds=36),
                                      user="dave", host="test", endpoint=ENDPOINT,
                                      event_id=ELSEWHERE, details={"vm_id": MADE_ON}))
    heartbeat(store, 45)
    store.sessions.record_impact(Impact(STALL, START + timedelta(seconds=22), 4.8, ENDPOINT,
                                        wall_seconds=4.8, boottime_seconds=4.8, event_id=SECOND,
                                        event_type="Freeze", announced=5, tie=STARTED))
    store.sessions.record_impact(Impact(BOOT, START + timedelta(seconds=40), 12.5, ENDPOINT,
                                        booted_at=START + timedelta(seconds=41),
                                        first_poll=START + timedelta(seconds=52.5), exact=False,
                                        boot_id="b" * 32))
    for seq in range(12):  # a log longer than a page
        store.audit_log.append(AuditEntry(action="agent-note", time=START + timedelta(
            seconds=70 + seq), user="root", host="test", endpoint=ENDPOINT,
            error=f"note {seq}"))
    return store


@pytest.fixture
async def both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
               ) -> AsyncIterator[tuple[Store, AgentClient]]:
    """The store, and the agent's client reading the same store through a real server."""
    # Small pages, so that paging is what is compared.
    monkeypatch.setattr(client_module, "AUDIT_PAGE", 5)
    monkeypatch.setattr(client_module, "HISTORY_PAGE", 7)
    _store(tmp_path / "setui.db").close()
    with Store(tmp_path / "setui.db", readonly=True) as store:
        async with agent_in_process(tmp_path, store, endpoint=ENDPOINT,
                                    started=START) as path:
            client = await asyncio.to_thread(AgentClient.connect, path, timeout=10)
            try:
                yield store, client
            finally:
                client.close()


QUESTIONS: dict[str, Callable[[Record], Any]] = {
    "history": lambda r: r.history(limit=None),
    "history, 10 newest": lambda r: r.history(limit=10),
    "history since": lambda r: r.history(limit=None, since=START + timedelta(seconds=40)),
    "history of an event": lambda r: r.history(limit=None, event_id=SECOND),
    "incarnation": lambda r: r.incarnation(2),
    "no such incarnation": lambda r: r.incarnation(999),
    "previous": lambda r: r.previous(r.history(limit=1)[0]),
    "event_story": lambda r: r.event_story(SECOND),
    "event_ids": lambda r: r.event_ids("b000", limit=5),
    "holes": lambda r: list(r.holes(endpoint=ENDPOINT, now=START + timedelta(seconds=95))),
    "impacts": lambda r: r.impacts(endpoint=ENDPOINT),
    "impacts since": lambda r: r.impacts(endpoint=ENDPOINT,
                                         since=START + timedelta(seconds=30)),
    "impacts, the newest": lambda r: r.impacts(endpoint=ENDPOINT, newest=1),
    "approvals": lambda r: r.approvals([FIRST, SECOND, THIRD]),
    "approvals, unknown too": lambda r: r.approvals([FIRST, SECOND, THIRD], unknown=True),
    "claim": lambda r: [r.claim(i, ENDPOINT) for i in (FIRST, SECOND, THIRD)],
    "audit": lambda r: r.audit(),
    "audit, 8 newest": lambda r: r.audit(limit=8),
    "audit, oldest first": lambda r: r.audit(oldest_first=True),
    "audit, 6 oldest": lambda r: r.audit(limit=6, oldest_first=True),
    "unforwarded": lambda r: r.unforwarded(),
    "missing_records": lambda r: r.missing_records(),
    "verify_audit": lambda r: r.verify_audit(),
    "recording": lambda r: r.recording(),
    "recording of a window": lambda r: r.recording(since=START + timedelta(seconds=20),
                                                   until=START + timedelta(seconds=60)),
}


@pytest.mark.parametrize("question", list(QUESTIONS))
async def test_the_agent_answers_as_the_store_does(
        both: tuple[Store, AgentClient], question: str) -> None:
    store, client = both
    ask = QUESTIONS[question]
    expected = ask(store.record)
    assert expected not in (None, [], {}) or question in (
        "no such incarnation", "unforwarded", "missing_records"), "a question worth asking"
    assert await asyncio.to_thread(ask, client) == expected


async def test_a_claim_through_the_agent_is_keyed_by_the_vm_as_the_stores_is(
        both: tuple[Store, AgentClient]) -> None:
    """The claim op carries the vmId asked about and the VM a counted claim was made on
    (store.vmkeys): this VM's id not known, the approval made with another counts and
    names it; known and the same, it counts as this VM's own; known and another, it is
    another VM's and claims nothing here."""
    store, client = both

    def ask(record: Record) -> list[Any]:
        return [record.claim(ELSEWHERE, ENDPOINT, vm_id=vm_id)
                for vm_id in (None, MADE_ON, ANOTHER)]

    unknown, same, other = expected = ask(store.record)
    assert unknown is not None and unknown.made_on == MADE_ON and unknown.user == "dave"
    assert same is not None and same.made_on is None
    assert other is None
    assert await asyncio.to_thread(ask, client) == expected


@pytest.mark.parametrize(("agent_vm", "claimed"), [(MADE_ON, True), (ANOTHER, False)])
async def test_an_attached_approve_asks_the_claim_of_the_agents_vm(
        tmp_path: Path, agent_vm: str, claimed: bool) -> None:
    """`setui approve` attached notes an earlier approval as the agent would count it:
    keyed by the agent's vmId (its hello), not by the endpoint alone."""
    from setui.api.approving import AgentApprover

    _store(tmp_path / "setui.db").close()
    with Store(tmp_path / "setui.db", readonly=True) as store:
        async with agent_in_process(tmp_path, store, endpoint=ENDPOINT, started=START,
                                    vm_id=agent_vm) as path:
            client = await asyncio.to_thread(AgentClient.connect, path, timeout=10)
            try:
                found = await asyncio.to_thread(AgentApprover(client).claim, ELSEWHERE)
            finally:
                client.close()
    assert (found is not None) == claimed
    assert found is None or (found.user, found.made_on) == ("dave", None)


async def test_a_replay_from_the_agent_is_the_replay_from_the_store(
        both: tuple[Store, AgentClient]) -> None:
    """One function builds a replay's recording from either (monitor.replay), with what
    the agent measured and when its heartbeat ran."""
    store, client = both
    from_store = load_recording(store.record)
    from_agent = await asyncio.to_thread(load_recording, client)
    assert from_store is not None and from_store.impacts and from_store.measuring
    assert from_agent == from_store


async def test_a_page_too_large_for_a_frame_is_asked_again_in_halves(
        both: tuple[Store, AgentClient], monkeypatch: pytest.MonkeyPatch) -> None:
    """A page of big documents past the agent's frame limit: the client asks for fewer
    at a time, and the whole history still arrives, in order."""
    from setui.api import queries

    store, client = both
    one = len(repr(store.history.incarnations(limit=1)[0].raw_json))
    monkeypatch.setattr(queries, "MAX_ANSWER", 3 * one + 2000)  # a page of 7 is too large
    assert await asyncio.to_thread(client.history, limit=None) \
        == store.history.incarnations(limit=None)


async def test_the_replay_screen_opens_on_the_agents_record(
        both: tuple[Store, AgentClient]) -> None:
    """`setui replay` attached: the real app under Pilot, its record the agent's client
    (read on the screen's thread, as a store is)."""
    from setui.settings.config import Config
    from setui.ui.replay_app import ReplayApp
    from setui.ui.widgets.events import EventsTable
    from tests.support.dashboard import wait_for

    _store, client = both
    app = ReplayApp(config=Config(vm_name="web-0"), store=client,
                    at=START + timedelta(seconds=40))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = app.replay_screen
        await wait_for(pilot, lambda: screen.moment is not None)
        await pilot.pause()
        assert set(screen.query_one(EventsTable).keys) == {FIRST, SECOND, THIRD}


async def test_an_agent_that_fails_a_replay_is_said_in_words(
        both: tuple[Store, AgentClient]) -> None:
    """The agent's error reaches the screen as the store's would (not a worker's crash)."""
    from setui.settings.config import Config
    from setui.ui.replay_app import ReplayApp
    from tests.support.dashboard import wait_for

    _store, client = both
    client.close()  # the agent is gone before the replay asks
    app = ReplayApp(config=Config(), store=client)
    async with app.run_test(size=(120, 36)) as pilot:
        view = app.replay_screen.setui
        await wait_for(pilot, lambda: view.loaded)
        assert view.problem is not None
        assert view.problem.startswith("cannot read the record: the connection to the agent")


async def test_a_read_after_the_agent_closed_the_connection_is_asked_again_a_write_is_not(
        both: tuple[Store, AgentClient], monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent closes a connection that asked nothing for a while (a dashboard left
    open; a restarted agent is a new one): a query on it is asked again on a new
    connection, as the Record promises; a write is not (whether the agent saw it is not
    known), and the next request opens a new connection again."""
    store, client = both
    monkeypatch.setattr(server_module, "IDLE_AFTER", 0.05)
    monkeypatch.setattr(server_module, "SWEEP_EVERY", 0.02)

    def closed() -> bool:  # the agent's last word on it waits to be read
        return bool(select.select([client._sock], [], [], 0)[0])

    await until(closed, what="the agent to close the idle connection")
    assert await asyncio.to_thread(client.history, limit=None) \
        == store.history.incarnations(limit=None)
    await until(closed, what="the agent to close the idle connection")
    with pytest.raises(ConnectionLost):
        await asyncio.to_thread(client.dismiss, [FIRST])
    assert await asyncio.to_thread(client.audit, limit=3) == store.audit_log.records(limit=3)
