"""What the attached commands say of the agent's state and do with its answers, in this
process: the real server over a real socket, its agent stood in for by the parts it reads
(the whole agent, with real commands, is in test_attached_commands.py). A command runs on
a thread with a loop of its own, as its blocking client would otherwise stop the server's."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import time
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from setui.api.client import AgentClient
from setui.cli import build_parser
from setui.commands.approve import ApproveRequest, approve_command
from setui.commands.events import list_events
from setui.core.health import ConnectionState, Health
from setui.core.model import parse_document
from setui.monitor.state import MonitorState
from setui.settings.config import Config
from setui.store import DISMISSED, Store
from tests.support.api_helpers import agent_in_process

T0 = datetime(2026, 11, 25, 19, 0, tzinfo=timezone.utc)
ENDPOINT = "http://127.0.0.1:9"
MINE = "F02C2EDE-3B1C-4D5E-9F00-0123456789AB"
DOCUMENT = parse_document({"DocumentIncarnation": 7, "Events": [{
    "EventId": MINE, "EventType": "Freeze", "ResourceType": "VirtualMachine",
    "Resources": ["web-0"], "EventStatus": "Scheduled",
    "NotBefore": "Mon, 01 Jan 2035 00:00:00 GMT", "Description": "maintenance",
    "EventSource": "Platform", "DurationInSeconds": 5}]})


@pytest.fixture
async def agent(tmp_path: Path) -> AsyncIterator[Callable[[Health], Any]]:
    """``await agent(health)``: an agent's API whose monitor holds DOCUMENT with that
    health; the socket's path."""
    async with contextlib.AsyncExitStack() as stack:
        store = stack.enter_context(Store.open_dir(tmp_path / "data"))

        async def serve(health: Health) -> Path:
            return await stack.enter_async_context(agent_in_process(
                tmp_path, store, endpoint=ENDPOINT, started=T0, pid=4242,
                state=MonitorState(document=DOCUMENT, health=health)))

        yield serve


def _events(path: Path, *argv: str) -> tuple[int, str, str]:
    args = build_parser(["events", *argv]).parse_args(["events", *argv])
    args.config_resolved = Config(socket=path)
    out, err = io.StringIO(), io.StringIO()
    code = asyncio.run(list_events(args, out=out, err=err))
    return code, out.getvalue(), err.getvalue()


async def test_a_stale_agent_state_is_said_so_never_shown_as_live(
        agent: Callable[[Health], Any]) -> None:
    """The agent's last good answer is 100 s old: its state is stale when the command
    reads it, said on stderr and in the JSON, the events still listed."""
    path = await agent(Health(ConnectionState.LIVE, last_success=T0,
                              last_success_mono=time.monotonic() - 100,
                              first_call_pending=False, stale_after=3.0))
    code, out, err = await asyncio.to_thread(_events, path)
    assert code == 0 and MINE in out
    lines = err.splitlines()
    assert lines[0].startswith("setui events: attached to the agent (pid 4242, up ")
    assert lines[1] == ("setui events: the agent's connection is stale: its last good answer "
                        "from IMDS was 1m 40s ago, so this may not be what the service says "
                        "now")
    code, out, err = await asyncio.to_thread(_events, path, "--json")
    attached = json.loads(out)["attached"]
    assert code == 0 and err == ""
    assert attached["connection"] == "stale" and attached["live"] is False
    assert 99 < attached["last_answer_seconds_ago"] < 200
    assert attached["problem"].startswith("the agent's connection is stale")


async def test_an_agent_that_cannot_reach_imds_says_why(
        agent: Callable[[Health], Any]) -> None:
    path = await agent(Health(ConnectionState.RETRYING, consecutive_failures=4,
                              last_error="connection refused", first_call_pending=False))
    code, _out, err = await asyncio.to_thread(_events, path)
    assert code == 0
    assert "the agent's connection is retrying (connection refused): it has had no answer " \
           "from IMDS yet, so this may not be what the service says now" in err


async def test_a_live_agent_state_says_nothing_more(agent: Callable[[Health], Any]) -> None:
    path = await agent(Health(ConnectionState.LIVE, last_success=T0,
                              last_success_mono=time.monotonic(), first_call_pending=False,
                              stale_after=3600.0))
    code, _out, err = await asyncio.to_thread(_events, path)
    assert code == 0 and len(err.splitlines()) == 1  # attached to the agent (pid, up)


def _approve(path: Path, answer: str, *, read_only: bool = False) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    request = ApproveRequest((MINE,), ENDPOINT, "2020-07-01", read_only=read_only)
    code = asyncio.run(approve_command(request, stdin=io.StringIO(answer), out=out, err=err,
                                       agent=AgentClient.connect(path, timeout=10)))
    return code, out.getvalue(), err.getvalue()


async def test_no_at_the_prompt_is_recorded_by_the_agent_and_sends_nothing(
        agent: Callable[[Health], Any], tmp_path: Path) -> None:
    path = await agent(Health())
    code, out, _err = await asyncio.to_thread(_approve, path, "n\n")
    assert code == 3 and "Approve? [y/N] Cancelled: nothing was approved." in out
    with Store.open_dir(tmp_path / "data", readonly=True) as store:
        [record] = store.audit_log.records()
    assert record.action == DISMISSED and record.event_id == MINE
    assert record.details["op"] == "dismiss"


async def test_read_only_asks_the_agent_to_approve_nothing(
        agent: Callable[[Health], Any], tmp_path: Path) -> None:
    """--read-only attached: refused here, and not even a refusal goes to the agent (a
    request to approve is what read-only never sends)."""
    path = await agent(Health())
    code, out, _err = await asyncio.to_thread(_approve, path, "", read_only=True)
    assert code == 1
    assert "REFUSED: setui runs read-only (--read-only): it approves nothing" in out
    with Store.open_dir(tmp_path / "data", readonly=True) as store:
        assert store.audit_log.records() == []
