"""An agent that cannot use its data directory does not run: it cannot lock it, make it,
or open the store in it, so it says why and exits 2 before it serves its socket, asks
IMDS anything or sends a notification (it would act beside the agent that does run,
recording nothing). Real agents, a real notification collector on loopback, a real
immutable directory where the file system has one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from setui.emulator.server import Emulator
from tests.support.agent_helpers import Sink, agent_env, drain_policy, start_agent
from tests.support.children import SETUI, wait_until

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.name != "posix", reason="Unix sockets and modes")]


def _refused(tmp_path: Path, emulator: Emulator, hook: Path, sink: Sink,
             data_dir: Path) -> str:
    """Run the agent on ``data_dir`` with a policy that notifies; its stderr once it has
    exited 2, having served nothing, asked IMDS nothing and sent nothing."""
    policy = drain_policy(tmp_path, hook, url=sink.url, notify=True)
    socket = tmp_path / "api.sock"
    env = agent_env(tmp_path, SETUI_DATA_DIR=str(data_dir), SETUI_SOCKET=str(socket))
    proc, _ = start_agent(emulator.url, tmp_path, "--policy", str(policy), env=env)
    try:
        # It exits, or it shows that it runs: its socket, a poll, a notification.
        wait_until(lambda: proc.poll() is not None or socket.exists() or sink.bodies
                   or emulator.requests, 60, "the agent to exit or to start")
        if proc.poll() is None:
            pytest.fail(f"the agent runs: its socket {'is' if socket.exists() else 'is not'}"
                        f" there, {len(emulator.requests)} request(s) to IMDS, "
                        f"{len(sink.bodies)} notification(s)")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert proc.stderr is not None
    said = proc.stderr.read()
    assert proc.returncode == 2, said
    assert not socket.exists() and not os.path.lexists(socket)
    assert emulator.requests == [] and sink.bodies == []
    assert "; not running" in said and "Traceback" not in said
    return said


def test_a_data_dir_under_proc_is_refused(tmp_path: Path, emulator: Emulator, hook: Path,
                                          sink: Sink) -> None:
    said = _refused(tmp_path, emulator, hook, sink, Path("/proc/setui"))
    assert "cannot make the data directory /proc/setui: " in said


def test_a_data_dir_that_is_a_file_is_refused(tmp_path: Path, emulator: Emulator,
                                              hook: Path, sink: Sink) -> None:
    path = tmp_path / "data"
    path.write_text("not a directory\n")
    said = _refused(tmp_path, emulator, hook, sink, path)
    assert f"the data directory {path} is not a directory (it is a regular file)" in said


@pytest.fixture
def immutable(tmp_path: Path) -> Iterator[Path]:
    """An empty directory of root's, 0700, made immutable (chattr +i)."""
    chattr = shutil.which("chattr")
    if chattr is None or os.geteuid() != 0:
        pytest.skip("needs root and chattr to make an immutable directory")
    path = tmp_path / "data"
    path.mkdir(mode=0o700)
    path.chmod(0o700)
    made = subprocess.run([chattr, "+i", str(path)], capture_output=True, text=True,
                          timeout=60)
    if made.returncode != 0:
        pytest.skip(f"this file system has no immutable flag: {made.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run([chattr, "-i", str(path)], capture_output=True, timeout=60,
                       check=True)


def test_an_immutable_data_dir_is_refused(tmp_path: Path, emulator: Emulator, hook: Path,
                                          sink: Sink, immutable: Path) -> None:
    said = _refused(tmp_path, emulator, hook, sink, immutable)
    assert f"cannot take the agent's lock: cannot open {immutable / 'agent.lock'}: " \
           "Operation not permitted" in said
    assert list(immutable.iterdir()) == []


def test_a_store_that_cannot_be_opened_is_refused(tmp_path: Path, emulator: Emulator,
                                                  hook: Path, sink: Sink) -> None:
    """The lock is taken, but the database is not setui's: nothing runs either."""
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    (data / "setui.db").write_bytes(b"this is not a database, and not empty\n" * 200)
    said = _refused(tmp_path, emulator, hook, sink, data)
    assert "cannot open the store: " in said


def test_a_lock_held_by_another_process_names_that_process(
        tmp_path: Path, emulator: Emulator) -> None:
    """The file names the agent that wrote it last; the kernel names who holds the lock
    now: a process that is not that agent is named, not a dead agent."""
    data = tmp_path / "data"
    socket = tmp_path / "api.sock"
    env = agent_env(tmp_path, SETUI_SOCKET=str(socket))
    first, _ = start_agent(emulator.url, tmp_path, env=env)
    wait_until(lambda: socket.exists() or first.poll() is not None, 60, "the first agent")
    first.terminate()
    assert first.wait(timeout=60) == 0
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys\n"
         "f = open(sys.argv[1], 'rb')\n"
         "fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
         "print('locked', flush=True)\n"
         "sys.stdin.read()\n", str(data / "agent.lock")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        second = subprocess.run([*SETUI, "agent", "--endpoint", emulator.url], env=env,
                                capture_output=True, text=True, timeout=120)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=60)
    assert second.returncode == 2, second.stderr
    assert f"pid {holder.pid} (python" in second.stderr, second.stderr
    assert f"holds the agent's lock {data / 'agent.lock'}, not the agent the file names " \
           f"(pid {first.pid})" in second.stderr
    assert "another agent runs" not in second.stderr
