"""Who is recorded as the actor: nothing the person could set from the environment.

The rules run for real: the process's own uid, and a child process under another uid
(setpriv) for an ordinary user. What confirms an SSH client: tests/system/test_ssh_origin.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from setui.system.actor import describe_actor
from setui.system.identity import Identity
from tests.support.install_helpers import installation

FORGED = {"SUDO_USER": "alice", "SUDO_UID": "1000",
          "SSH_CONNECTION": "10.6.6.6 1 2.3.4.5 3", "USER": "spoof", "LOGNAME": "spoof"}


def fake_proc(tmp_path: Path, loginuid: str, sessionid: str) -> Path:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "net").mkdir()
    (proc / "self" / "loginuid").write_text(loginuid)
    (proc / "self" / "sessionid").write_text(sessionid)
    return proc


def as_nobody(code: str, env: dict[str, str]) -> dict[str, object]:
    """Run ``code`` (printing JSON) as uid/gid 65534 with ``env``; skip when impossible."""
    if os.name != "posix" or os.geteuid() != 0:
        pytest.skip("needs root to start a process as another uid")
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is not installed")
    full = {"PATH": os.environ.get("PATH", ""), **env}
    done = subprocess.run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
                           installation().python, "-c", code], env=full, capture_output=True,
                          text=True, timeout=60, cwd="/")
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_the_account_is_the_real_uid_never_user_or_logname() -> None:
    me = Identity.current(FORGED)
    assert me.user not in ("spoof", "alice")
    import pwd

    assert me.user == pwd.getpwuid(os.getuid()).pw_name


def test_an_ssh_client_nobody_can_confirm_is_marked_claimed() -> None:
    me = Identity.current({"SSH_CONNECTION": "10.6.6.6 40000 10.0.0.4 22"})
    assert me.ssh_client == "10.6.6.6" and me.ssh_claimed
    assert me.details()["ssh_claimed"] is True
    assert "from 10.6.6.6 (claimed) on" in me.label


def test_sudo_user_as_root_only_when_sudo_uid_agrees() -> None:
    if os.name != "posix" or os.geteuid() != 0:
        pytest.skip("the root half of the rule needs root")
    assert Identity.current({"SUDO_USER": "nobody", "SUDO_UID": "65534"}).sudo_user == "nobody"
    assert Identity.current({"SUDO_USER": "nobody", "SUDO_UID": "0"}).sudo_user is None
    assert Identity.current({"SUDO_USER": "nobody"}).sudo_user is None
    assert Identity.current({"SUDO_USER": "nosuchuser", "SUDO_UID": "4242"}).sudo_user is None


@pytest.mark.slow
def test_an_ordinary_user_cannot_claim_sudo_or_another_name() -> None:
    code = ("import json; from setui.system.identity import Identity; i = Identity.current(); "
            "print(json.dumps({'user': i.user, 'sudo': i.sudo_user, 'label': i.label, "
            "'details': i.details()}))")
    got = as_nobody(code, {"SUDO_USER": "root", "SUDO_UID": "0",
                           "SSH_CONNECTION": "10.6.6.6 1 10.0.0.4 22", "USER": "root"})
    assert got["user"] == "nobody" and got["sudo"] is None
    assert str(got["label"]).startswith("nobody") and "sudo" not in str(got["label"])
    assert "from 10.6.6.6 (claimed)" in str(got["label"])


def test_login_user_and_session_from_the_kernel(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, "65534", "42")
    me = Identity.current({}, proc=proc)
    assert me.login_user == "nobody" and me.session == 42
    assert me.details()["login_user"] == "nobody" and me.details()["session"] == 42
    assert me.label.startswith(f"{me.user} (login nobody, session 42) on ")
    # Unset (a daemon, a container): nothing claimed.
    unset = Identity.current({}, proc=fake_proc(tmp_path / "b", "4294967295", "4294967295"))
    assert unset.login_user is None and unset.session is None
    assert unset.label == f"{unset.user} on {unset.host}"


def test_the_recorded_actor_reads_as_the_label() -> None:
    me = Identity("root", "10.1.2.3", "vm", sudo_user="alice", login_user="alice",
                  session=7, ssh_claimed=True)
    assert me.label == "root (login alice, sudo by alice, session 7) from 10.1.2.3 " \
                       "(claimed) on vm"
    assert describe_actor("root", "10.1.2.3", "vm", me.details()) == me.label
