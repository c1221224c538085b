"""`make test-textual-latest`: the UI tests against the newest Textual on the index.

setui pins Textual to the minor version its workarounds were written for (setui.ui.compat,
``textual~=8.2.8`` in pyproject.toml). Before that pin moves, this says what the next
release would break: it makes ``.venv-textual-latest`` beside the checkout, installs setui
with its dev and agent extras, upgrades Textual past the pin to the newest release the
index has, and runs the tests that drive the dashboard, the replay and the fleet view.
pip says the upgrade conflicts with the pin: that is the point. Not part of ``make test``.
Exits with pytest's status.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv-textual-latest"
# Every test that runs one of setui's Textual apps.
UI_TESTS = (
    "tests/ui",
    "tests/replay/test_replay_screen.py",
    "tests/fleet/test_fleet_app.py",
    "tests/agent/test_dashboard_agent.py",
    "tests/hostile/test_dashboard_hostile.py",
    "tests/faults/test_fault_matrix_dashboard.py",
)


def main(argv: list[str]) -> int:
    bin_dir = VENV / ("Scripts" if os.name == "nt" else "bin")
    python = str(bin_dir / "python")
    if not (VENV / "pyvenv.cfg").exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    subprocess.run([python, "-m", "pip", "install", "--quiet", "-e", f"{ROOT}[dev,agent]"],
                   check=True)
    pinned = _version(python)
    # Past the pin on purpose: pip's resolver warns that setui asks for another version.
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--upgrade", "textual"],
                   check=True)
    newest = _version(python)
    print(f"== Textual {newest} (the pin installs {pinned})"
          + ("" if newest != pinned else ": the newest release is the one pinned"),
          flush=True)
    done = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *(argv or UI_TESTS)], cwd=ROOT)
    print(f"== Textual {newest}: the UI tests "
          + ("passed" if done.returncode == 0 else "FAILED"), flush=True)
    return done.returncode


def _version(python: str) -> str:
    done = subprocess.run([python, "-c", "from importlib import metadata; "
                           "print(metadata.version('textual'))"],
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
