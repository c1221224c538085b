"""One agent per store, and per socket: a second one refuses to start and names the first;
a dead one's lock and socket are no obstacle (real agents, real signals)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from setui.emulator.server import Emulator
from setui.store import Store
from tests.support.api_helpers import EVENT_ID, plain_env
from tests.support.children import SETUI, Lines, wait_until

pytestmark = pytest.mark.skipif(os.name != "posix", reason="flock and Unix sockets")

# A prepare hook that never ends by itself: it outlives an agent killed while it runs.
HOOK = """#!/bin/sh
echo $$ > "$HOOK_DIR/hook.pid"
while true; do sleep 0.1; done
"""
POLICY = """
[[rule]]
name = "drain"
event_type = "Reboot"
prepare = "{hook}"
approve = "after-prepare"
"""


def _agent(url: str, env: dict[str, str], *extra: str) -> tuple[subprocess.Popen[str], Lines]:
    proc = subprocess.Popen([*SETUI, "agent", "--endpoint", url, "--interval", "0.2",
                             "--json", *extra], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, encoding="utf-8", env=env)
    lines = Lines(proc)
    # Polling and recording: the first document is in.
    lines.until(lambda line: line.startswith("{") and json.loads(line).get("change")
                == "appeared", 30, "the agent's first document")
    return proc, lines


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)


@pytest.mark.slow
def test_a_second_agent_on_the_same_store_refuses_to_start_and_names_the_first(
        tmp_path: Path, emulator: Emulator) -> None:
    first, _ = _agent(emulator.url, plain_env(tmp_path))
    try:
        second = subprocess.run(
            [*SETUI, "agent", "--endpoint", emulator.url, "--interval", "0.2"],
            env=plain_env(tmp_path), capture_output=True, text=True, timeout=60)
        assert second.returncode == 2, second.stdout + second.stderr
        assert f"another agent runs on this store (pid {first.pid}, since " in second.stderr
        # It read and wrote nothing: one recording session, the first agent's.
        with Store.open_dir(tmp_path / "data", readonly=True) as store:
            assert [s.pid for s in store.sessions.spans()] == [first.pid]
    finally:
        _stop(first)


@pytest.mark.slow
def test_a_second_agent_on_the_same_socket_refuses_to_start(tmp_path: Path,
                                                             emulator: Emulator) -> None:
    first, _ = _agent(emulator.url, plain_env(tmp_path, sock="api.sock"))
    try:
        second = subprocess.run(
            [*SETUI, "agent", "--endpoint", emulator.url, "--interval", "0.2"],
            env=plain_env(tmp_path, data="other-data", sock="api.sock"),
            capture_output=True, text=True, timeout=60)
        assert second.returncode == 2, second.stdout + second.stderr
        assert f"another agent answers on {tmp_path / 'api.sock'} (pid {first.pid}" \
            in second.stderr
        assert not (tmp_path / "other-data" / "setui.db").exists()
    finally:
        _stop(first)
    assert not (tmp_path / "api.sock").exists()  # removed by its agent on the way out


@pytest.mark.slow
def test_a_killed_agent_leaves_nothing_in_the_way_even_while_its_hook_runs_on(
        tmp_path: Path, emulator: Emulator) -> None:
    hook = tmp_path / "hook.sh"
    hook.write_text(HOOK)
    hook.chmod(0o755)
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY.format(hook=hook))
    first, _ = _agent(emulator.url, plain_env(tmp_path, sock="api.sock"), "--policy", str(policy))
    hook_pid = None
    try:
        wait_until(lambda: (tmp_path / "hook.pid").exists(), 30, "the hook to start")
        hook_pid = int((tmp_path / "hook.pid").read_text())
        first.kill()
        first.wait(timeout=30)
        assert (tmp_path / "api.sock").exists()  # left behind by the dead agent
        # The hook (the dead agent's child) still runs: it must not hold the lock.
        os.kill(hook_pid, 0)
        second, _ = _agent(emulator.url, plain_env(tmp_path, sock="api.sock"), "--policy",
                           str(policy))
        try:
            from setui.api.client import AgentClient

            with AgentClient.connect(tmp_path / "api.sock") as client:
                assert client.hello.agent.pid == second.pid

                def prepares() -> list[tuple[str, str, str]]:
                    return [(s.event_id, s.step, s.state) for s in client.state()[1].steps
                            if s.step == "prepare"]

                # What the dead agent left running is interrupted, not rerun.
                wait_until(lambda: prepares() != [], 30, "the agent to take up the event")
                assert prepares() == [(EVENT_ID, "prepare", "interrupted")]
        finally:
            _stop(second)
    finally:
        if first.poll() is None:
            first.kill()
        if hook_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(hook_pid, signal.SIGKILL)
