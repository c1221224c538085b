"""contrib/hooks/k8s-drain run by a real `setui agent` against the emulator, as the README's
policy lines have it: a Reboot of this VM is cordoned, drained, approved, and uncordoned
once it has passed; a Freeze beside it is left alone (--skip-types Freeze)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from setui.emulator.scenario import parse_scenario
from setui.emulator.server import Emulator
from tests.support.children import SETUI, Lines
from tests.support.hookrun import E1, E2, HOOKS, fake_env, install_fake

pytestmark = pytest.mark.skipif(not os.access("/usr/bin/python3", os.X_OK),
                                reason="the hooks run on the VM's /usr/bin/python3")
NODE = "node-vm-0"
SCENARIO = f"""
name = "k8s-maintenance"
vm_name = "node-vm-0"
tail = 2
approval_delay = 0.5
default_duration = 1

[[events]]
id = "{E1}"
type = "Reboot"
notice = "15m"

[[events]]
id = "{E2}"
type = "Freeze"
notice = "15m"
"""
POLICY = """
[[rule]]
name = "k8s"
event_type = ["Reboot", "Redeploy", "Freeze"]
this_vm = true
prepare = ["{hook}", "prepare", "--node", "{node}", "--skip-types", "Freeze"]
approve = "after-prepare"
recover = ["{hook}", "recover", "--node", "{node}", "--skip-types", "Freeze"]
"""


def _finished(step: str):  # type: ignore[no-untyped-def]
    def done(line: str) -> bool:
        record = json.loads(line) if line.startswith("{") else {}
        return record.get("agent") == "finished" and record.get("step") == step
    return done


@pytest.mark.slow
def test_the_agent_drains_the_node_for_a_reboot_and_uncordons_it_after(
        tmp_path: Path) -> None:
    # Installed as an operator would: root's, in a directory only root writes.
    installed = tmp_path / "hooks"
    installed.mkdir(mode=0o755)
    for name in ("k8s-drain", "setui_hook.py"):
        shutil.copy2(HOOKS / name, installed / name)
    kubectl = install_fake(tmp_path, "kubectl",
                           {NODE: {"unschedulable": False, "annotations": {}}})
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY.format(hook=installed / "k8s-drain", node=NODE))
    env = {**fake_env(kubectl), "SETUI_DATA_DIR": str(tmp_path / "data"),
           "PYTHONUNBUFFERED": "1", "PYTHONIOENCODING": "utf-8"}
    with Emulator(parse_scenario(SCENARIO), speed=1.0) as emulator:
        proc = subprocess.Popen(
            [*SETUI, "agent", "--endpoint", emulator.url, "--interval", "0.2", "--json",
             "--policy", str(policy)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        lines = Lines(proc)
        try:
            for _ in range(2):  # the Reboot's and the Freeze's, in either order
                lines.until(_finished("recover"), 60, "both events to pass and recover")
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
        approved = {r.body for r in emulator.requests if r.method == "POST"}
    assert len(approved) == 2  # each after its prepare exited 0
    # The Freeze was skipped without a call; the Reboot got the whole round.
    assert kubectl.verbs() == ["get", "annotate", "cordon", "drain", "get", "uncordon",
                               "annotate"]
    drain = kubectl.calls()[3]
    assert drain[-1].startswith("--timeout=")
    assert 800 <= int(drain[-1][10:-1]) <= 885  # 15 minutes' notice, less the margin
    assert kubectl.state()[NODE] == {"unschedulable": False, "annotations": {}}
