"""The "started" notification, in the default words: each fact once."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from setui.emulator.server import Emulator
from tests.support.agent_helpers import EVENT_ID, Sink, agent_env, drain_policy, stop
from tests.support.children import SETUI, Lines, wait_until


@pytest.mark.slow
def test_the_started_message_names_the_notbefore_once(tmp_path: Path, emulator: Emulator,
                                                      hook: Path, sink: Sink) -> None:
    """Approved early, the event starts minutes before its NotBefore: the detail says by
    how much and the default body's "NotBefore" says the time, not the detail as well."""
    policy = drain_policy(tmp_path, hook, url=sink.url, notify=True)
    proc = subprocess.Popen(
        [*SETUI, "agent", "--endpoint", emulator.url, "--interval", "0.2", "--policy",
         str(policy)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        encoding="utf-8", env=agent_env(tmp_path))
    Lines(proc)
    try:
        wait_until(lambda: any("started" in str(b["title"]) for b in sink.bodies), 60,
                   "the 'started' message")
    finally:
        assert stop(proc) == 0
    [started] = [str(b["message"]) for b in sink.bodies if "started" in str(b["title"])]
    assert started.count("NotBefore") == 1 and "NotBefore -" not in started, started
    assert f"Event {EVENT_ID} (Reboot, Started, source User) started: started " in started
    assert " early; approved by policy:drain " in started, started
    # The NotBefore it had while scheduled: the emulator's, 15 minutes after it appeared.
    assert re.search(r"\. NotBefore \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC; resources app-vm-1; "
                     r"rule drain\.$", started), started
