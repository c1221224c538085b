"""Notifications (apprise to a local HTTP sink: retried, sent once, kept across restarts)
and hooks (environment, stdin, timeout, bounded output)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from setui.agent.hooks import hook_environment, hook_input, run_hook
from setui.agent.notify import Message, Notifier, render
from setui.agent.policy import Hook
from setui.core.model import Event, EventSource, EventStatus, EventType
from setui.store import Store
from setui.store.agent import MAX_OUTPUT, AgentLog
from tests.support.agent_helpers import Sink
from tests.support.children import wait_until

EVENT = Event("E1", EventType.REBOOT, EventStatus.SCHEDULED, ("vm-1", "vm-2"),
              datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc), source=EventSource.USER,
              duration=-1)


def _message(key: str = "k1") -> Message:
    return Message(key, "E1", "appeared", "title " + key, "body " + key)


def test_a_failing_sink_is_retried_without_blocking_and_sent_once(
        tmp_path: Path, sink: Sink) -> None:
    sink.fail = 2
    with Store.open_dir(tmp_path) as store:
        log = AgentLog(store, "http://e")
        notifier = Notifier((sink.url,), log, retries=5, first_retry=0.05)
        notifier.start()
        submitted = threading.Event()

        def submit() -> None:
            notifier.submit(_message())
            notifier.submit(_message())  # the same change told twice: sent once
            submitted.set()

        submit()
        assert submitted.is_set()  # submit() never waits for the network
        wait_until(lambda: len(sink.bodies) == 1, 30, "the message after two failures")
        notifier.stop()
        assert sink.bodies[0]["title"] == "title k1"
        assert [n.state for n in log.notifications()] == ["sent"]
        # A new agent, the same key: not sent again.
        again = Notifier((sink.url,), log, retries=5, first_retry=0.05)
        again.start()
        again.submit(_message())
        again.submit(_message("k2"))
        wait_until(lambda: len(sink.bodies) == 2, 30, "the new message")
        again.stop()
    assert [b["title"] for b in sink.bodies] == ["title k1", "title k2"]


def test_the_pause_before_each_retry_doubles_to_a_cap_with_jitter() -> None:
    # Every try fails; no store and no thread: each try answers the pause before the next.
    notifier = Notifier(("json://unused",), None, retries=20, send=lambda title, body: False)
    shares = []
    for attempts in range(12):
        ceiling = min(300.0, 5.0 * 2 ** attempts)  # 5 s, 10 s, ... 5 minutes
        pause = notifier._attempt(_message(), attempts)
        assert pause is not None and ceiling / 2 <= pause <= ceiling
        shares.append(pause / ceiling)
    # Jittered: agents whose webhook went down together do not come back in step.
    assert len(set(shares)) > 1
    assert notifier._attempt(_message(), 20) is None  # the last try: no pause after it
    assert notifier.failed == 1


def test_pending_messages_of_a_stopped_agent_are_sent_by_the_next(
        tmp_path: Path, sink: Sink) -> None:
    with Store.open_dir(tmp_path) as store:
        log = AgentLog(store, "http://e")
        assert log.queue_notification("left", event_id="E1", change="appeared", title="left",
                                      body="b", at=datetime.now(timezone.utc))
        notifier = Notifier((sink.url,), log, first_retry=0.05)
        notifier.start()
        wait_until(lambda: len(sink.bodies) == 1, 30, "the pending message")
        notifier.stop()
    assert sink.bodies[0]["title"] == "left"


def test_templates_make_network_text_harmless() -> None:
    text = render("$event_id: $detail", {"event_id": "E\x1b[31m1", "detail": "x" * 1000})
    assert "\x1b" not in text and len(text) < 400


@pytest.mark.slow
async def test_a_hook_gets_the_event_and_its_output_is_kept_bounded(tmp_path: Path) -> None:
    def script(size: int) -> str:
        return ("import json, os, sys; data = json.load(sys.stdin); "
                "print(os.environ['SETUI_EVENT_ID'], os.environ['SETUI_RESOURCES'], "
                "os.environ['SETUI_THIS_VM'], data['event']['EventType']); "
                f"sys.stdout.write('x' * {size}); sys.exit(4)")

    hook = Hook((sys.executable, "-c", script(4 * MAX_OUTPUT)), timeout=60)
    kw: dict[str, Any] = {"step": "prepare", "rule": "r", "incarnation": 7, "vm_name": "vm-1"}
    env = hook_environment(EVENT, **kw)
    assert env["SETUI_INCARNATION"] == "7" and env["SETUI_DURATION"] == "-1"
    assert env["SETUI_NOT_BEFORE"] == "2026-01-01T12:00:00Z"
    result = await run_hook(hook, env=env, stdin=hook_input(EVENT, **kw))
    assert result.exit_status == 4 and not result.ok and not result.timed_out
    assert len(result.output) == MAX_OUTPUT and result.output.endswith("x")
    first = await run_hook(Hook((sys.executable, "-c", script(0)), 60),
                           env=env, stdin=hook_input(EVENT, **kw))
    assert first.output.split() == ["E1", "vm-1", "vm-2", "true", "Reboot"]
    assert json.loads(hook_input(EVENT, **kw))["this_vm"] is True


@pytest.mark.slow
async def test_a_hook_past_its_timeout_is_stopped_with_its_children(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    script = tmp_path / "hook.py"
    script.write_text(
        "import pathlib, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        f"pathlib.Path({str(pid_file)!r}).write_text(str(child.pid))\n"
        "print('started', flush=True)\n"
        "time.sleep(120)\n")
    result = await run_hook(Hook((sys.executable, str(script)), timeout=2.0), env={},
                            stdin=b"")
    assert result.timed_out and result.exit_status is None and not result.ok
    assert "started" in result.output
    assert "timed out" in result.describe()
    child = int(pid_file.read_text())

    def gone() -> bool:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return True
        # A zombie is gone too: it only waits for its (killed) parent's reaper.
        with contextlib.suppress(OSError):
            return Path(f"/proc/{child}/stat").read_text().split(") ")[1][0] == "Z"
        return False  # type: ignore[unreachable]  # suppress() goes on after an OSError

    wait_until(gone, 30, "the hook's own child to be stopped too")


@pytest.mark.slow
async def test_a_hook_that_cannot_start_says_why(tmp_path: Path) -> None:
    result = await run_hook(Hook((str(tmp_path / "missing"),), 5), env={}, stdin=b"")
    assert result.error is not None and not result.ok
    assert "could not start" in result.describe()
