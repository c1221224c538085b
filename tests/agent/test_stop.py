"""What a stop does to a step under way: a clean stop (SIGTERM, what `systemctl restart`
sends) lets a running hook finish within its bound (--stop-grace) and starts nothing new;
what is still running then is killed, marked interrupted, said, told and counted, as a
SIGKILL's leftovers are by the next agent. A real agent, a real hook, real signals."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from setui.emulator.server import Emulator
from setui.store import Store
from setui.store.agent import DONE, INTERRUPTED, AgentLog
from tests.support.agent_helpers import (
    Sink,
    agent_env,
    agent_said,
    ended,
    more_polls,
    posts,
    records,
    start_agent,
    stop,
    write_policy,
)
from tests.support.children import wait_until

DRAIN = """
[notify]
urls = ["{url}"]

[[rule]]
name = "drain"
event_source = "User"
this_vm = true
prepare = "{hook}"
approve = "after-prepare"
"""


def _steps(tmp_path: Path, endpoint: str) -> dict[str, str]:
    with Store.open_dir(tmp_path / "data", readonly=True) as store:
        return {s.step: s.state for s in AgentLog(store, endpoint).steps()}


def _counted(textfile: Path) -> str:
    return next((line for line in textfile.read_text().splitlines()
                 if line.startswith('setui_hook_runs_total{hook="prepare",outcome="interrupted"')),
                "")


@pytest.mark.slow
def test_a_clean_stop_mid_hook_interrupts_it_at_its_bound_and_says_so_everywhere(
        tmp_path: Path, emulator: Emulator, hook: Path, sink: Sink) -> None:
    policy = write_policy(tmp_path, DRAIN.format(url=sink.url, hook=hook))
    env = agent_env(tmp_path, HOOK_WAIT="1")  # the hook waits for a file that never comes
    textfile = tmp_path / "setui.prom"
    proc, lines = start_agent(emulator.url, tmp_path, "--policy", str(policy), "--stop-grace",
                              "1", "--metrics-file", str(textfile), env=env)
    told = False
    try:
        lines.until(agent_said("running", "prepare"), 30, "the prepare hook")
        wait_until(lambda: (tmp_path / "runs").exists(), 10, "the hook to run")
        proc.send_signal(signal.SIGTERM)
        told = True
        said = json.loads(lines.until(agent_said("interrupted", "prepare"), 30,
                                      "the interruption, said"))
    finally:
        assert ended(proc, told) == 0
    assert "stopped while it ran" in str(said["detail"])
    assert any(r.get("agent") == "stopping" for r in records(lines))
    wait_until(lambda: any("interrupted" in str(b.get("title")) for b in sink.bodies), 30,
               "the notification")
    assert _counted(textfile).endswith(" 1.0"), textfile.read_text()
    assert _steps(tmp_path, emulator.url)["prepare"] == INTERRUPTED
    with Store.open_dir(tmp_path / "data", readonly=True) as store:
        run = AgentLog(store, emulator.url).hook_runs()[0]
    assert run.ended is not None and run.exit_status is None
    assert posts(emulator) == []
    # The next agent neither reruns it, nor approves, nor tells it again.
    again, lines = start_agent(emulator.url, tmp_path, "--policy", str(policy), env=env)
    try:
        lines.until(agent_said("skipped", "approve"), 30, "no approval")
        more_polls(emulator)
    finally:
        assert stop(again) == 0
    assert (tmp_path / "runs").read_text().count("prepare") == 1
    assert sum("interrupted" in str(b.get("title")) for b in sink.bodies) == 1
    assert posts(emulator) == []


@pytest.mark.slow
def test_a_hook_that_ends_within_the_bound_is_kept_and_nothing_new_starts(
        tmp_path: Path, emulator: Emulator, hook: Path, sink: Sink) -> None:
    policy = write_policy(tmp_path, DRAIN.format(url=sink.url, hook=hook))
    env = agent_env(tmp_path, HOOK_WAIT="1")
    proc, lines = start_agent(emulator.url, tmp_path, "--policy", str(policy), "--stop-grace",
                              "60", env=env)
    told = False
    try:
        lines.until(agent_said("running", "prepare"), 30, "the prepare hook")
        proc.send_signal(signal.SIGTERM)
        told = True
        waiting = json.loads(lines.until(agent_said("stopping"), 30, "the wait, said"))
        (tmp_path / "go").touch()
        lines.until(agent_said("finished", "prepare"), 30, "the hook's own end")
    finally:
        assert ended(proc, told) == 0
    assert "waiting up to 60 s for prepare" in str(waiting["detail"])
    assert _steps(tmp_path, emulator.url)["prepare"] == DONE
    assert posts(emulator) == []  # stopping: the approval after it did not start
    assert not any(r.get("agent") == "interrupted" for r in records(lines))
    # The next agent takes up from there: the approval the stop held back.
    again, lines = start_agent(emulator.url, tmp_path, "--policy", str(policy), env=env)
    try:
        lines.until(agent_said("approved", "approve"), 30, "the approval")
    finally:
        assert stop(again) == 0
    assert len(posts(emulator)) == 1
    assert (tmp_path / "runs").read_text().count("prepare") == 1
