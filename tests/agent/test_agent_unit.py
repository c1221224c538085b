"""The shipped agent unit runs `setui agent` (`setui service print`), and systemd accepts
it; without a policy it observes (as it says), and the warnings name what the unit could
not see."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from setui.emulator.server import Emulator
from setui.install import unit
from setui.install.unit import AGENT_UNIT, policy_problems, render_unit
from tests.support.agent_helpers import agent_env, start_agent, stop
from tests.support.children import SETUI


def _values(text: str, key: str) -> list[str]:
    return [line.partition("=")[2] for line in text.splitlines()
            if line.startswith(f"{key}=")]


def test_the_agent_unit_runs_setui_agent_with_the_default_policy(tmp_path: Path) -> None:
    text = render_unit("/opt/setui/bin/python")
    assert _values(text, "ExecStart") == [
        "/opt/setui/bin/python -m setui.cli agent --data-dir /var/lib/setui"]
    assert _values(text, "Environment") == ["SETUI_CONFIG=/etc/setui/config.toml"]
    assert _values(text, "IPAddressDeny") == []  # notifications leave the VM


@pytest.mark.slow
def test_service_print_agent_and_systemd_analyze_verify(tmp_path: Path) -> None:
    done = subprocess.run([*SETUI, "service", "print"], capture_output=True,
                          text=True, timeout=60, env=agent_env(tmp_path))
    assert done.returncode == 0, done.stderr
    assert " -m setui.cli agent " in done.stdout
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian: apt-get install systemd)")
    unit_file = tmp_path / AGENT_UNIT
    unit_file.write_text(done.stdout, encoding="utf-8")
    checked = subprocess.run([analyze, "verify", str(unit_file)], capture_output=True,
                             text=True, timeout=120, check=False)
    assert checked.returncode == 0 and not checked.stderr.strip(), checked.stderr


@pytest.mark.slow
def test_the_units_command_without_a_policy_observes_and_a_named_one_must_exist(
        tmp_path: Path, emulator: Emulator) -> None:
    # The unit's own command line, with its config in a directory holding no policy: it
    # must run (observing), not exit 2, which RestartPreventExitStatus=2 would never undo.
    text = render_unit(sys.executable)
    argv = shlex.split(_values(text, "ExecStart")[0])
    assert argv[1:4] == ["-m", "setui.cli", "agent"]
    arguments = [a.replace("/var/lib/setui", str(tmp_path / "data")) for a in argv[4:]]
    etc = tmp_path / "etc"
    etc.mkdir()
    env = agent_env(tmp_path, SETUI_CONFIG=str(etc / "config.toml"))
    proc, lines = start_agent(emulator.url, tmp_path, *arguments, env=env)
    try:
        lines.until(lambda line: '"change": "appeared"' in line, 30, "it to observe")
    finally:
        assert stop(proc) == 0
    errors = proc.stderr.read() if proc.stderr else ""
    assert f"no policy ({etc / 'policy.toml'} does not exist): observing only" in errors
    # A policy someone named is another matter: a missing one is an error.
    named = subprocess.run([*SETUI, "agent", "--endpoint", emulator.url, "--policy",
                            str(etc / "missing.toml")], capture_output=True, text=True,
                           timeout=60, env=env)
    assert named.returncode == 2 and "cannot read the policy" in named.stderr


@pytest.mark.slow
def test_the_default_policy_beside_the_config_file_is_the_one_used(
        tmp_path: Path, emulator: Emulator) -> None:
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "policy.toml").write_text('[[rule]]\nname = "tell"\nevent_source = "User"\n')
    env = agent_env(tmp_path, SETUI_CONFIG=str(etc / "config.toml"))
    proc, lines = start_agent(emulator.url, tmp_path, env=env)
    try:
        lines.until(lambda line: '"agent": "matched"' in line and '"tell"' in line, 30,
                    "the default policy's rule")
    finally:
        assert stop(proc) == 0


@pytest.mark.slow
def test_the_warnings_name_every_path_the_unit_cannot_see(tmp_path: Path) -> None:
    system = Path("/opt/setui/lib/setui")
    in_tmp = unit.unit_problems("/tmp/venv/bin/python", system)
    assert len(in_tmp) == 1 and "/tmp/venv/bin/python, is under /tmp" in in_tmp[0]
    assert "PrivateTmp=" in in_tmp[0]
    assert "/var/tmp" in unit.unit_problems("/var/tmp/v/bin/python", system)[0]
    # The agent's unit: its policy (here in /tmp) and each hook it could not run.
    config = tmp_path / "config.toml"
    policy = tmp_path / "policy.toml"
    policy.write_text('[[rule]]\nname = "drain"\nprepare = "/var/tmp/drain"\n'
                      'recover = "/home/alice/undrain"\n')
    problems = policy_problems(config)
    assert len(problems) == 2, problems
    assert f"the policy, {policy}, is under /tmp" in problems[0]
    assert "the prepare hook of rule drain, /var/tmp/drain, is under /var/tmp" in problems[1]
    assert "PrivateTmp=" in problems[1]  # a home directory it sees (read-only): not named
    # Named in the config file instead: that one is checked.
    config.write_text('policy = "/var/tmp/policy.toml"\n')
    assert "/var/tmp/policy.toml, is under /var/tmp" in policy_problems(config)[0]
    shown = subprocess.run([*SETUI, "service", "print"], capture_output=True,
                           text=True, timeout=60, env=agent_env(tmp_path))
    assert shown.returncode == 0
