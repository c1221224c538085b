"""`setui watch` as a process against an emulator serving hostile text.

Whatever the service sends, no raw ESC, BEL, other C0/C1 control or bidi control byte
may reach stdout or stderr, in the human lines or in --json, and watch keeps running.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from setui.emulator.server import Emulator
from tests.support.children import SETUI
from tests.support.hostile_data import RAW_CONTROL, hostile_scenario_data, write_hostile_scenario

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.name != "posix", reason="SIGINT to a child is POSIX-only")]


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(SETUI_DATA_DIR=str(tmp_path / "data"), PYTHONUNBUFFERED="1",
               PYTHONIOENCODING="utf-8")
    return env


def _read_lines(proc: subprocess.Popen[bytes], wanted: int, timeout: float = 30) -> list[bytes]:
    """Raw stdout lines until ``wanted`` arrived; fails (not hangs) after ``timeout``."""
    assert proc.stdout is not None
    stdout = proc.stdout
    arrived: queue.Queue[bytes | None] = queue.Queue()

    def pump() -> None:
        for line in stdout:
            arrived.put(line)
        arrived.put(None)

    threading.Thread(target=pump, daemon=True).start()
    lines: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(lines) < wanted and (left := deadline - time.monotonic()) > 0:
        try:
            line = arrived.get(timeout=left)
        except queue.Empty:
            break
        if line is None:
            break
        lines.append(line)
    if len(lines) < wanted:
        proc.kill()
        err = proc.stderr.read() if proc.stderr else b""
        pytest.fail(f"watch printed {len(lines)} lines: {lines[:3]!r}; stderr {err[-2000:]!r}")
    return lines


def _run_watch(url: str, tmp_path: Path, *extra: str, wanted: int) -> tuple[bytes, bytes]:
    proc = subprocess.Popen([*SETUI, "watch", "--endpoint", url, "--interval", "0.2",
                             "--vm-name", "vm-0", "--no-record", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(tmp_path))
    lines = _read_lines(proc, wanted)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err[-2000:]
    return b"".join(lines), err


@pytest.mark.parametrize("mode", ["human", "json"])
def test_hostile_text_never_reaches_the_terminal_raw(tmp_path: Path, mode: str) -> None:
    scenario = write_hostile_scenario(tmp_path / "hostile.json", hostile_scenario_data())
    extra = ("--json",) if mode == "json" else ()
    with Emulator(scenario) as emulator:
        out, err = _run_watch(emulator.url, tmp_path, *extra, wanted=6)
    for stream in (out, err):
        found = RAW_CONTROL.search(stream)
        assert found is None, (found, stream[max(0, found.start() - 60):found.end() + 60])
    text = out.decode("utf-8")
    if mode == "json":
        records = [json.loads(line) for line in text.splitlines()]
        appeared = [r for r in records if r.get("change") == "appeared"
                    or r.get("kind") == "appeared" or '"appeared"' in json.dumps(r)]
        assert len(appeared) >= 4, records[:2]
        # JSON keeps the text exact (escaped), so a program reading it loses nothing.
        assert any("[bold red]ALERT[/bold red]" in json.dumps(r, ensure_ascii=False)
                   for r in appeared)
    else:
        assert "[bold]huge[/bold]" in text  # markup is shown as it came, not applied
        assert "\\x1b" in text or "\\u001b" in text  # the escape is visible as an escape
        # Human lines are cut: a 100 KB description does not become a 100 KB line.
        assert max(len(line) for line in text.splitlines()) < 2000


def test_a_thousand_events_with_ten_thousand_resources_in_watch(tmp_path: Path) -> None:
    events = [{"id": f"evt-{i:04d}", "type": "Freeze", "notice": 900 + i,
               "description": "[link=x]y[/link]\x1b[2J"} for i in range(1000)]
    events[0]["resources"] = [f"vm-{r}" for r in range(10_000)]
    scenario = write_hostile_scenario(tmp_path / "many.json", hostile_scenario_data(events))
    with Emulator(scenario) as emulator:
        out, err = _run_watch(emulator.url, tmp_path, "--json", wanted=1000)
    assert RAW_CONTROL.search(out) is None and RAW_CONTROL.search(err) is None
