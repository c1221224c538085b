"""``impacts``: the stalls and boots the agent measured, as the history screen lists them
beside the incarnations, asked over a real socket of a server in this process (its agent
stood in for by the parts it reads) and answered from the store on the query thread."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest

from setui.api.client import AgentClient
from setui.api.codec import AgentInfo
from setui.api.peer import Authority
from setui.api.queries import Queries
from setui.api.server import ApiServer
from setui.api.socketfile import bind_socket
from setui.api.source import AgentSource
from setui.core.impact import BOOT, STALL, STARTED, Impact
from setui.monitor.state import MonitorState
from setui.store import Store

T0 = datetime(2026, 11, 25, 19, 0, tzinfo=timezone.utc)
ENDPOINT = "http://127.0.0.1:9"


@pytest.fixture
async def agent_socket(tmp_path: Path) -> AsyncIterator[tuple[Path, Store]]:
    store = Store.open_dir(tmp_path / "data")
    monitor = SimpleNamespace(state=MonitorState(), now=lambda: T0, interval=1.0,
                              recorder=None, endpoint=ENDPOINT, vm_name="vm")
    agent = SimpleNamespace(steps={}, held=set(), log=None, vm_name="vm")
    source = AgentSource(monitor=monitor, agent=agent, client=None, store=store,  # type: ignore[arg-type]
                         info=AgentInfo(1, T0, "vm", None, ENDPOINT, None, None, False),
                         host="vm")
    server = ApiServer(source, authority=Authority([]), queries=Queries(store.path),
                       say=print)
    bound = bind_socket(tmp_path / "api.sock", group=None)
    await server.serve(bound.sock)
    yield bound.path, store
    await server.aclose()
    bound.remove()
    bound.sock.close()
    store.close()


async def test_the_stalls_and_boots_come_back_as_they_were_measured(
        agent_socket: tuple[Path, Store]) -> None:
    path, store = agent_socket
    stall = store.record_impact(Impact(STALL, T0, 4.8, ENDPOINT, wall_seconds=4.9,
                                       boottime_seconds=4.8, event_id="E1",
                                       event_type="Freeze", announced=5, tie=STARTED))
    boot = store.record_impact(Impact(BOOT, T0 + timedelta(hours=1), 62.5, ENDPOINT,
                                      booted_at=T0 + timedelta(hours=1, seconds=30),
                                      first_poll=T0 + timedelta(hours=1, seconds=62),
                                      exact=False, boot_id="b-2"))
    assert stall is not None and boot is not None

    def ask() -> tuple[tuple[Impact, ...], ...]:
        with AgentClient.connect(path, timeout=10) as client:
            return (client.impacts(endpoint=ENDPOINT),
                    client.impacts(endpoint=ENDPOINT, since=T0 + timedelta(minutes=1)),
                    client.impacts(endpoint=ENDPOINT, newest=1),
                    client.impacts(endpoint="http://127.0.0.1:8"))

    every, since, newest, elsewhere = await asyncio.to_thread(ask)
    assert every == (stall, boot)
    assert since == newest == (boot,)
    assert elsewhere == ()
