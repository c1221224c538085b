"""The agent's errors: one that repeats is said once a minute with a count, not once per
poll; a kind of error that lasts a minute is an error state, told through the policy's
notification URLs, and its end too. A store that refuses the agent's writes (a trigger
that aborts them) is the failure: real SQLite, a real agent, a real notification sink."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from setui.agent.agent import Agent
from setui.agent.errors import WORK, AgentErrors, acting_kind
from setui.agent.notify import Notifier
from setui.agent.policy import parse_policy
from setui.core.client import ImdsClient
from setui.emulator.server import Emulator
from setui.monitor import Monitor
from setui.store import Store
from setui.store.agent import AgentLog
from tests.support.agent_helpers import (
    Sink,
    agent_said,
    more_polls,
    posts,
    records,
    start_agent,
    stop,
    write_policy,
)

RULE = '[[rule]]\nname = "mine"\nevent_source = "User"\napprove = "now"\n'


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_repeated_error_is_said_once_a_window_with_a_count() -> None:
    clock = Clock()
    errors = AgentErrors(window=60, mono=clock)
    assert errors.failed("store", "disk full") == "disk full"  # the first: at once
    for _ in range(299):  # a poll's worth apart, for a minute less a poll
        clock.now += 0.2
        assert errors.failed("store", "disk full") is None  # counted, not said
    assert errors.due().lines == () and errors.due().tell == ()
    clock.now += 0.2
    due = errors.due()
    assert due.lines == ("disk full (and 299 more times since the last line about it)",)
    assert [f.kind for f in due.tell] == ["store"] and due.tell[0].count == 300
    clock.now += 1
    assert errors.due().lines == () and errors.due().tell == ()  # said and told once
    assert errors.failed("history", "locked", quiet=True) is None  # said by its caller
    over = errors.ok("store")
    assert over is not None and over.told and over.count == 300
    assert errors.ok("store") is None
    # A kind with no "works again" of its own is over after two quiet windows.
    clock.now += 121
    assert [f.kind for f in errors.due().over] == ["history"]
    assert errors.state == {}


def test_what_keeps_the_agent_from_acting() -> None:
    clock = Clock()
    errors = AgentErrors(mono=clock)
    errors.failed("the event loop", "accept failed")
    errors.failed("recording the history", "disk full", quiet=True)
    errors.failed(acting_kind("E2"), "locked")
    clock.now += 1
    errors.failed(WORK, "locked too")
    assert [(f.kind, f.last) for f in errors.acting()] == [
        ("the steps of event E2", "locked"), ("the agent's work", "locked too")]
    errors.ok(acting_kind("E2"))
    assert [f.kind for f in errors.acting()] == [WORK]


def _refusing_store(data: Path) -> None:
    """A store whose agent tables refuse every write, as a full disk would."""
    with Store.open_dir(data):
        pass
    conn = sqlite3.connect(data / "setui.db")
    conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON agent_steps "
                 "BEGIN SELECT RAISE(ABORT, 'no room for the agent'); END")
    conn.commit()
    conn.close()


@pytest.mark.slow
def test_an_error_at_every_poll_is_one_line_and_the_agent_goes_on(
        tmp_path: Path, emulator: Emulator) -> None:
    _refusing_store(tmp_path / "data")
    policy = write_policy(tmp_path, RULE)
    proc, lines = start_agent(emulator.url, tmp_path, "--policy", str(policy))
    try:
        lines.until(agent_said("error"), 30, "the first error")
        more_polls(emulator, 25)
    finally:
        assert stop(proc) == 0
    errors = [r for r in records(lines) if r.get("agent") == "error"]
    assert len(errors) == 1, errors  # 25 polls, 25 failures: one line
    assert "no room for the agent" in str(errors[0]["detail"])
    assert "Traceback" not in (proc.stderr.read() if proc.stderr else "")
    assert posts(emulator) == []


async def test_an_error_state_a_window_long_is_told_and_so_is_its_end(
        tmp_path: Path, emulator: Emulator, sink: Sink) -> None:
    data = tmp_path / "data"
    _refusing_store(data)
    policy = parse_policy(f'[notify]\nurls = ["{sink.url}"]\n{RULE}')
    client = ImdsClient(emulator.url)
    store = Store.open_dir(data)
    said: list[dict[str, object]] = []
    try:
        monitor = Monitor(client, endpoint=emulator.url, interval=0.2, store=store)
        notifier = Notifier(policy.urls, AgentLog(store, emulator.url))
        agent = Agent(policy=policy, monitor=monitor, client=client, store=store,
                      vm_name="app-vm-1", dry_run=False, say=said.append, notifier=notifier,
                      errors=AgentErrors(window=0.5))
        await agent.start()
        updates = monitor.updates()
        healed = False
        async for update in updates:
            await agent.handle(update)
            titles = [str(b.get("title")) for b in sink.bodies]
            if not healed and "setui: agent error on app-vm-1" in titles:
                conn = sqlite3.connect(data / "setui.db")
                conn.execute("DROP TRIGGER refuse")
                conn.commit()
                conn.close()
                healed = True
            if "setui: agent recovered on app-vm-1" in titles:
                break
        await agent.stop(grace=5)
        await updates.aclose()
        await monitor.aclose()
    finally:
        await client.aclose()
        store.close()
    error = next(b for b in sink.bodies if b.get("title") == "setui: agent error on app-vm-1")
    assert str(error["message"]).startswith("setui agent on app-vm-1: the agent's work failing "
                                            "for ")
    assert "no room for the agent" in str(error["message"])
    assert any(r["agent"] == "recovered" for r in said)
    assert any(r["agent"] == "approved" for r in said)  # and then it did its work
