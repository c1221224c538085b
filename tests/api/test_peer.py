"""Who a client is, from the kernel and /proc, and who may approve: real sockets, a real
client under another uid (setpriv), real groups."""

from __future__ import annotations

import grp
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from setui.api.peer import Authority, Credentials, credentials, read_peer
from setui.system.identity import account_name, audit_number
from tests.support.api_helpers import APPROVERS_GROUP, OPS_GROUP, Account, needs_root
from tests.support.install_helpers import installation

pytestmark = pytest.mark.skipif(not hasattr(socket, "SO_PEERCRED"), reason="Linux")


def test_the_kernel_names_this_process_on_the_other_end() -> None:
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with left, right:
        creds = credentials(left)
    assert (creds.pid, creds.uid, creds.gid) == (os.getpid(), os.geteuid(), os.getegid())
    assert creds.groups is not None and set(creds.groups) == set(os.getgroups())


def test_login_uid_and_session_come_from_the_clients_own_proc_entry() -> None:
    mine = Credentials(os.getpid(), os.geteuid(), os.getegid(), ())
    peer = read_peer(mine)
    assert peer.user == account_name(os.geteuid())
    assert peer.login_uid == audit_number(Path(f"/proc/{os.getpid()}/loginuid"))
    assert peer.session == audit_number(Path(f"/proc/{os.getpid()}/sessionid"))
    # A pid whose /proc entry is not the client's uid (gone, its pid reused): not read.
    other = read_peer(Credentials(os.getpid(), 4242, 4242, ()))
    assert (other.user, other.login_uid, other.session, other.ssh_origin) == (
        "uid 4242", None, None, None)
    assert read_peer(Credentials(0, 4242, 4242, ())).login_uid is None


def test_the_audit_identity_is_the_kernels_and_says_what_is_not_known() -> None:
    peer = read_peer(Credentials(os.getpid(), 0, 0, ()))
    identity = peer.identity("vm-1")
    assert identity.user == "root" and identity.host == "vm-1"
    assert identity.ssh_client is None and not identity.ssh_claimed
    assert peer.details() == {"api": {"pid": os.getpid(), "uid": 0, "gid": 0,
                                      "ssh_origin": "unknown"}}


CONNECT = r'''
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.recv(1)
'''


@pytest.mark.slow
@needs_root
def test_a_client_under_another_uid_is_that_uid_with_its_groups(
        tmp_path: Path, accounts: dict[str, Account]) -> None:
    room = Path("/tmp") / f"setui-peer-{os.getpid()}"
    room.mkdir(mode=0o755, exist_ok=True)
    path = room / "s.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    path.chmod(0o666)
    server.listen(1)
    alice = accounts["alice"]
    child = subprocess.Popen(["setpriv", f"--reuid={alice.uid}", f"--regid={alice.gid}",
                              "--init-groups", installation().python, "-c", CONNECT, str(path)])
    try:
        conn, _ = server.accept()
        with conn:
            creds = credentials(conn)
            conn.sendall(b"x")
    finally:
        child.wait(timeout=30)
        server.close()
        path.unlink()
        room.rmdir()
    assert (creds.pid, creds.uid, creds.gid) == (child.pid, alice.uid, alice.gid)
    assert creds.in_group(grp.getgrnam(APPROVERS_GROUP).gr_gid)
    assert creds.in_group(grp.getgrnam(OPS_GROUP).gr_gid)
    assert not creds.in_group(0)


@pytest.mark.slow
@needs_root
def test_who_may_approve(accounts: dict[str, Account]) -> None:
    setui = grp.getgrnam(APPROVERS_GROUP).gr_gid
    ops = grp.getgrnam(OPS_GROUP).gr_gid
    alice, carol = accounts["alice"], accounts["carol"]

    def creds(account: Account, groups: tuple[int, ...] | None) -> Credentials:
        return Credentials(1, account.uid, account.gid, groups)

    default = Authority(None)
    assert default.describe() == "root and the members of group setui" and not default.notes
    assert default.why_not(Credentials(1, 0, 0, ())) is None
    assert default.why_not(creds(alice, (ops, setui))) is None
    # Who may approve as this agent has it, and what to do, said once.
    assert default.why_not(creds(carol, (ops,))) == (
        "you are not root and not in group setui, who may approve here: ask an administrator "
        "to add you to it (it counts from your next login)")
    # A kernel that cannot say the groups: the primary group alone counts, and that is said.
    assert "Linux 4.13" in (default.why_not(creds(alice, None)) or "")

    narrowed = Authority(["sapi-carol", "%nosuchgroup-x", "nosuchuser-x"])
    assert narrowed.notes == ["there is no group nosuchgroup-x on this VM",
                              "there is no user nosuchuser-x on this VM"]
    assert narrowed.why_not(creds(carol, (ops,))) is None
    assert narrowed.why_not(creds(alice, (ops, setui))) == (
        "you are not among the approvers the agent's config names (approvers = "
        '["sapi-carol", "%nosuchgroup-x", "nosuchuser-x"]), who with root may approve here: '
        "ask an administrator to add you there")
    assert narrowed.why_not(Credentials(1, 0, 0, ())) is None  # root, always
    assert Authority(["%sapi-ops"]).why_not(creds(carol, (ops,))) is None
    assert Authority([]).describe() == "root only"
    assert Authority([]).why_not(creds(alice, (ops, setui))) == (
        "the agent's config names no approvers (approvers = []): only root may approve")

    missing = Authority(None, group="nosuchgroup-x")
    assert missing.why_not(creds(alice, (ops, setui))) == (
        "there is no group nosuchgroup-x on this VM: only root may approve")


# A stand-in sshd (a root process that names itself sshd, which is all the rule sees of a
# name): it accepts one TCP connection on loopback, then a child of it connects to the
# agent's socket, as a command in that SSH session would.
SSHD_THEN_CLIENT = r'''
import os, socket, sys
with open("/proc/self/comm", "w") as comm:
    comm.write("sshd")
server = socket.create_server(("127.0.0.1", 0))
print(server.getsockname()[1], flush=True)
conn, _ = server.accept()
child = os.fork()
if child == 0:
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.recv(1)
    os._exit(0)
os.waitpid(child, 0)
conn.close()
'''


@pytest.mark.slow
@needs_root
def test_the_ssh_origin_is_the_connection_the_sshd_above_the_client_holds(
        tmp_path: Path) -> None:
    """Nothing the client says: the agent reads which TCP connection root's sshd above the
    client holds (setui.system.processes), and records its peer's address."""
    path = str(tmp_path / "api.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(1)
    sshd = subprocess.Popen([sys.executable, "-c", SSHD_THEN_CLIENT, path],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert sshd.stdout is not None
        port = int(sshd.stdout.readline())
        with socket.create_connection(("127.0.0.1", port)):
            listener.settimeout(60)
            conn, _ = listener.accept()
            with conn:
                peer = read_peer(credentials(conn))
                conn.send(b"x")
        assert peer.ssh_origin == "127.0.0.1"
        assert peer.identity("vm-1").ssh_client == "127.0.0.1"
        assert peer.details()["api"]["ssh_origin"] == "127.0.0.1"
    finally:
        sshd.wait(timeout=60)
        listener.close()
