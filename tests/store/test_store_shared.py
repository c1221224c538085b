"""The shared store a team sets up: /var/lib/setui owned by root, group setui, mode 2770.

Here a directory in /tmp stands in for /var/lib/setui (the mode is what makes it shared,
not the path), the group ``users`` for ``setui``, and ``nobody`` (uid 65534) and uid
65533 for two operators: real processes under those uids (setpriv) approve against the
real emulator into one chain. Skipped, saying why, where that cannot run.
"""

from __future__ import annotations

import grp
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from setui.emulator.scenario import load_scenario
from setui.emulator.server import Emulator, ManualClock
from setui.store import Store
from setui.store.place import default_data_dir, usable_shared

ROOT = Path(__file__).parent.parent.parent
EVENT_ID = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"

pytestmark = pytest.mark.skipif(
    os.name != "posix" or os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and setpriv (util-linux) to run operators under other uids")


@pytest.fixture
def group() -> int:
    try:
        return grp.getgrnam("users").gr_gid
    except KeyError:
        pytest.skip("no group 'users' to stand in for 'setui'")


@pytest.fixture
def shared(group: int) -> Iterator[Path]:
    """A shared store directory the other uids can reach (pytest's tmp is root's 0700)."""
    base = Path(tempfile.mkdtemp(prefix="setui-shared-", dir="/tmp"))
    base.chmod(0o755)
    path = base / "setui"
    path.mkdir()
    os.chown(path, 0, group)
    path.chmod(0o2770)
    yield path
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    clock = ManualClock()
    with Emulator(load_scenario("live-migration"), clock=clock) as emu:
        clock.advance(61)
        yield emu


def run_as(uid: int, groups: list[int], *args: str,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    ids = ["--reuid", str(uid), "--regid", str(uid)]
    ids += ["--groups", ",".join(map(str, groups))] if groups else ["--clear-groups"]
    full = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT / "src"),
            "HOME": "/nonexistent", "SETUI_CONFIG": "/nonexistent/config.toml",
            "XDG_DATA_HOME": "/nonexistent/share", "SETUI_AUDIT_FORWARD": "none",
            **(env or {})}
    return subprocess.run(["setpriv", *ids, sys.executable, "-m", "setui.cli", *args],
                          env=full, capture_output=True, text=True, timeout=60, cwd="/")


@pytest.mark.slow
def test_every_operator_in_the_group_approves_into_one_chain(
        shared: Path, group: int, emulator: Emulator) -> None:
    first = run_as(65534, [group], "approve", "--endpoint", emulator.url, EVENT_ID, "--yes",
                   "--allow-other-vms", env={"SETUI_DATA_DIR": str(shared)})
    assert first.returncode == 0, first.stdout + first.stderr
    second = run_as(65533, [group], "approve", "--endpoint", emulator.url, EVENT_ID, "--yes",
                    "--allow-other-vms", env={"SETUI_DATA_DIR": str(shared)})
    # Already approved by the first (or started by now): refused, and the second
    # operator's record of it goes into the same chain.
    assert "cannot" not in second.stderr, second.stdout + second.stderr
    listing = run_as(65533, [group], "audit", "--json", env={"SETUI_DATA_DIR": str(shared)})
    assert listing.returncode == 0, listing.stderr
    users = {json.loads(line)["user"] for line in listing.stdout.splitlines()}
    assert users == {"nobody", "uid 65533"}
    with Store.open_dir(shared, readonly=True) as store:
        assert store.verify_audit().ok
    for path in shared.iterdir():
        if path.name.startswith("setui.db"):
            st = path.stat()
            assert stat.S_IMODE(st.st_mode) == 0o660 and st.st_gid == group, path


@pytest.mark.slow
def test_an_operator_outside_the_group_cannot_use_it(shared: Path,
                                                     emulator: Emulator) -> None:
    done = run_as(65534, [], "approve", "--endpoint", emulator.url, EVENT_ID, "--yes",
                  "--allow-other-vms", env={"SETUI_DATA_DIR": str(shared)})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Permission denied" in done.stdout or "permission denied" in done.stdout
    assert not any(r.method == "POST" for r in emulator.requests)


def test_the_shared_store_is_the_default_where_it_exists(shared: Path, group: int,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         ) -> None:
    monkeypatch.delenv("SETUI_DATA_DIR")
    assert usable_shared(shared) and default_data_dir(shared) == shared
    # SETUI_DATA_DIR (and --data-dir, the config) still win.
    monkeypatch.setenv("SETUI_DATA_DIR", "/elsewhere")
    assert default_data_dir(shared) == Path("/elsewhere")
    monkeypatch.delenv("SETUI_DATA_DIR")
    # Not the shared mode (group-writable but not 2770, or not root's): not the default.
    shared.chmod(0o770)
    assert not usable_shared(shared) and default_data_dir(shared) != shared


def test_a_group_writable_directory_that_is_not_the_shared_mode_refuses(
        shared: Path) -> None:
    from setui.store import StoreError

    shared.chmod(0o770)  # no setgid bit: not the documented shared mode
    with pytest.raises(StoreError, match="writable by its group"):
        Store.open_dir(shared)
