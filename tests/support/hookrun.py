"""Running contrib/hooks as setui agent does (the event in SETUI_* variables), against a
fake tool on PATH that keeps its state in a file and records every call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HOOKS = ROOT / "contrib" / "hooks"
FAKES = ROOT / "tests" / "contrib" / "fakes"
E1 = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
E2 = "F020BA2E-3BC0-4C40-A10B-86575A9EABD5"
# Left out of a hook's environment: the test process's own would change what it does.
_THEIRS = ("SETUI_", "NODE_NAME", "KUBECONFIG", "CREDENTIALS_DIRECTORY", "FAKE_")


@dataclass
class Fake:
    """A fake ``name`` in ``bin``, its state file and the file of its calls."""

    name: str
    bin: Path
    state_file: Path
    calls_file: Path

    def state(self) -> Any:
        return json.loads(self.state_file.read_text())

    def calls(self) -> list[list[str]]:
        if not self.calls_file.exists():
            return []
        return [json.loads(line) for line in self.calls_file.read_text().splitlines()]

    def verbs(self) -> list[str]:
        """Each call's verb (its first word after --kubeconfig FILE)."""
        return [(c[2:] if c[:1] == ["--kubeconfig"] else c)[0] for c in self.calls()]

    def forget(self) -> None:
        self.calls_file.unlink(missing_ok=True)


def install_fake(tmp_path: Path, name: str, state: Any) -> Fake:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / name
    tool.write_text(f"#!{sys.executable}\n" + (FAKES / f"{name}.py").read_text())
    tool.chmod(0o755)
    fake = Fake(name, bin_dir, tmp_path / f"{name}-state.json", tmp_path / f"{name}-calls")
    fake.state_file.write_text(json.dumps(state))
    return fake


def fake_env(fake: Fake) -> dict[str, str]:
    """This process's environment without what would change a hook's course, the fake
    first on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_THEIRS)}
    env.update(PATH=f"{fake.bin}{os.pathsep}/usr/bin:/bin", FAKE_STATE=str(fake.state_file),
               FAKE_CALLS=str(fake.calls_file))
    return env


def hook_env(fake: Fake, *, step: str, **more: str | None) -> dict[str, str]:
    """What setui agent gives a hook (a Reboot, 300 s left), changed by ``more`` (None
    leaves a variable out)."""
    env = {**fake_env(fake), "SETUI_HOOK": step, "SETUI_EVENT_ID": E1,
           "SETUI_EVENT_TYPE": "Reboot", "SETUI_EVENT_STATUS": "Scheduled",
           "SETUI_SECONDS_LEFT": "300", **more}
    return {k: v for k, v in env.items() if v is not None}


def run_hook(hook: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The hook as the agent runs it: the file itself (its #! line), no shell."""
    return subprocess.run([str(HOOKS / hook), *args], env=env, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
