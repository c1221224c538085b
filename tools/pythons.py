"""`make test-pythons`: the fast test tier under every Python setui claims (3.10 to 3.13).

For each version it finds an interpreter (``python3.X`` on PATH that really runs, else one
under pyenv's root), makes ``.venv-3.X`` beside the checkout, installs setui with its dev
and agent extras there, and runs ``pytest -m "not slow"``. A version with no interpreter
on this machine is said to be untested, never passed over in silence. Exits 1 if any
version that ran failed, 2 if none could run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VERSIONS = ("3.10", "3.11", "3.12", "3.13")  # as pyproject.toml's classifiers claim


def _runs(candidate: str, version: str) -> bool:
    try:
        done = subprocess.run(
            [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and done.stdout.strip() == version


def find(version: str) -> str | None:
    """An interpreter of ``version``, or None."""
    on_path = shutil.which(f"python{version}")
    if on_path and _runs(on_path, version):
        return on_path
    root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    for found in sorted(Path(root, "versions").glob(f"{version}.*/bin/python{version}")):
        if _runs(str(found), version):
            return str(found)
    return None


def run(version: str, python: str) -> bool:
    venv = ROOT / f".venv-{version}"
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    if not (venv / "pyvenv.cfg").exists():
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "--quiet", "-e",
                    f"{ROOT}[dev,agent]"], check=True)
    done = subprocess.run([str(bin_dir / "python"), "-m", "pytest", "-q", "-m", "not slow",
                           "-p", "no:cacheprovider"], cwd=ROOT)
    return done.returncode == 0


def main() -> int:
    results: dict[str, str] = {}
    for version in VERSIONS:
        python = find(version)
        if python is None:
            results[version] = "untested: no interpreter on this machine"
            continue
        print(f"== Python {version}: {python}", flush=True)
        try:
            results[version] = "passed" if run(version, python) else "FAILED"
        except subprocess.CalledProcessError as exc:
            results[version] = f"FAILED to set up: {exc}"
    print("\nPython  fast tier")
    for version, result in results.items():
        print(f"{version:<7} {result}")
    ran = [r for r in results.values() if not r.startswith("untested")]
    if not ran:
        return 2
    return 0 if all(r == "passed" for r in ran) else 1


if __name__ == "__main__":
    sys.exit(main())
