"""The SSH client is confirmed only by the sshd this process came in through.

``SSH_CONNECTION`` is the caller's to write. The kernel says which connection an ancestor
holds: an ancestor named sshd, run by root, with the very connection ``SSH_CONNECTION``
names among its open files. Real processes and real TCP connections on loopback: a stand-in
"sshd" (a Python that names itself sshd, which is all the rule can see of a name) accepts
a connection from this test process, which plays the remote client, and starts the
identity check under a shell, as a login would. Where OpenSSH's sshd is installed, a real
one on a loopback port confirms a real session (the ``slow`` test).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.support.install_helpers import installation

ROOT = Path(__file__).parents[2]
SRC = str(ROOT / "src")
IDENTITY = ("import json; from setui.system.identity import Identity; i = Identity.current(); "
            "print(json.dumps({'client': i.ssh_client, 'claimed': i.ssh_claimed, "
            "'label': i.label}))")
# The stand-in: names itself, accepts one connection, and forks twice (a login's shell,
# then the command) to run the identity check with SSH_CONNECTION naming what it accepted
# (or ``spoof``), as ``nobody`` when told; prints what the check said.
SSHD = r"""
import json, os, socket, sys
name, spoof, as_nobody = sys.argv[1], sys.argv[2], sys.argv[3] == "nobody"
if name:
    with open("/proc/self/comm", "w") as comm:
        comm.write(name)
server = socket.create_server(("127.0.0.1", 0))
print(server.getsockname()[1], flush=True)
conn, peer = server.accept()
server.close()
here = conn.getsockname()
os.environ["SSH_CONNECTION"] = spoof or f"{peer[0]} {peer[1]} {here[0]} {here[1]}"
shell = os.fork()
if shell == 0:
    command = os.fork()
    if command == 0:
        from setui.system.identity import Identity
        # Once as root first: all it loads is loaded (nobody may not read the library).
        Identity.current()
        if as_nobody:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
        i = Identity.current()
        print(json.dumps({"client": i.ssh_client, "claimed": i.ssh_claimed,
                          "label": i.label}), flush=True)
        os._exit(0)
    os._exit(os.waitpid(command, 0)[1] != 0)
assert os.waitpid(shell, 0)[1] == 0
conn.close()
"""
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def needs_root_and_setpriv() -> None:
    if os.name != "posix" or os.geteuid() != 0 or not Path("/proc/self/stat").exists():
        pytest.skip("needs root and /proc to start processes under other names and uids")
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")


def through_stand_in(name: str = "sshd", *, spoof: str = "", sshd_as: Sequence[str] = (),
                     check_as_nobody: bool = False) -> dict[str, object]:
    """Connect to a stand-in sshd (named ``name``, run as ``sshd_as``) and return what the
    identity check below it said."""
    sshd = subprocess.Popen([*sshd_as, installation().python, "-c", SSHD, name, spoof,
                             "nobody" if check_as_nobody else "root"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd="/")
    assert sshd.stdout is not None
    port = int(sshd.stdout.readline())
    with socket.create_connection(("127.0.0.1", port)):  # the client end, not an ancestor
        out, err = sshd.communicate(timeout=60)
    assert sshd.returncode == 0 and out, err
    return dict(json.loads(out))


@pytest.mark.slow
def test_confirmed_when_root_sshd_above_holds_the_very_connection() -> None:
    needs_root_and_setpriv()
    said = through_stand_in()
    assert said["client"] == "127.0.0.1" and said["claimed"] is False, said
    assert "from 127.0.0.1 on" in str(said["label"])


@pytest.mark.slow
def test_a_connection_with_those_addresses_held_by_anyone_else_is_claimed() -> None:
    """The connection exists on this host, with exactly those addresses and ports, but no
    sshd above this process holds it: anyone could have named it."""
    if not Path("/proc/net/tcp").exists():
        pytest.skip("no /proc/net/tcp")
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    accepted, _ = server.accept()
    try:
        host, port = client.getsockname()
        shost, sport = server.getsockname()
        code = subprocess.run(
            [sys.executable, "-c", IDENTITY], capture_output=True, text=True, timeout=60,
            env=dict(os.environ, PYTHONPATH=SRC,
                     SSH_CONNECTION=f"{host} {port} {shost} {sport}"))
        said = json.loads(code.stdout)
        assert said["client"] == "127.0.0.1" and said["claimed"] is True, said
        assert "from 127.0.0.1 (claimed) on" in said["label"]
    finally:
        for sock in (accepted, client, server):
            sock.close()


@pytest.mark.slow
def test_an_ancestor_holding_it_under_another_name_is_not_sshd() -> None:
    needs_root_and_setpriv()
    assert through_stand_in("tunnel")["claimed"] is True


@pytest.mark.slow
def test_an_sshd_anyone_could_start_is_not_the_login() -> None:
    """An ordinary user's own "sshd" (any program can take the name) holding a connection
    it accepted: claimed, even to that user, who can read its open files."""
    needs_root_and_setpriv()
    said = through_stand_in(sshd_as=NOBODY)
    assert said["claimed"] is True and "from 127.0.0.1 (claimed)" in str(said["label"])


@pytest.mark.slow
def test_sshd_connection_to_another_port_than_the_one_named_is_claimed() -> None:
    needs_root_and_setpriv()
    said = through_stand_in(spoof="127.0.0.1 1 127.0.0.1 22")
    assert said["claimed"] is True


@pytest.mark.slow
def test_an_ordinary_user_cannot_look_into_root_sshd_and_says_claimed() -> None:
    """sshd's processes are root's (its per-session one is not dumpable): an ordinary
    user's check cannot read their open files, so it cannot confirm, and says so."""
    needs_root_and_setpriv()
    said = through_stand_in(check_as_nobody=True)
    assert said["claimed"] is True


def test_the_walk_up_and_what_root_sshd_holds(tmp_path: Path) -> None:
    """The pieces the agent's socket will reuse for its clients' pids."""
    from setui.system.processes import ancestors, ssh_connections

    needs_root_and_setpriv()
    chain = ancestors(os.getpid())
    assert chain[0].pid == os.getppid() and chain[-1].pid == 1
    assert all(a.parent == b.pid for a, b in itertools.pairwise(chain))
    assert ssh_connections(os.getpid()) == [] or os.environ.get("SSH_CONNECTION")
    # A pid that is gone, or /proc that is not there: nothing, never an error.
    assert ancestors(2**22 + 7) == [] and ssh_connections(1, proc=tmp_path) == []


# -- a real sshd, where OpenSSH is installed -------------------------------------------------
@pytest.fixture
def real_sshd() -> Iterator[tuple[int, Path]]:
    sshd, ssh, keygen = (shutil.which(n, path="/usr/sbin:/usr/bin:/sbin:/bin")
                         for n in ("sshd", "ssh", "ssh-keygen"))
    if not (sshd and ssh and keygen) or os.name != "posix" or os.geteuid() != 0:
        pytest.skip("needs root, OpenSSH's sshd, ssh and ssh-keygen")
    work = Path(tempfile.mkdtemp(prefix="setui-sshd-"))
    work.chmod(0o700)
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation dir
    for key in ("host", "user"):
        subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(work / key)],
                       check=True, timeout=60)
    (work / "authorized").write_text((work / "user.pub").read_text())
    (work / "authorized").chmod(0o600)
    probe = socket.create_server(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    (work / "config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {work / 'host'}\n"
        f"PidFile {work / 'pid'}\nAuthorizedKeysFile {work / 'authorized'}\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n")
    daemon = subprocess.Popen([sshd, "-D", "-e", "-f", str(work / "config")],
                              stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=5).close()
                break
            except OSError:
                if daemon.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"sshd did not start on port {port}")
                time.sleep(0.05)
        yield port, work
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


def over_ssh(port: int, work: Path, command: str) -> dict[str, object]:
    done = subprocess.run(
        ["ssh", "-p", str(port), "-i", str(work / "user"), "-o", "BatchMode=yes",
         "-o", "StrictHostKeyChecking=no", "-o", f"UserKnownHostsFile={work / 'known'}",
         "-o", "LogLevel=ERROR", "root@127.0.0.1", command],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


@pytest.mark.slow
def test_a_real_ssh_login_is_confirmed_and_a_rewritten_one_is_not(
        real_sshd: tuple[int, Path]) -> None:
    port, work = real_sshd
    check = f"PYTHONPATH={SRC} {sys.executable} -c \"{IDENTITY}\""
    said = over_ssh(port, work, check)
    assert said["client"] == "127.0.0.1" and said["claimed"] is False, said
    # The same login, SSH_CONNECTION rewritten to another client port: claimed.
    said = over_ssh(port, work, 'set -- $SSH_CONNECTION; '
                                f'SSH_CONNECTION="$1 1 $3 $4" {check}')
    assert said["claimed"] is True
