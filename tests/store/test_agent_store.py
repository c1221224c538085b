"""Only the agent writes the store: the agent's store (root, group setui, 0750, files
0640) is read by its group and written by root alone; the shared writable mode is gone.

Real users and a real group (made for the module, removed after it) run real setui
processes (setpriv) against a store root wrote while it stayed open, as the agent's is.
A directory in /tmp stands in for /var/lib/setui (owner, group and mode make it the
agent's, not the path; ``default_data_dir`` is given the path to look at).
"""

from __future__ import annotations

import grp
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from store_helpers import STORY, entry, play

from accounts import Account, made_accounts, needs_accounts
from emulated import freeze_announced
from setui.emulator.server import Emulator
from setui.store import Store, StoreError

ROOT = Path(__file__).parent.parent.parent
EVENT_ID = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
GROUP = "sstore-ops"

pytestmark = needs_accounts


@pytest.fixture(scope="module")
def people() -> Iterator[dict[str, Account]]:
    """sstore-reader (in the store's group) and sstore-outsider (not)."""
    with made_accounts({"sstore-reader": [GROUP], "sstore-outsider": []}, [GROUP]) as made:
        yield made


@pytest.fixture
def group(people: dict[str, Account]) -> int:
    return grp.getgrnam(GROUP).gr_gid


@pytest.fixture
def base() -> Iterator[Path]:
    """A directory every test user can pass through (pytest's tmp is root's 0700)."""
    path = Path(tempfile.mkdtemp(prefix="setui-agent-store-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def agents_store(base: Path, group: int) -> Path:
    """The agent's layout: root, the store's group, 0750 (as `setui service install`
    makes /var/lib/setui)."""
    path = base / "setui"
    path.mkdir()
    os.chown(path, 0, group)
    path.chmod(0o750)
    return path


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with freeze_announced() as emu:
        yield emu


def as_user(account: Account | None, *args: str, env: dict[str, str] | None = None,
            python: bool = False) -> subprocess.CompletedProcess[str]:
    """``setui ARGS`` (or ``python ARGS`` with ``python``) as ``account`` with the groups
    /etc/group gives it (None: root), in a bare environment."""
    ids = [] if account is None else ["setpriv", f"--reuid={account.uid}",
                                      f"--regid={account.gid}", "--init-groups"]
    full = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT / "src"),
            "HOME": "/nonexistent", "SETUI_CONFIG": "/nonexistent/config.toml",
            "XDG_DATA_HOME": "/nonexistent/share", "SETUI_AUDIT_FORWARD": "none",
            **(env or {})}
    command = [sys.executable, *args] if python else [sys.executable, "-m", "setui.cli", *args]
    return subprocess.run([*ids, *command], env=full, capture_output=True, text=True,
                          timeout=120, cwd="/")


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.mark.slow
def test_the_agents_files_are_its_groups_to_read_and_root_alone_writes_them(
        base: Path, group: int, people: dict[str, Account], emulator: Emulator) -> None:
    data = agents_store(base, group)
    # Root writes it and keeps it open, as the agent does (WAL: -wal and -shm stay).
    with Store.open_dir(data) as agent:
        play(agent, STORY)
        agent.audit_log.append(entry())
        names = sorted(p.name for p in data.iterdir())
        assert names == ["setui.db", "setui.db-shm", "setui.db-wal", "setui.db.audit-head"]
        for path in data.iterdir():  # the group reads, whatever root's own group is
            st = os.lstat(path)
            assert (st.st_uid, st.st_gid, mode(path)) == (0, group, 0o640), path
        reader, outsider = people["sstore-reader"], people["sstore-outsider"]
        env = {"SETUI_DATA_DIR": str(data)}
        history = as_user(reader, "history", "--json", env=env)
        assert history.returncode == 0, history.stderr
        assert len(history.stdout.splitlines()) == len(STORY)
        verify = as_user(reader, "audit", "verify", env=env)
        assert verify.returncode == 0 and verify.stdout.startswith("ok"), verify.stdout
        # A member never writes it: setui says whose it is, and nothing is posted.
        approve = as_user(reader, "approve", "--endpoint", emulator.url, EVENT_ID, "--yes",
                          "--allow-other-vms", env=env)
        assert approve.returncode == 1, approve.stdout + approve.stderr
        said = approve.stdout + approve.stderr
        assert "this is the agent's store" in said and "read-only" in said
        assert "approve through the agent" in said and "Traceback" not in said
        assert not any(r.method == "POST" for r in emulator.requests)
        # Nor does SQLite itself let a member write, whatever setui's code says.
        raw = as_user(reader, "-c", (
            "import sqlite3, sys\n"
            "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "try:\n"
            "    c.execute(\"UPDATE meta SET value = 'x'\")\n"
            "except sqlite3.Error as e:\n"
            "    print('refused:', e)\n"
            "else:\n"
            "    print('WROTE')\n"), str(data / "setui.db"), python=True)
        assert raw.stdout.startswith("refused:"), raw.stdout + raw.stderr
        # Someone outside the group reads nothing at all.
        denied = as_user(outsider, "history", env=env)
        assert denied.returncode == 1 and "ermission denied" in denied.stdout + denied.stderr
    with Store.open_dir(data, readonly=True) as check:
        assert [r.action for r in check.audit_log.records()] == ["cancelled"]
        assert check.audit_log.verify().ok


@pytest.mark.slow
def test_the_agents_store_is_the_default_for_whoever_may_read_it(
        base: Path, group: int, people: dict[str, Account]) -> None:
    data = agents_store(base, group)
    with Store.open_dir(data) as agent:
        play(agent, STORY)
    probe = ("import sys; from pathlib import Path\n"
             "from setui.store.place import default_data_dir\n"
             "print(default_data_dir(Path(sys.argv[1])))\n")
    for account, expected in ((people["sstore-reader"], str(data)), (None, str(data)),
                              (people["sstore-outsider"], "/nonexistent/share/setui")):
        done = as_user(account, "-c", probe, str(data), python=True)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == expected, account
    # A front end that would write opens it to read instead, and says why it records
    # and approves nothing there: the dashboard's history and audit screens still work.
    front = ("import sys; from pathlib import Path\n"
             "from setui.config import Config\n"
             "from setui.session import open_store\n"
             "store, problem = open_store(Config(data_dir=Path(sys.argv[1])), or_read=True)\n"
             "print(store.readonly, len(store.history.incarnations(limit=10)), problem)\n")
    done = as_user(people["sstore-reader"], "-c", front, str(data), python=True)
    assert done.returncode == 0, done.stderr
    readonly, rows, problem = done.stdout.strip().split(" ", 2)
    assert (readonly, rows) == ("True", str(len(STORY)))
    assert problem.startswith("this is the agent's store")


@pytest.mark.slow
def test_a_shared_writable_store_is_written_by_nobody_any_more(
        base: Path, group: int, people: dict[str, Account], emulator: Emulator) -> None:
    """The old shared mode (2770, files 0660) let every member rewrite every record."""
    shared = base / "setui"
    shared.mkdir()
    os.chown(shared, 0, group)
    shared.chmod(0o2770)
    env = {"SETUI_DATA_DIR": str(shared)}
    member = as_user(people["sstore-reader"], "approve", "--endpoint", emulator.url,
                     EVENT_ID, "--yes", "--allow-other-vms", env=env)
    said = member.stdout + member.stderr
    assert member.returncode == 1, said
    assert "shared writable store" in said and "service install" in said
    assert not any(r.method == "POST" for r in emulator.requests)
    assert list(shared.iterdir()) == []
    with pytest.raises(StoreError, match="writable by its group"):
        Store.open_dir(shared)  # root too: a store its group can write proves nothing


def test_a_private_store_stays_owner_only(tmp_path: Path) -> None:
    with Store.open_dir(tmp_path / "mine") as store:
        store.audit_log.append(entry())
    assert mode(tmp_path / "mine") == 0o700
    for path in (tmp_path / "mine").iterdir():
        assert mode(path) == 0o600, path


@pytest.mark.slow
def test_the_agents_lock_is_its_groups_to_read(base: Path, group: int) -> None:
    """agent.lock says who holds the store: a member can name the agent too."""
    from setui.agent.lock import AgentLock
    from setui.core.clock import utc_now

    data = agents_store(base, group)
    lock = AgentLock.take(data, since=utc_now(), socket=None)
    try:
        st = os.lstat(data / "agent.lock")
        assert (st.st_uid, st.st_gid, mode(data / "agent.lock")) == (0, group, 0o640)
        assert json.loads((data / "agent.lock").read_text())["pid"] == os.getpid()
    finally:
        lock.release()


@pytest.mark.slow
def test_sqlite_opens_the_agents_store_read_only_for_root_too(base: Path,
                                                             group: int) -> None:
    """Reading never writes: a read-only open of the agent's store changes no file."""
    data = agents_store(base, group)
    with Store.open_dir(data) as agent:
        play(agent, STORY)
    before = {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in data.iterdir()}
    with Store.open_dir(data, readonly=True) as reader:
        assert len(reader.history.incarnations(limit=10)) == len(STORY)
        with pytest.raises(sqlite3.OperationalError):
            reader.database._conn.execute("DELETE FROM meta")  # type: ignore[union-attr]
    after = {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in data.iterdir()}
    assert set(after) <= set(before) | {"setui.db-shm", "setui.db-wal"}
