"""The load balancer's probe: a real HTTP probe loop against a real agent and an emulated
Reboot. /readyz says 200, then 503 from drain_before seconds before NotBefore, through
the event, and while recover runs; then 200 again. /healthz follows IMDS."""

from __future__ import annotations

import re
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import pytest

from setui.agent.policy import parse_policy
from setui.agent.probe import drain_reason, health_verdict, work_verdict
from setui.core.health import ConnectionState, Health
from setui.core.model import Event, EventStatus, EventType
from setui.emulator.scenario import parse_scenario
from setui.emulator.server import Emulator
from tests.support.agent_helpers import agent_env, agent_said, start_agent, stop, write_policy
from tests.support.children import wait_until

NOTICE = 16.0
DRAIN_BEFORE = 8.0
SCENARIO = f"""
name = "probe-reboot"
vm_name = "app-vm-1"
tail = 2
default_duration = 2

[[events]]
id = "A1B2C3D4-0000-4000-8000-000000000001"
type = "Reboot"
notice = {NOTICE}
"""
POLICY = f"""
[[rule]]
name = "lb"
event_type = "Reboot"
this_vm = true
drain_before = {DRAIN_BEFORE:g}
recover = "{{hook}}"
"""
HEALTH_LINE = re.compile(r"setui agent: health probe at (http://127\.0\.0\.1:\d+)/readyz")
NOW = datetime(2026, 5, 14, 9, 0, tzinfo=timezone.utc)


def test_why_an_event_keeps_the_vm_out_of_rotation() -> None:
    rule = parse_policy('[[rule]]\nname = "r"\ndrain_before = 300\nprepare = "/bin/true"\n'
                        'recover = "/bin/true"\n').rules[0]
    soon = Event("E1", EventType.REBOOT, EventStatus.SCHEDULED, ("vm",),
                 NOW + timedelta(minutes=10))
    assert drain_reason(soon, rule, {}, ended=False, now=NOW) is None
    assert "prepare 'true' running" in drain_reason(soon, rule, {"prepare": "running"},
                                                    ended=False, now=NOW)
    # A prepare that was not started (no time left) takes nothing out by itself.
    assert drain_reason(soon, rule, {"prepare": "skipped"}, ended=False, now=NOW) is None
    assert "approved" in drain_reason(soon, rule, {"approve": "done"}, ended=False, now=NOW)
    near = NOW + timedelta(minutes=5, seconds=1)
    assert "T-4:59 (drain_before 300 s)" in drain_reason(soon, rule, {}, ended=False, now=near)
    started = Event("E1", EventType.REBOOT, EventStatus.STARTED, ("vm",), None)
    assert "has started" in drain_reason(started, None, {}, ended=False, now=NOW)
    # Over: out until recover has finished, whatever came of it.
    assert "recover 'true' not finished" in drain_reason(started, rule, {}, ended=True, now=NOW)
    assert "recover 'true' running" in drain_reason(started, rule, {"recover": "running"},
                                                    ended=True, now=NOW)
    for state in ("done", "failed"):
        assert drain_reason(started, rule, {"recover": state}, ended=True, now=NOW) is None
    # Cancelled far ahead, never taken out: nothing to wait for.
    assert drain_reason(soon, rule, {}, ended=True, now=NOW) is None
    # Changed under its rule: no recover will run.
    assert drain_reason(started, rule, {"match": "skipped"}, ended=True, now=NOW) is None


def test_health_in_words() -> None:
    at = NOW
    assert health_verdict(Health(ConnectionState.LIVE, last_success=at)) == (
        True, "polling IMDS; last good answer at 2026-05-14T09:00:00Z")
    assert health_verdict(Health()) == (False, "no answer from IMDS yet")
    ok, text = health_verdict(Health(ConnectionState.UNREACHABLE, last_success=at,
                                     last_error="connection refused\x1b[2J"))
    assert not ok and text.startswith("IMDS unreachable: connection refused")
    assert "\x1b" not in text


def test_health_says_what_keeps_the_agent_from_recording_or_acting() -> None:
    live = health_verdict(Health(ConnectionState.LIVE, last_success=NOW))
    assert work_verdict(live, []) == live
    ok, text = work_verdict(live, ["the agent's work: the database setui.db stayed locked",
                                   "cannot record the history: disk full\x1b[2J"])
    assert not ok
    assert text == ("cannot record or act: the agent's work: the database setui.db stayed "
                    "locked; cannot record the history: disk full\\x1b[2J; polling IMDS; "
                    "last good answer at 2026-05-14T09:00:00Z"), text
    assert "\x1b" not in text
    ok, text = work_verdict(health_verdict(Health()), ["the agent's work: locked"])
    assert not ok and text.endswith("; no answer from IMDS yet")


def _probe_url(proc) -> str:  # type: ignore[no-untyped-def]
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if found := HEALTH_LINE.search(line):
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return found.group(1)
        if not line and proc.poll() is not None:
            break
    pytest.fail("the agent never said where its probe is")


class ProbeLoop:
    """GET /readyz every 50 ms, as a load balancer would, keeping each answer with the
    time just before it was asked and just after it came."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.answers: list[tuple[float, float, int, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with httpx.Client(trust_env=False, timeout=10) as client:
            while not self._stop.is_set():
                asked = time.time()
                try:
                    answer = client.get(f"{self.url}/readyz")
                except httpx.HTTPError:
                    continue
                self.answers.append((asked, time.time(), answer.status_code, answer.text))
                self._stop.wait(0.05)

    def last(self) -> tuple[float, float, int, str] | None:
        return self.answers[-1] if self.answers else None

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=20)


@pytest.mark.slow
def test_a_probe_loop_sees_the_vm_leave_and_rejoin_rotation(tmp_path: Path,
                                                            hook: Path) -> None:
    policy = write_policy(tmp_path, POLICY.format(hook=hook))
    with Emulator(parse_scenario(SCENARIO)) as emulator:
        not_before = emulator.real_time(NOTICE)
        proc, lines = start_agent(emulator.url, tmp_path, "--policy", str(policy),
                                  "--health", "127.0.0.1:0",
                                  env=agent_env(tmp_path, HOOK_WAIT="1"))
        loop = None
        try:
            url = _probe_url(proc)
            loop = ProbeLoop(url)
            wait_until(lambda: (last := loop.last()) is not None and last[2] == 503,
                       60, "the probe to say 503")
            healthz = httpx.get(f"{url}/healthz", timeout=10)
            lines.until(agent_said("running", "recover"), 60, "recover to start")
            wait_until(lambda: "recover 'hook.sh' running" in loop.last()[3], 30,
                       "503 while recover runs")
            during_recover = loop.last()
            (tmp_path / "go").touch()
            lines.until(agent_said("finished", "recover"), 60, "recover to finish")
            wait_until(lambda: loop.last()[2] == 200, 30, "200 after recover")
        finally:
            if loop is not None:
                loop.stop()
            assert stop(proc) == 0
    answers = loop.answers
    first_out = next(i for i, a in enumerate(answers) if a[2] == 503)
    assert first_out > 0 and all(a[2] == 200 and a[3] == "ready\n"
                                 for a in answers[:first_out])
    # Out at the right moment: not before drain_before seconds ahead of NotBefore (the
    # answer came after that), and not after it (the last 200 was asked before it). One
    # second for the Date header's whole seconds.
    assert answers[first_out][1] >= not_before - DRAIN_BEFORE - 1.0, answers[first_out]
    assert answers[first_out - 1][0] <= not_before - DRAIN_BEFORE + 1.0, answers[first_out - 1]
    assert f"(drain_before {DRAIN_BEFORE:g} s)" in answers[first_out][3]
    # Then out without a gap until recover finished: through the Reboot itself too.
    back = next(i for i, a in enumerate(answers) if i > first_out and a[2] == 200)
    out = answers[first_out:back]
    assert all(a[2] == 503 and a[3].startswith("not ready: Reboot ") for a in out)
    assert any("has started" in a[3] for a in out)
    assert during_recover[2] == 503 and "recover 'hook.sh' running" in during_recover[3]
    assert all(a[2] == 200 for a in answers[back:])
    assert healthz.status_code == 200 and healthz.text.startswith("polling IMDS")
    # A recover runs after the event: no deadline, said with empty values.
    env = (tmp_path / "env-recover").read_text().splitlines()
    assert "SETUI_DEADLINE=" in env and "SETUI_SECONDS_LEFT=" in env
