"""This VM's name is learned from IMDS, never guessed from the host name: with the compute
metadata failing first (the emulator's compute-503 fault) and answering later, every
front end says the name is not known, then learns it; the agent's `this_vm` rules wait.
Real processes against the emulator over loopback."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from setui.emulator.faults import parse_faults
from setui.emulator.server import Emulator
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
from tests.support.children import SETUI, Lines, wait_until
from tests.support.dashboard import WIDE, MakeDashboard, status

BROKEN = parse_faults("compute-503=1")


def _stderr(proc: subprocess.Popen[str]) -> str:
    return proc.stderr.read() if proc.stderr else ""


@pytest.mark.slow
def test_the_agent_waits_for_this_vms_name_and_acts_once_imds_gives_it(
        tmp_path: Path, emulator: Emulator) -> None:
    emulator.set_faults(BROKEN)
    policy = write_policy(tmp_path, """
[[rule]]
name = "mine"
event_source = "User"
this_vm = true
approve = "now"
""")
    textfile = tmp_path / "setui.prom"
    proc, lines = start_agent(emulator.url, tmp_path, "--policy", str(policy),
                              "--metrics-file", str(textfile))
    try:
        waiting = lines.until(agent_said("waiting"), 30, "the rule to wait for the name")
        assert json.loads(waiting)["event_id"] == EVENT_ID
        more_polls(emulator)
        assert posts(emulator) == []  # nothing is decided on a guess meanwhile
        emulator.set_faults(None)
        lines.until(agent_said("approved", "approve"), 90, "the approval once it knows")
        # The rest of its identity comes from a question of its own, after the name: the
        # textfile (rewritten at least every 15 s) carries it once it is answered.
        wait_until(lambda: textfile.exists() and 'vm_scale_set="web-ss"' in textfile.read_text(),
                   90, "the metrics' identity from compute metadata")
    finally:
        assert stop(proc) == 0
    errors = _stderr(proc)
    assert "this VM's name is not known yet" in errors
    assert "this VM is app-vm-1, from IMDS" in errors
    assert len(posts(emulator)) == 1
    # The rest of its identity came later too: the metrics' labels carry it.
    info = next(line for line in textfile.read_text().splitlines()
                if line.startswith("setui_vm_info{"))
    assert 'vm_name="app-vm-1"' in info and 'vm_scale_set="web-ss"' in info, info


@pytest.mark.slow
def test_watch_says_this_vm_is_not_known_then_learns_it(
        tmp_path: Path, emulator: Emulator) -> None:
    emulator.set_faults(BROKEN)
    # Its messages and its records in one stream, in the order they were written.
    proc = subprocess.Popen(
        [*SETUI, "watch", "--endpoint", emulator.url, "--interval", "0.2", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, encoding="utf-8",
        env=agent_env(tmp_path))
    lines = Lines(proc)
    try:
        lines.until(lambda line: "this VM's name is not known yet" in line, 30, "the gap")
        appeared = json.loads(lines.until(lambda line: '"appeared"' in line, 30, "the event"))
        assert appeared["this_vm"] is None  # not false: whose it is, is not known
        emulator.set_faults(None)
        lines.until(lambda line: "this VM is app-vm-1, from IMDS" in line, 90, "the name")
        # A later change of the same event, now that the name is known: this VM's.
        request = {"StartRequests": [{"EventId": EVENT_ID}]}
        answer = None
        for _ in range(3):
            answer = httpx.post(f"{emulator.url}/metadata/scheduledevents",
                                params={"api-version": "2020-07-01"},
                                headers={"Metadata": "true"}, json=request)
        assert answer is not None and answer.status_code == 200
        started = json.loads(lines.until(lambda line: '"started"' in line, 30, "the start"))
    finally:
        assert stop(proc) == 0
    assert started["this_vm"] is True


@pytest.mark.slow
def test_events_says_the_name_is_not_known_instead_of_the_host_name(
        tmp_path: Path, emulator: Emulator) -> None:
    emulator.set_faults(BROKEN)
    done = subprocess.run([*SETUI, "events", "--endpoint", emulator.url, "--json"],
                          capture_output=True, text=True, timeout=60, env=agent_env(tmp_path))
    assert done.returncode == 0, done.stderr
    listing = json.loads(done.stdout)
    assert listing["vm_name"] is None
    assert [e["this_vm"] for e in listing["events"]] == [None]
    table = subprocess.run([*SETUI, "events", "--endpoint", emulator.url],
                           capture_output=True, text=True, timeout=60, env=agent_env(tmp_path))
    assert "this VM's name is not known" in table.stdout


async def test_the_dashboard_polls_on_and_learns_the_name_when_imds_gives_it(
        make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    d.emulator.set_faults(BROKEN)
    async with d.app.run_test(size=WIDE) as pilot:
        await d.settle(pilot)  # the events are shown meanwhile: the loop is not held up
        asks: Callable[[], int] = lambda: sum(r.path.endswith("/compute/name")  # noqa: E731
                           for r in d.emulator.requests)
        await d.wait_for(pilot, lambda: asks() >= 2)  # asked again, and still not known
        assert d.app.vm_name is None
        assert "asking IMDS" in status(d)
        d.emulator.set_faults(None)
        await d.wait_for(pilot, lambda: d.app.vm_name == "web-0", timeout=90)
        await d.wait_for(pilot, lambda: "web-0" in status(d))
