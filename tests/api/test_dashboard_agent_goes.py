"""What a dashboard attached to the agent says when the agent goes: stopping while it
waits for a hook (its stop grace), or killed outright. A real agent on a loopback
emulator, the real dashboard under Pilot."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from setui.api.attach import attach
from setui.api.client import AgentClient
from setui.emulator.scenario import parse_scenario
from setui.emulator.server import Emulator
from setui.settings.config import Config
from setui.ui.attached import AttachedApp
from setui.ui.widgets.status import SKEW_SHOWN, StatusBar
from tests.support.api_helpers import plain_env, start_agent, stop
from tests.support.children import wait_until
from tests.support.dashboard import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.name != "posix", reason="Unix sockets")]

EVENT_ID = "F020BA2E-3BC0-4C40-A10B-86575A9EABD5"
SCENARIO = f"""
name = "goes"
vm_name = "app-vm-1"
tail = 600

[[events]]
id = "{EVENT_ID}"
type = "Reboot"
source = "User"
at = 0
notice = "15m"
duration = -1
"""
HOOK = """#!/bin/sh
touch "$HOOK_DIR/prepare-running"
while [ ! -e "$HOOK_DIR/go" ]; do sleep 0.05; done
"""
POLICY = """
[[rule]]
name = "drain"
event_type = "Reboot"
prepare = "{hook}"
approve = "after-prepare"
"""


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    emu = Emulator(parse_scenario(SCENARIO), speed=1.0)
    emu.start()
    yield emu
    emu.stop()


def _dashboard(sock: Path) -> AttachedApp:
    client, words = attach(Config(socket=sock))
    assert client is not None, words
    return AttachedApp(agent=client, config=Config(socket=sock))


def _status(app: AttachedApp) -> str:
    return app.main_screen.query_one(StatusBar).plain()


async def test_during_the_stop_grace_the_dashboard_says_what_the_agent_waits_for(
        tmp_path: Path, emulator: Emulator) -> None:
    hook = tmp_path / "hook.sh"
    hook.write_text(HOOK)
    hook.chmod(0o755)
    (tmp_path / "policy.toml").write_text(POLICY.format(hook=hook))
    env = plain_env(tmp_path, sock="api.sock")
    proc, _ = start_agent(emulator.url, tmp_path, "--policy", str(tmp_path / "policy.toml"),
                          "--stop-grace", "120", env=env)
    try:
        app = _dashboard(tmp_path / "api.sock")
        async with app.run_test(size=(160, 36)) as pilot:
            await wait_for(pilot, lambda: (tmp_path / "prepare-running").exists())
            proc.send_signal(signal.SIGTERM)
            await wait_for(pilot, lambda: "agent stopping" in _status(app))
            text = _status(app)
            assert "waiting up to 120 s for prepare" in text, text
            assert "no agent at" not in text and "restarting" not in text, text
            (tmp_path / "go").touch()
            wait_until(lambda: proc.poll() is not None, 60, "the agent to end")
    finally:
        (tmp_path / "go").touch()
        assert stop(proc) == 0


async def test_an_agent_killed_is_not_said_to_be_restarting(
        tmp_path: Path, emulator: Emulator) -> None:
    env = plain_env(tmp_path, sock="api.sock")
    proc, _ = start_agent(emulator.url, tmp_path, env=env)
    try:
        app = _dashboard(tmp_path / "api.sock")
        async with app.run_test(size=(160, 36)) as pilot:
            await wait_for(pilot, lambda: app.session.document is not None)
            proc.kill()
            proc.wait(timeout=60)
            await wait_for(pilot, lambda: "reconnecting" in _status(app))
            text = _status(app)
            assert "agent not reachable: reconnecting" in text, text
            assert "restarting" not in text, text
    finally:
        stop(proc)


def test_a_fresh_agent_on_this_hosts_clock_says_no_skew(tmp_path: Path,
                                                        emulator: Emulator) -> None:
    """The service's Date and the VM's clock agree (one host): each state read for the
    agent's first polls says a skew too small to warn of (the Date has whole seconds). The
    quiet answers are taken in when the state is read, a while after they arrived; held
    against the clock of when they were taken in, they read as a skew of seconds that
    grew with their age (shown as "this VM's clock is 3 s ahead" after reconnecting)."""
    env = plain_env(tmp_path, sock="api.sock")
    proc, _ = start_agent(emulator.url, tmp_path, env=env, interval="1")
    skews: list[float] = []
    try:
        with AgentClient.connect(tmp_path / "api.sock") as client:
            last = [0.0]

            def read() -> bool:  # four reads a second, as a dashboard's redraws may
                if time.monotonic() - last[0] >= 0.25:
                    last[0] = time.monotonic()
                    skew = client.state()[0].state.health.clock_skew
                    if skew is not None:
                        skews.append(skew)
                return len([r for r in emulator.requests if r.method == "GET"]) >= 12
            wait_until(read, 60, "twelve polls")
    finally:
        assert stop(proc) == 0
    # What the status line would warn of (ui.widgets.status), never.
    assert skews and all(abs(s) < SKEW_SHOWN for s in skews), skews
