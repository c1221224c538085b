"""What clients do wrong reaches the agent's log through setui's one logging path: a real
agent under the journal (its stderr a file whose device and inode JOURNAL_STREAM names),
a client sending garbage again and again, one line with journald's notice priority."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

from setui.emulator.server import Emulator
from tests.support.api_helpers import agent_env, stop
from tests.support.children import SETUI, wait_until

pytestmark = pytest.mark.slow


def _garbage(path: Path) -> dict[str, Any]:
    """One connection: the hello, a frame that is not JSON, the error frame it earns."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(str(path))
        reader = sock.makefile("rb")
        assert "hello" in json.loads(reader.readline())
        sock.sendall(b"\x1b[2J not json\n")
        answer: dict[str, object] = json.loads(reader.readline())
        return answer


def test_a_client_sending_garbage_is_one_notice_in_the_journal(
        tmp_path: Path, emulator: Emulator) -> None:
    env = agent_env(tmp_path)
    (tmp_path / "run").mkdir()
    api = Path(env["SETUI_SOCKET"])
    journal = tmp_path / "journal.txt"
    with journal.open("w") as stream:
        stat = os.fstat(stream.fileno())
        env["JOURNAL_STREAM"] = f"{stat.st_dev}:{stat.st_ino}"
        proc = subprocess.Popen(
            [*SETUI, "agent", "--endpoint", emulator.url, "--interval", "0.2"],
            stdout=subprocess.DEVNULL, stderr=stream, text=True, env=env)
        try:
            wait_until(lambda: proc.poll() is not None or "API (version" in journal.read_text(),
                       30, "the agent's API")
            assert proc.poll() is None, journal.read_text()
            answers = [_garbage(api) for _ in range(5)]
            wait_until(lambda: "api:" in journal.read_text(), 30, "the complaint")
        finally:
            code = stop(proc)
    assert code == 0
    assert all(a.get("error", {}).get("code") == "bad-request" for a in answers), answers
    lines = journal.read_text().splitlines()
    complaints = [line for line in lines if "api:" in line]
    # Five bad frames within the minute: the first said, the others counted for later.
    assert len(complaints) == 1, lines
    assert complaints[0].startswith("<5>setui agent: api: "), complaints
    assert "\x1b" not in journal.read_text()
