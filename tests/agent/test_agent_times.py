"""The agent writes time one way (tests/support/timeforms.py): its lines as watch's, a hook's
environment for machines (ISO 8601 UTC), and its notifications as people read them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from setui.emulator.server import Emulator
from tests.support.agent_helpers import Sink, agent_env, stop, write_policy
from tests.support.children import SETUI, Lines, wait_until
from tests.support.timeforms import MACHINE, foreign_in_env, foreign_in_text


@pytest.mark.slow
def test_agent_lines_hook_environment_and_messages(tmp_path: Path, emulator: Emulator,
                                                    hook: Path, sink: Sink) -> None:
    policy = write_policy(tmp_path, f"""
[notify]
urls = ["{sink.url}"]
title = "$change $event_type"
body = "NotBefore $not_before: $detail"

[[rule]]
name = "user-initiated"
event_source = "User"
this_vm = true
prepare = "{hook}"
notify = true
""")
    proc = subprocess.Popen(
        [*SETUI, "agent", "--endpoint", emulator.url, "--interval", "0.2", "--policy",
         str(policy)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        encoding="utf-8", env=agent_env(tmp_path, TZ="Europe/Oslo"))
    lines = Lines(proc)
    try:
        lines.until(lambda line: " agent " in line and "prepare" in line
                    and "exited 0" in line, 60, "the prepare hook to end")
        wait_until(lambda: len(sink.bodies) >= 1, 30, "a message")
    finally:
        assert stop(proc) == 0
    env = (tmp_path / "env-prepare").read_text().splitlines()
    [not_before] = [line for line in env if line.startswith("SETUI_NOT_BEFORE=")]
    assert MACHINE.fullmatch(not_before.split("=", 1)[1]), not_before
    said = [line for line in lines.seen if " agent " in line]
    assert said and all(line[:24].endswith(" UTC ") for line in said), said
    foreign = (foreign_in_text("".join(lines.seen), "agent lines")
               + foreign_in_env(env, "hook environment")
               + [f for body in sink.bodies
                  for f in foreign_in_text(str(body["message"]), "message")])
    assert not foreign, "\n".join(foreign)
