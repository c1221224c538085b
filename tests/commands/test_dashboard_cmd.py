"""`setui` and `setui demo` without a terminal: a message naming what to use, exit 2."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.children import SETUI

pytestmark = pytest.mark.slow  # starts processes: the slow tier (docs/testing.md)


def _env(tmp_path: Path) -> dict[str, str]:
    # Nothing listens here: a dashboard that started anyway would never touch a real VM.
    return {**os.environ, "SETUI_DATA_DIR": str(tmp_path / "data"),
            "SETUI_ENDPOINT": "http://127.0.0.1:9", "PYTHONIOENCODING": "utf-8"}


@pytest.mark.parametrize(("argv", "names"), [
    ([], ["`setui watch`", "`setui events`"]),
    (["demo"], ["`setui demo --headless`"]),
])
def test_the_dashboard_refuses_a_stdout_that_is_not_a_terminal(
        argv: list[str], names: list[str], tmp_path: Path) -> None:
    done = subprocess.run([*SETUI, *argv], capture_output=True, text=True, timeout=30,
                          env=_env(tmp_path), stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert done.stdout == ""  # no escape codes in the file
    assert "the dashboard needs a terminal, and standard output is not one" in done.stderr
    assert all(name in done.stderr for name in names), done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "data").exists()  # nothing opened, nothing recorded
