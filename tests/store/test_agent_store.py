"""Only the agent reads and writes its store: the agent's store (root's, 0700, files
0600; its group kept only to name who reaches the socket) is no one else's to open, so no
one else's to lock. Members of its group read the record through the agent's API; a
store of the layout before (0750, files 0640) is made root's alone as the agent starts.
The shared writable mode is gone.

Real users and a real group (made for the module, removed after it) run real setui
processes and real lock attempts (setpriv) against a store root wrote, and a real agent
that is stopped and started again. A directory in /tmp stands in for /var/lib/setui
(owner, group and mode make it the agent's, not the path; ``default_data_dir`` is given
the path to look at).
"""

from __future__ import annotations

import contextlib
import grp
import json
import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from setui.emulator.server import Emulator
from setui.store import Store, StoreError
from tests.support.accounts import Account, made_accounts, needs_accounts
from tests.support.children import SETUI, Lines, wait_until
from tests.support.emulated import freeze_announced
from tests.support.install_helpers import installation
from tests.support.store_helpers import STORY, entry, play

EVENT_ID = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
GROUP = "sstore-ops"

pytestmark = needs_accounts


@pytest.fixture(scope="module")
def people() -> Iterator[dict[str, Account]]:
    """sstore-reader (in the store's group, the socket's, and not an approver: not in
    setui) and sstore-outsider (in no group of setui's)."""
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


def agents_store(base: Path, group: int, mode: int = 0o700) -> Path:
    """The agent's layout: root, the store's group, 0700 (as `setui service install`
    makes /var/lib/setui; 0750 was the layout before)."""
    path = base / "setui"
    path.mkdir()
    os.chown(path, 0, group)
    path.chmod(mode)
    return path


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with freeze_announced() as emu:
        yield emu


def as_user(account: Account | None, *args: str, env: dict[str, str] | None = None,
            python: bool = False) -> subprocess.CompletedProcess[str]:
    """``setui ARGS`` (or ``python ARGS`` with ``python``) as ``account`` with the groups
    /etc/group gives it (None: root), in a bare environment, with the ``installation``'s
    Python (which every user may read)."""
    ids = [] if account is None else ["setpriv", f"--reuid={account.uid}",
                                      f"--regid={account.gid}", "--init-groups"]
    full = {"PATH": os.environ.get("PATH", ""), "HOME": "/nonexistent",
            "SETUI_CONFIG": "/nonexistent/config.toml",
            "XDG_DATA_HOME": "/nonexistent/share", "SETUI_AUDIT_FORWARD": "none",
            **(env or {})}
    command = [installation().python, *(args if python else ("-m", "setui.cli", *args))]
    return subprocess.run([*ids, *command], env=full, capture_output=True, text=True,
                          timeout=120, cwd="/")


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


# Open a file of the store read-only, as a member, and take a lock through it: a flock on
# agent.lock (what kept a restarted agent from starting), or a shared fcntl lock on one of
# SQLite's WAL lock bytes in -shm (what stalled every write). Says what came of
# it, then holds what it took until its stdin closes.
LOCKER = """
import errno, fcntl, os, sys
path, kind = sys.argv[1], sys.argv[2]
try:
    fd = os.open(path, os.O_RDONLY)
except OSError as e:
    print("refused", errno.errorcode.get(e.errno, e.errno), flush=True)
    sys.exit(0)
if kind == "open":  # only hold it open
    print("opened", os.getpid(), flush=True)
    sys.stdin.read()
    sys.exit(0)
def lock(offset):
    try:
        if kind == "flock":
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:
            fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, offset)
    except OSError as e:
        return errno.errorcode.get(e.errno, e.errno)
    return None
offsets = [0] if kind == "flock" else range(120, 129)  # WAL's lock bytes, and DMS
errors = [lock(offset) for offset in offsets]
if None not in errors:
    print("opened, not locked", *errors, flush=True)
    sys.exit(0)
print("locked", flush=True)
sys.stdin.read()
"""


@contextlib.contextmanager
def locking(account: Account, path: Path, kind: str) -> Iterator[str]:
    """What ``account`` got trying to lock ``path`` (``kind``: flock, or shm's WAL
    byte); a lock it took is held until the block ends."""
    proc = subprocess.Popen(
        ["setpriv", f"--reuid={account.uid}", f"--regid={account.gid}", "--init-groups",
         installation().python, "-c", LOCKER, str(path), kind], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True, env={"PATH": os.environ.get("PATH", "")},
        cwd="/")
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=60)


def start_agent(url: str, data: Path, socket: Path) -> tuple[subprocess.Popen[str], Lines]:
    """`setui agent` on ``data``, as root; returns once its socket is there (it has the
    lock and the store open by then), or fails with what it said."""
    env = {**os.environ, "SETUI_CONFIG": "/nonexistent/config.toml",
           "SETUI_SOCKET": str(socket), "SETUI_AUDIT_FORWARD": "none",
           "PYTHONUNBUFFERED": "1", "PYTHONIOENCODING": "utf-8"}
    env.pop("SETUI_DATA_DIR", None)
    proc = subprocess.Popen([*SETUI, "agent", "--endpoint", url, "--interval", "0.2",
                             "--json", "--data-dir", str(data)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, encoding="utf-8", env=env)
    wait_until(lambda: socket.exists() or proc.poll() is not None, 60,
               "the agent to serve its socket")
    if proc.poll() is not None:
        assert proc.stderr is not None
        pytest.fail(f"the agent did not start (exit {proc.returncode}): "
                    f"{proc.stderr.read()[-2000:]}")
    return proc, Lines(proc)


def stop_agent(proc: subprocess.Popen[str]) -> str:
    """Stop it as systemd does; what it said on stderr."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    assert proc.returncode == 0
    assert proc.stderr is not None
    return proc.stderr.read()


@pytest.mark.slow
def test_no_member_can_open_the_running_agents_files_to_lock_them(
        base: Path, group: int, people: dict[str, Account], emulator: Emulator) -> None:
    """The stalled writes, tried by a member of the socket's group who is not an
    approver, on a store of the layout before (0750) that the agent makes root's alone."""
    data = agents_store(base, group, mode=0o750)
    agent, _ = start_agent(emulator.url, data, base / "api.sock")
    try:
        # WAL: SQLite's locks live in -shm, there while the database is open.
        wait_until(lambda: (data / "setui.db-shm").exists(), 60, "the agent's -shm file")
        for account in (people["sstore-reader"], people["sstore-outsider"]):
            for name, kind in (("setui.db-shm", "wal-byte"), ("agent.lock", "flock"),
                               ("setui.db", "flock")):
                with locking(account, data / name, kind) as got:
                    assert got == "refused EACCES", (account.name, name, got)
        assert mode(data) == 0o700
        for path in data.iterdir():
            st = os.lstat(path)
            assert (st.st_uid, mode(path)) == (0, 0o600), path
    finally:
        said = stop_agent(agent)
    assert f"made the store private: {data}: mode 0700 (was 0750)" in said


@pytest.mark.slow
def test_no_member_can_keep_a_restarted_agent_from_starting(
        base: Path, group: int, people: dict[str, Account], emulator: Emulator) -> None:
    """A member's flock on agent.lock while the agent restarted kept every agent out."""
    data = agents_store(base, group, mode=0o750)
    socket = base / "api.sock"
    stop_agent(start_agent(emulator.url, data, socket)[0])
    with locking(people["sstore-reader"], data / "agent.lock", "flock") as got:
        again, _ = start_agent(emulator.url, data, socket)
        stop_agent(again)
    assert got == "refused EACCES", got


@pytest.mark.slow
def test_a_member_who_opened_a_file_of_the_layout_before_is_named_by_the_agent(
        base: Path, group: int, people: dict[str, Account], emulator: Emulator) -> None:
    """A descriptor opened while the files were the group's survives the change of
    mode: the agent that makes the store private names who has one."""
    data = agents_store(base, group, mode=0o750)
    with Store.open_dir(data) as before:
        play(before, STORY)
    for path in data.iterdir():  # as the agent of the layout before left them
        os.chown(path, 0, group)
        path.chmod(0o640)
    with locking(people["sstore-reader"], data / "setui.db", "open") as got:
        assert got.startswith("opened "), got
        holder = int(got.split()[1])
        agent, _ = start_agent(emulator.url, data, base / "api.sock")
        said = stop_agent(agent)
    assert f"made the store private: {data / 'setui.db'}: mode 0600 (was 0640)" in said
    assert f"pid {holder} (python" in said and f"has {data / 'setui.db'} open from before " \
        "it was private" in said, said


@pytest.mark.slow
def test_root_alone_reads_the_agents_store_and_a_member_is_told_how_to_read_it(
        base: Path, group: int, people: dict[str, Account], emulator: Emulator) -> None:
    data = agents_store(base, group)
    # Root writes it and keeps it open, as the agent does (WAL: -wal and -shm stay).
    with Store.open_dir(data) as agent:
        play(agent, STORY)
        agent.audit_log.append(entry())
        names = sorted(p.name for p in data.iterdir())
        assert names == ["setui.db", "setui.db-shm", "setui.db-wal", "setui.db.audit-head"]
        for path in data.iterdir():  # root's alone, whatever the group
            st = os.lstat(path)
            assert (st.st_uid, mode(path)) == (0, 0o600), path
        reader, outsider = people["sstore-reader"], people["sstore-outsider"]
        env = {"SETUI_DATA_DIR": str(data)}
        for account in (reader, outsider):
            for command in (["history", "--json", "--standalone"], ["audit", "verify"],
                            ["history", "--data-dir", str(data)]):
                done = as_user(account, *command, env=env)
                said = done.stdout + done.stderr
                assert done.returncode == 1, said
                assert "Traceback" not in said
                assert f"cannot read the data directory {data}: it is root's alone" in said
                assert "through the agent" in said and "as root (sudo)" in said
        # A member never writes it: nothing is posted.
        approve = as_user(reader, "approve", "--endpoint", emulator.url, EVENT_ID, "--yes",
                          "--allow-other-vms", env=env)
        assert approve.returncode == 1, approve.stdout + approve.stderr
        said = approve.stdout + approve.stderr
        assert f"cannot read the data directory {data}: it is root's alone" in said
        assert not any(r.method == "POST" for r in emulator.requests)
        # Root reads it standalone.
        history = as_user(None, "history", "--json", "--standalone", env=env)
        assert history.returncode == 0, history.stderr
        assert len(history.stdout.splitlines()) == len(STORY)
    with Store.open_dir(data, readonly=True) as check:
        assert [r.action for r in check.audit_log.records()] == ["cancelled"]
        assert check.audit_log.verify().ok


@pytest.mark.slow
def test_the_agents_store_is_roots_default_and_a_member_keeps_a_store_of_its_own(
        base: Path, group: int, people: dict[str, Account]) -> None:
    data = agents_store(base, group)
    with Store.open_dir(data) as agent:
        play(agent, STORY)
    probe = ("import sys; from pathlib import Path\n"
             "from setui.store.place import default_data_dir\n"
             "print(default_data_dir(Path(sys.argv[1])))\n")
    for account, expected in ((people["sstore-reader"], "/nonexistent/share/setui"),
                              (None, str(data)),
                              (people["sstore-outsider"], "/nonexistent/share/setui")):
        done = as_user(account, "-c", probe, str(data), python=True)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == expected, account
    # A member's standalone front end records in a store of its own, as it always could.
    reader = people["sstore-reader"]
    home = base / "reader-home"
    home.mkdir(mode=0o700)
    os.chown(home, reader.uid, reader.gid)
    front = ("import sys; from pathlib import Path\n"
             "from setui.settings.config import Config\n"
             "from setui.session import open_store\n"
             "from setui.store.place import default_data_dir\n"
             "store, problem = open_store(Config(data_dir=default_data_dir(Path(sys.argv[1]))),"
             " or_read=True)\n"
             "print(store.readonly, store.path, problem)\n")
    done = as_user(reader, "-c", front, str(data), python=True,
                   env={"XDG_DATA_HOME": str(home)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", str(home / "setui" / "setui.db"), "None"]


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
def test_the_agents_lock_is_roots_alone(base: Path, group: int) -> None:
    """agent.lock says who holds the store, to root: no one else may open it (a flock
    needs no more than a read-only descriptor)."""
    from setui.agent.lock import AgentLock
    from setui.core.clock import utc_now

    data = agents_store(base, group)
    lock = AgentLock.take(data, since=utc_now(), socket=None)
    try:
        st = os.lstat(data / "agent.lock")
        assert (st.st_uid, mode(data / "agent.lock")) == (0, 0o600)
        assert json.loads((data / "agent.lock").read_text())["pid"] == os.getpid()
        assert lock.made_private == []
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
            reader.database._conn.execute("DELETE FROM meta")
    after = {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in data.iterdir()}
    assert set(after) <= set(before) | {"setui.db-shm", "setui.db-wal"}
