"""An older --api-version says at start what it cannot show: one line on stderr from every
command that reads the events (real processes against the emulator), and in --help."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from setui.emulator.scenario import parse_scenario
from setui.emulator.server import Emulator
from tests.support.children import SETUI, Lines

POSIX = os.name == "posix"
PREEMPT = """
vm_name = "vm-0"
[[events]]
type = "Preempt"
notice = "10m"
"""
OLD = "api-version 2017-08-01 cannot show Preempt or Terminate events and has no " \
      "Description, EventSource or DurationInSeconds; 2020-07-01 has them all"


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with Emulator(parse_scenario(PREEMPT), speed=1.0) as emu:
        yield emu


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "SETUI_DATA_DIR": str(tmp_path / "data"), "PYTHONUNBUFFERED": "1",
            "PYTHONIOENCODING": "utf-8", "SETUI_CONFIG": str(tmp_path / "none.toml")}


def _until_first_line_then_stop(argv: list[str], tmp_path: Path) -> tuple[list[str], str]:
    """Start a long-running command, wait for its first line, Ctrl-C it: (stdout, stderr)."""
    proc = subprocess.Popen([*SETUI, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=_env(tmp_path))
    lines = Lines(proc)
    try:
        lines.until(lambda line: "connection" in line, 30, "the first connection line")
    finally:
        proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 0
    assert proc.stderr is not None
    return lines.seen, proc.stderr.read()


@pytest.mark.slow
@pytest.mark.skipif(not POSIX, reason="SIGINT delivery to a child is POSIX-only here")
@pytest.mark.parametrize("command", ["watch", "agent"])
def test_a_polling_command_says_once_what_an_old_version_cannot_show(
        emulator: Emulator, tmp_path: Path, command: str) -> None:
    _, err = _until_first_line_then_stop(
        [command, "--endpoint", emulator.url, "--api-version", "2017-08-01",
         "--vm-name", "vm-0", "--interval", "0.2"], tmp_path)
    said = [line for line in err.splitlines() if "api-version" in line]
    assert said == [f"setui: {OLD}"], err


@pytest.mark.slow
@pytest.mark.skipif(not POSIX, reason="SIGINT delivery to a child is POSIX-only here")
def test_the_newest_version_says_nothing_of_the_kind(emulator: Emulator, tmp_path: Path) -> None:
    _, err = _until_first_line_then_stop(
        ["watch", "--endpoint", emulator.url, "--vm-name", "vm-0", "--interval", "0.2"],
        tmp_path)
    assert "api-version" not in err, err


@pytest.mark.slow
def test_events_once_says_it_too_and_shows_no_preempt(emulator: Emulator,
                                                      tmp_path: Path) -> None:
    run = subprocess.run([*SETUI, "events", "--endpoint", emulator.url, "--api-version",
                          "2017-11-01", "--vm-name", "vm-0"],
                         capture_output=True, text=True, env=_env(tmp_path), timeout=60)
    assert run.returncode == 0, run.stderr
    assert "setui: api-version 2017-11-01 cannot show Terminate events and has no " \
           "Description, EventSource or DurationInSeconds" in run.stderr
    assert "Preempt" in run.stdout  # 2017-11-01 carries it
    old = subprocess.run([*SETUI, "events", "--endpoint", emulator.url, "--api-version",
                          "2017-08-01", "--vm-name", "vm-0"],
                         capture_output=True, text=True, env=_env(tmp_path), timeout=60)
    assert "Preempt" not in old.stdout and OLD in old.stderr


@pytest.mark.slow
def test_help_says_what_each_older_version_lacks(tmp_path: Path) -> None:
    for argv in (["--help"], ["watch", "--help"], ["agent", "--help"]):
        run = subprocess.run([*SETUI, *argv], capture_output=True, text=True,
                             env={**_env(tmp_path), "COLUMNS": "400"}, timeout=60)
        text = " ".join(run.stdout.split())
        assert "before 2017-11-01 no Preempt; before 2019-01-01 no Terminate; before " \
               "2019-04-01 no Description; before 2019-08-01 no EventSource; before " \
               "2020-07-01 no DurationInSeconds" in text, argv
