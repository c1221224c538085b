"""A store that stops answering for a while loses no event's work: a real `setui agent`
against the emulator on loopback, its real SQLite store held by another connection of
the test (BEGIN EXCLUSIVE, for longer than the agent's busy timeout) while a Reboot of
this VM appears. While the store cannot be written, /readyz takes the VM out of
rotation (the event is inside its rule's drain_before), /healthz says 503 and why, and
no hook runs (its step cannot be kept first); once the store answers, the plan has its
steps, the prepare hook ran once, the approval was made once, and /healthz is 200."""

from __future__ import annotations

import asyncio
import re
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from setui.agent.agent import Agent
from setui.agent.policy import parse_policy
from setui.core.client import ImdsClient
from setui.emulator.scenario import parse_scenario
from setui.emulator.server import Emulator
from setui.monitor import Monitor
from setui.store import Store
from setui.store.agent import AgentLog
from tests.support.agent_helpers import (
    EVENT_ID,
    agent_env,
    agent_said,
    more_polls,
    posts,
    start_agent,
    stop,
    write_policy,
)
from tests.support.children import wait_until

pytestmark = pytest.mark.slow  # starts processes: the slow tier (docs/testing.md)

EVENT = "5D1C0F42-7A1B-4E11-9C3D-2B8E6F0A9D17"
SCENARIO = f"""
name = "store-fault-reboot"
vm_name = "app-vm-1"
tail = 2
default_duration = 1
approval_delay = 0.5

[[events]]
id = "{EVENT}"
type = "Reboot"
at = 0
notice = "10m"
"""
# drain_before is longer than the notice: the event is inside its window from the start.
POLICY = """
[[rule]]
name = "drain"
event_type = "Reboot"
this_vm = true
drain_before = 900
prepare = "{hook}"
approve = "after-prepare"
"""
EMPTY = {"DocumentIncarnation": 1, "Events": []}


def _probe_url(proc) -> str:  # type: ignore[no-untyped-def]
    import re

    line = re.compile(r"setui agent: health probe at (http://127\.0\.0\.1:\d+)/readyz")
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        text = proc.stderr.readline()
        if found := line.search(text):
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return found.group(1)
        if not text and proc.poll() is not None:
            break
    pytest.fail("the agent never said where its probe is")


def _get(url: str) -> tuple[int, str]:
    answer = httpx.get(url, timeout=10, trust_env=False)
    return answer.status_code, answer.text


def _hold(tmp_path: Path) -> sqlite3.Connection:
    """The agent's store held as another writer would hold it: the agent's writes wait
    its busy timeout (5 s), then fail, until the holder lets go."""
    holder = sqlite3.connect(tmp_path / "data" / "setui.db", timeout=60, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    return holder


# Both steps done, as the plan says it: the hook's exit, then the service's answer.
DONE_PLAN = re.compile(r"rule drain: prepare 'hook\.sh' exited 0, approved: the service "
                       r"answered HTTP 200 in \d+ ms")


def _kept(tmp_path: Path, endpoint: str) -> tuple[str, list[tuple[str, int | None]], int]:
    """What the store says of the event: its plan, its hook runs (step, exit status) and
    how many approvals of it have an outcome."""
    from setui.agent.plan import plan_text
    from setui.store import Store
    from setui.store.agent import AgentLog
    from setui.store.records import APPROVE_OUTCOME

    with Store.open_dir(tmp_path / "data", readonly=True) as store:
        log = AgentLog(store, endpoint)
        steps = log.steps([EVENT])
        runs = [(r.step, r.exit_status) for r in log.hook_runs(EVENT)]
        outcomes = [r for r in store.audit_log.records()
                    if r.action == APPROVE_OUTCOME and r.event_id == EVENT]
    hooks = [(h["step"], h["exit_status"]) for o in outcomes
             for h in o.details["agent"]["hooks"]]
    assert hooks == runs, (hooks, runs)  # the approval's record carries the hook's outcome
    return plan_text(steps, now=steps[-1].updated), runs, len(outcomes)


def test_an_event_that_appears_while_the_store_fails_loses_no_work(
        tmp_path: Path, hook: Path) -> None:
    """The Reboot appears while the store is held: /readyz is 503 at once (its rule's
    drain window), /healthz 503 once the agent's work has failed, no hook runs; once the
    store answers, at the next poll rather than the document's next change, the rule is
    kept, the hook runs once and the event is approved once."""
    policy = write_policy(tmp_path, POLICY.format(hook=hook))
    runs = tmp_path / "runs"
    with Emulator(parse_scenario(SCENARIO)) as emulator:
        emulator.pin_document(EMPTY)  # no event until the store is held
        proc, lines = start_agent(emulator.url, tmp_path, "--policy", str(policy),
                                  "--health", "127.0.0.1:0", env=agent_env(tmp_path))
        holder: sqlite3.Connection | None = None
        try:
            url = _probe_url(proc)
            wait_until(lambda: _get(f"{url}/healthz")[0] == 200, 60, "the agent to poll")
            more_polls(emulator)
            holder = _hold(tmp_path)
            emulator.pin_document(None)  # the event appears while the store is held
            wait_until(lambda: _get(f"{url}/readyz")[0] == 503, 60,
                       "/readyz to take the VM out while the store fails")
            readyz = _get(f"{url}/readyz")
            # Held until the agent's own work has failed (not only the history's
            # recording, which goes first on the store's thread).
            wait_until(lambda: "the agent's work: " in _get(f"{url}/healthz")[1], 60,
                       "/healthz to say the agent cannot act")
            healthz = _get(f"{url}/healthz")
            readyz_later = _get(f"{url}/readyz")
            ran_during = runs.exists()
            holder.rollback()
            holder.close()
            holder = None
            lines.until(agent_said("approved", "approve"), 90,
                        "the approval, once the store answers")
            wait_until(lambda: _get(f"{url}/healthz")[0] == 200, 90,
                       "/healthz to say 200 again")
            wait_until(lambda: not emulator.document()["Events"], 90, "the event to end")
            more_polls(emulator, 10)
        finally:
            if holder is not None:
                holder.close()
            assert stop(proc) == 0
        sent = posts(emulator)

    assert readyz[0] == 503 and readyz[1].startswith(f"not ready: Reboot {EVENT}: "), readyz
    assert "(drain_before 900 s)" in readyz[1], readyz
    assert readyz_later[0] == 503, readyz_later
    assert healthz[0] == 503, healthz
    assert "cannot record or act" in healthz[1] and "setui.db" in healthz[1], healthz
    assert not ran_during, "a hook ran while its step could not be kept"
    assert runs.read_text().splitlines() == [f"prepare {EVENT} Reboot this_vm=true"]
    assert len(sent) == 1, sent
    plan, runs_kept, outcomes = _kept(tmp_path, emulator.url)
    assert (runs_kept, outcomes) == ([("prepare", 0)], 1)
    assert DONE_PLAN.fullmatch(plan), plan


def test_a_hook_that_ends_while_the_store_fails_is_kept_and_the_event_approved(
        tmp_path: Path, hook: Path) -> None:
    """The prepare hook runs; the store is held before it ends, so its outcome cannot be
    written: the agent keeps it, and once the store answers writes it and approves
    (never runs the hook again, never leaves it "running")."""
    policy = write_policy(tmp_path, POLICY.format(hook=hook))
    runs = tmp_path / "runs"
    with Emulator(parse_scenario(SCENARIO)) as emulator:
        proc, lines = start_agent(emulator.url, tmp_path, "--policy", str(policy),
                                  "--health", "127.0.0.1:0",
                                  env=agent_env(tmp_path, HOOK_WAIT="1"))
        holder: sqlite3.Connection | None = None
        try:
            url = _probe_url(proc)
            lines.until(agent_said("running", "prepare"), 60, "prepare to start")
            holder = _hold(tmp_path)
            (tmp_path / "go").touch()  # the hook ends while the store is held
            lines.until(agent_said("finished", "prepare"), 60, "prepare to end")
            wait_until(lambda: f"the steps of event {EVENT}: " in _get(f"{url}/healthz")[1],
                       60, "/healthz to say the event's steps cannot be kept")
            healthz = _get(f"{url}/healthz")
            readyz = _get(f"{url}/readyz")
            approved_during = [line for line in lines.seen
                               if agent_said("approved", "approve")(line)]
            holder.rollback()
            holder.close()
            holder = None
            lines.until(agent_said("approved", "approve"), 90,
                        "the approval, once the store answers")
            wait_until(lambda: _get(f"{url}/healthz")[0] == 200, 90,
                       "/healthz to say 200 again")
            wait_until(lambda: not emulator.document()["Events"], 90, "the event to end")
            more_polls(emulator, 10)
        finally:
            if holder is not None:
                holder.close()
            assert stop(proc) == 0
        sent = posts(emulator)

    assert healthz[0] == 503 and "cannot keep what was done" in healthz[1], healthz
    assert "setui.db" in healthz[1], healthz
    assert readyz[0] == 503 and "prepare 'hook.sh' done" in readyz[1], readyz
    assert approved_during == []
    assert runs.read_text().splitlines() == [f"prepare {EVENT} Reboot this_vm=true"]
    assert len(sent) == 1, sent
    plan, runs_kept, outcomes = _kept(tmp_path, emulator.url)
    assert (runs_kept, outcomes) == ([("prepare", 0)], 1)
    assert DONE_PLAN.fullmatch(plan), plan


class _HoldingClient(ImdsClient):
    """A real client that, when the approver reads the document again just before it
    writes its attempt (the read after ``forget_etag``), first has ``hold`` called: the
    store is taken between the approval's ``running`` state and its audit record."""

    hold: Callable[[], None] | None = None

    def forget_etag(self) -> None:
        super().forget_etag()
        hold, self.hold = self.hold, None
        if hold is not None:
            hold()


@pytest.mark.slow
async def test_an_approval_the_audit_log_could_not_take_waits_and_is_made_once(
        tmp_path: Path, emulator: Emulator) -> None:
    """The store is held just as the approval starts: the audit log cannot take its
    attempt, so nothing is sent, and the approval is neither failed nor lost: it waits,
    and is made once the store answers."""
    data = tmp_path / "data"
    policy = parse_policy('[[rule]]\nname = "mine"\nevent_source = "User"\napprove = "now"\n')
    client = _HoldingClient(emulator.url)
    store = Store.open_dir(data)
    holder: list[sqlite3.Connection] = []
    client.hold = lambda: holder.append(_hold(tmp_path))
    said: list[dict[str, object]] = []

    async def run() -> None:
        async for update in updates:
            await agent.handle(update)
            if holder and any(r["agent"] == "error" for r in said):
                holder.pop().rollback()  # the store answers again
            if any(r["agent"] == "approved" for r in said):
                return

    try:
        monitor = Monitor(client, endpoint=emulator.url, interval=0.2, store=store)
        agent = Agent(policy=policy, monitor=monitor, client=client, store=store,
                      vm_name="app-vm-1", dry_run=False, say=said.append)
        await agent.start()
        updates = monitor.updates()
        await asyncio.wait_for(run(), 90)
        await agent.stop(grace=5)
        await updates.aclose()
        await monitor.aclose()
        steps = AgentLog(store, emulator.url).steps([EVENT_ID])
        actions = sorted(r.action for r in store.audit_log.records())
    finally:
        for conn in holder:
            conn.close()
        await client.aclose()
        store.close()
    kinds = [(r["agent"], r.get("step")) for r in said if r["agent"] != "short notice"]
    assert kinds[0] == ("matched", "match") and kinds.count(("approved", "approve")) == 1
    assert ("failed", "approve") not in kinds, said
    error = next(r for r in said if r["agent"] == "error")
    assert "setui.db" in str(error["detail"]), error
    # Its waiting state not kept, and the approval not done: two errors, one line.
    recovered = next(r for r in said if r["agent"] == "recovered")
    assert str(recovered["detail"]).endswith(" works again after 2 errors"), recovered
    assert len(posts(emulator)) == 1
    assert [(s.step, s.state) for s in steps] == [("match", "done"), ("approve", "done")]
    assert actions == ["approve-attempt", "approve-outcome"], actions  # no refusal
