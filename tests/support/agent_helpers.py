"""Helpers for `setui agent` tests: the in-process emulator, a hook, a notification sink,
and the agent as a real child process."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from setui.emulator.scenario import parse_scenario
from setui.emulator.server import Emulator
from tests.support.children import SETUI, Lines, wait_until
from tests.support.emulated import posts as posts

EVENT_ID = "F020BA2E-3BC0-4C40-A10B-86575A9EABD5"
USER_REBOOT = f"""
name = "agent-user-reboot"
vm_name = "app-vm-1"
tail = 5
approval_delay = 0.5

[[events]]
id = "{EVENT_ID}"
type = "Reboot"
source = "User"
at = 0
notice = "15m"
duration = -1
"""

# A hook that notes each run, waits for a file when told to, and exits as told.
HOOK = """#!/bin/sh
echo "$SETUI_HOOK $SETUI_EVENT_ID $SETUI_EVENT_TYPE this_vm=$SETUI_THIS_VM" >> "$HOOK_DIR/runs"
cat > "$HOOK_DIR/stdin-$SETUI_HOOK.json"
env | grep '^SETUI_' | sort > "$HOOK_DIR/env-$SETUI_HOOK"
if [ -n "$HOOK_WAIT" ]; then
  while [ ! -e "$HOOK_DIR/go" ]; do sleep 0.05; done
fi
echo "prepared the VM"
exit "${HOOK_EXIT:-0}"
"""


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    emu = Emulator(parse_scenario(USER_REBOOT), speed=1.0, identity={
        "vmScaleSetName": "web-ss", "placementGroupId": "pg-1", "resourceGroupName": "rg-web",
        "subscriptionId": "sub-1", "zone": "2", "location": "westeurope"})
    emu.start()
    yield emu
    emu.stop()


@pytest.fixture
def hook(tmp_path: Path) -> Path:
    path = tmp_path / "hook.sh"
    path.write_text(HOOK)
    path.chmod(0o755)
    return path


def more_polls(emu: Emulator, count: int = 5) -> None:
    """Until the emulator has answered ``count`` more requests: time for the agent to
    have done what it would do, shown by its own polls rather than a fixed pause."""
    seen = len(emu.requests)
    wait_until(lambda: len(emu.requests) >= seen + count, 60, f"{count} more polls")


def sent(tmp_path: Path, endpoint: str) -> int:
    """How many of the agent's messages its store says were sent."""
    from setui.store import Store
    from setui.store.agent import AgentLog

    with Store.open_dir(tmp_path / "data", readonly=True) as store:
        return sum(n.state == "sent" for n in AgentLog(store, endpoint).notifications())


def write_policy(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(text)
    return path


# The policy of the "how it is checked": drain (a hook), then approve.
DRAIN = """
[notify]
urls = ["{url}"]

[[rule]]
name = "drain"
event_type = "Reboot"
event_source = "User"
this_vm = true
prepare = "{hook}"
approve = "after-prepare"
notify = {notify}
"""


def drain_policy(tmp_path: Path, hook: Path, url: str = "json://127.0.0.1:9/x",
                 notify: bool = False) -> Path:
    return write_policy(tmp_path, DRAIN.format(url=url, hook=hook,
                                               notify="true" if notify else "false"))


class Sink:
    """A plain HTTP server on loopback that keeps every JSON body POSTed to it."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.fail = 0  # answer this many requests with 500 first
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                data = self.rfile.read(length)
                if sink.fail > 0:
                    sink.fail -= 1
                    self.send_response(500)
                    self.end_headers()
                    return
                sink.bodies.append(json.loads(data or b"{}"))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"json://127.0.0.1:{self.port}/notify"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def sink() -> Iterator[Sink]:
    server = Sink()
    yield server
    server.close()


def agent_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["SETUI_DATA_DIR"] = str(tmp_path / "data")
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONIOENCODING"] = "utf-8"
    env["HOOK_DIR"] = str(tmp_path)
    env.update(extra)
    return env


def start_agent(url: str, tmp_path: Path, *extra: str,
                env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], Lines]:
    proc = subprocess.Popen(
        [*SETUI, "agent", "--endpoint", url, "--interval", "0.2", "--json", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8",
        env=env or agent_env(tmp_path))
    return proc, Lines(proc)


def stop(proc: subprocess.Popen[str]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=20)


def ended(proc: subprocess.Popen[str], told: bool) -> int:
    """The exit status of an agent: waited for if it was told to stop already (``told``:
    SIGTERM sent), else stopped. Told twice, a SIGTERM that lands after its event loop
    closed, while it exits on its own, ends it as the signal's default does (-15)."""
    if not told:
        return stop(proc)
    try:
        return proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail("the agent did not end within 60 s of its SIGTERM")


def records(lines: Lines) -> list[dict[str, object]]:
    return [json.loads(line) for line in lines.seen if line.startswith("{")]


def agent_said(kind: str, step: str | None = None):  # type: ignore[no-untyped-def]
    def done(line: str) -> bool:
        if not line.startswith("{"):
            return False
        record = json.loads(line)
        return record.get("agent") == kind and (step is None or record.get("step") == step)
    return done


METRICS_LINE = re.compile(r"setui agent: metrics at (http://127\.0\.0\.1:\d+/metrics)")


def metrics_url(proc: subprocess.Popen[str]) -> str:
    """The URL the agent says it serves its metrics at (its stderr's first such line)."""
    assert proc.stderr is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        found = METRICS_LINE.search(line)
        if found:
            return found.group(1)
        if not line and proc.poll() is not None:
            break
    pytest.fail("the agent never said where its metrics are")
