"""Where the agent's socket goes and what it refuses to do there; and a client that will
not take a socket someone else serves for the agent."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from setui.api.client import AgentClient, ApiError
from setui.emulator.server import Emulator
from tests.support.api_helpers import Account, needs_root, plain_env
from tests.support.children import SETUI, Lines, wait_until
from tests.support.install_helpers import installation

pytestmark = pytest.mark.skipif(os.name != "posix", reason="Unix sockets")


def _run(url: str, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SETUI, "agent", "--endpoint", url, "--interval", "0.2", *extra],
                          env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.slow
def test_socket_on_the_command_line_wins_over_the_environment(tmp_path: Path,
                                                               emulator: Emulator) -> None:
    env = plain_env(tmp_path, SETUI_SOCKET=str(tmp_path / "from-env.sock"))
    proc = subprocess.Popen([*SETUI, "agent", "--endpoint", emulator.url, "--socket",
                             str(tmp_path / "given.sock")], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    Lines(proc)  # drains stdout
    try:
        wait_until(lambda: (tmp_path / "given.sock").exists(), 30, "the socket")
        with AgentClient.connect(tmp_path / "given.sock") as client:
            assert client.hello.agent.pid == proc.pid
        assert not (tmp_path / "from-env.sock").exists()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.slow
@pytest.mark.skipif(Path("/run/setui").exists(), reason="this machine has /run/setui")
def test_without_a_socket_directory_the_agent_says_so_and_runs_on(tmp_path: Path,
                                                                   emulator: Emulator) -> None:
    proc = subprocess.Popen([*SETUI, "agent", "--endpoint", emulator.url, "--interval", "0.2"],
                            env=plain_env(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE,
                            text=True)
    lines = Lines(proc)
    try:
        lines.until(lambda line: "appeared" in line, 30, "the agent to poll")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert proc.returncode == 0
    assert "/run/setui does not exist" in proc.stderr.read()


@pytest.mark.slow
def test_a_file_in_the_way_is_left_alone_and_the_agent_refuses(tmp_path: Path,
                                                                emulator: Emulator) -> None:
    (tmp_path / "api.sock").write_text("mine")
    done = _run(emulator.url, plain_env(tmp_path), "--socket", str(tmp_path / "api.sock"))
    assert done.returncode == 2, done.stderr
    assert "exists and is not a socket" in done.stderr
    assert (tmp_path / "api.sock").read_text() == "mine"
    assert not (tmp_path / "data" / "setui.db").exists()


@pytest.mark.slow
def test_a_directory_anyone_may_write_is_refused(tmp_path: Path, emulator: Emulator) -> None:
    (tmp_path / "open").mkdir()
    (tmp_path / "open").chmod(0o777)
    done = _run(emulator.url, plain_env(tmp_path), "--socket",
                str(tmp_path / "open" / "api.sock"))
    assert done.returncode == 2, done.stderr
    assert "writable by others without the sticky bit" in done.stderr


# A listener that speaks like an agent would, started as another user. It listens before
# its socket takes the name the test waits for: a name bound but not yet listening refuses
# a connection, which the client rightly calls "unavailable" (seen under load).
IMPOSTOR = r'''
import os, socket, sys, time
path = sys.argv[1]
s = socket.socket(socket.AF_UNIX); s.bind(path + ".new"); os.chmod(path + ".new", 0o666)
s.listen(8)
os.rename(path + ".new", path)
while True:
    c, _ = s.accept()
    c.sendall(b'{"hello": {"api": 1}}\n')
'''


@pytest.mark.slow
@needs_root
def test_a_client_refuses_a_socket_served_by_someone_else(
        tmp_path: Path, accounts: dict[str, Account]) -> None:
    room = Path("/tmp") / f"setui-impostor-{os.getpid()}"
    room.mkdir(mode=0o777, exist_ok=True)
    room.chmod(0o777)
    (room / "impostor.py").write_text(IMPOSTOR)
    mallory = accounts["mallory"]
    proc = subprocess.Popen(["setpriv", f"--reuid={mallory.uid}", f"--regid={mallory.gid}",
                             "--init-groups", installation().python, str(room / "impostor.py"),
                             str(room / "api.sock")], cwd="/")
    try:
        wait_until(lambda: (room / "api.sock").exists(), 30, "the impostor's socket")
        with pytest.raises(ApiError) as refused:
            AgentClient.connect(room / "api.sock")
        assert refused.value.code == "forbidden"
        assert f"served by uid {mallory.uid}, neither root nor you" in refused.value.message
    finally:
        proc.kill()
        proc.wait(timeout=30)
        for name in ("api.sock", "api.sock.new", "impostor.py"):
            (room / name).unlink(missing_ok=True)
        room.rmdir()
