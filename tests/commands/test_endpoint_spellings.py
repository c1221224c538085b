"""An event approved at ``HTTP://127.0.0.1:P`` is approved at ``http://localhost:P/`` too:
real `setui approve` processes against the emulator over loopback, one POST in all."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from setui.emulator.server import Emulator
from tests.support.emulated import freeze_announced

EVENT_ID = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with freeze_announced() as emu:
        yield emu


def approve(endpoint: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "setui.cli", "approve", "--endpoint", endpoint, EVENT_ID,
         "--yes", "--allow-other-vms"], capture_output=True, text=True, timeout=60,
        env=dict(os.environ, SETUI_DATA_DIR=str(data_dir)), stdin=subprocess.DEVNULL)


@pytest.mark.slow
def test_another_spelling_of_the_endpoint_does_not_approve_again(emulator: Emulator,
                                                                 tmp_path: Path) -> None:
    port = emulator.url.rsplit(":", 1)[1]
    first = approve(f"HTTP://127.0.0.1:{port}", tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    for spelling in (f"http://localhost:{port}/", f"http://127.0.0.1:{port}//",
                     f"http://[::ffff:7f00:1]:{port}/x/..", f"http://2130706433:{port}/."):
        again = approve(spelling, tmp_path)
        assert again.returncode == 1, again.stdout + again.stderr
        assert "already approved by" in again.stdout, again.stdout
    assert len([r for r in emulator.requests if r.method == "POST"]) == 1
