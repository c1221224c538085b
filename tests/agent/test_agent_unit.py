"""The shipped agent unit: `setui service print --agent` runs `setui agent` under the
same hardening as the recorder, and systemd accepts it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from agent_helpers import agent_env

from children import SETUI
from setui.commands import service
from setui.commands.service import AGENT_UNIT_NAME, render_unit


def _values(text: str, key: str) -> list[str]:
    return [line.partition("=")[2] for line in text.splitlines()
            if line.startswith(f"{key}=")]


def test_the_agent_unit_runs_setui_agent_with_the_policy(tmp_path: Path) -> None:
    text = render_unit("/opt/setui/bin/python", name=AGENT_UNIT_NAME)
    assert _values(text, "ExecStart") == [
        "/opt/setui/bin/python -m setui.cli agent --data-dir /var/lib/setui "
        "--policy /etc/setui/policy.toml"]
    recorder = service.template()
    for key in ("Type", "WatchdogSec", "DynamicUser", "StateDirectory", "ProtectSystem",
                "NoNewPrivileges", "RestartPreventExitStatus", "SystemCallFilter"):
        assert _values(text, key) == _values(recorder, key), key
    assert _values(text, "IPAddressDeny") == []  # notifications leave the VM


@pytest.mark.slow
def test_service_print_agent_and_systemd_analyze_verify(tmp_path: Path) -> None:
    done = subprocess.run([*SETUI, "service", "print", "--agent"], capture_output=True,
                          text=True, timeout=60, env=agent_env(tmp_path))
    assert done.returncode == 0, done.stderr
    assert " -m setui.cli agent " in done.stdout
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian: apt-get install systemd)")
    unit = tmp_path / AGENT_UNIT_NAME
    unit.write_text(done.stdout, encoding="utf-8")
    checked = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True,
                             timeout=120, check=False)
    assert checked.returncode == 0 and not checked.stderr.strip(), checked.stderr
