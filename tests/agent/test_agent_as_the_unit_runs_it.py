"""A real `setui agent` as setui-agent.service runs it: root with only the unit's
capabilities (CAP_SETUID, CAP_SETGID, CAP_KILL), no new privileges, the group of its
directories as its own group and no other, umask 0027; its store root's alone (0700,
files 0600) and its socket directory root's and that group's, 0750. A rule's hook runs
as the user run_as names, and a member of the group reaches the agent's socket, who it is
said by the kernel, and reads the history through it. (setpriv sets up what systemd would;
the machine has no systemd to run the unit itself.)
"""

from __future__ import annotations

import grp
import json
import os
import shutil
import signal
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from setui.emulator.server import Emulator
from setui.store import Store
from setui.store.agent import AgentLog
from tests.support.accounts import Account, made_accounts, needs_accounts
from tests.support.agent_helpers import agent_said
from tests.support.children import SETUI, Lines
from tests.support.install_helpers import installation

pytestmark = [needs_accounts, pytest.mark.slow]

GROUP, MEMBER, HOOKER = "sunit-ops", "sunit-member", "sunit-hooker"
UNIT_CAPS = "+setuid,+setgid,+kill"  # CapabilityBoundingSet= of setui-agent.service


@pytest.fixture(scope="module")
def people() -> Iterator[dict[str, Account]]:
    with made_accounts({MEMBER: [GROUP], HOOKER: []}, [GROUP]) as made:
        yield made


@pytest.fixture
def base(people: dict[str, Account]) -> Iterator[Path]:
    """/var/lib/setui and /run/setui in miniature (root:GROUP, 0700 and 0750), and a
    hook root owns that every user may run, printing who runs it."""
    gid = grp.getgrnam(GROUP).gr_gid
    path = Path(tempfile.mkdtemp(prefix="setui-unit-", dir="/tmp"))
    path.chmod(0o755)
    for name, mode in (("data", 0o700), ("run", 0o750)):
        (path / name).mkdir()
        os.chown(path / name, 0, gid)
        (path / name).chmod(mode)
    (path / "hooks").mkdir(mode=0o755)
    (path / "hooks" / "print-id").write_text('#!/bin/sh\necho "id: $(id)"\n')
    (path / "hooks" / "print-id").chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def as_member(member: Account, *argv: str, socket: Path | None = None
              ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["setpriv", f"--reuid={member.uid}", f"--regid={member.gid}", "--init-groups",
         installation().python, *argv], capture_output=True, text=True, timeout=120,
        cwd="/", env={"PATH": os.environ["PATH"], "HOME": "/nonexistent",
                      "SETUI_CONFIG": "/nonexistent/config.toml",
                      "XDG_DATA_HOME": "/nonexistent/share",
                      **({"SETUI_SOCKET": str(socket)} if socket is not None else {})})


def test_the_agent_under_the_units_limits(base: Path, people: dict[str, Account],
                                          emulator: Emulator) -> None:
    gid = grp.getgrnam(GROUP).gr_gid
    policy = base / "policy.toml"
    policy.write_text('[[rule]]\nname = "drain"\nevent_type = "Reboot"\nthis_vm = true\n'
                      f'prepare = "{base / "hooks" / "print-id"}"\nrun_as = "{HOOKER}"\n')
    env = {**os.environ, "SETUI_DATA_DIR": str(base / "data"),
           "SETUI_SOCKET": str(base / "run" / "api.sock"),
           "SETUI_CONFIG": str(base / "config.toml"), "PYTHONUNBUFFERED": "1"}
    command = [*SETUI, "agent", "--endpoint", emulator.url, "--interval", "0.2", "--json",
               "--policy", str(policy)]
    proc = subprocess.Popen(
        ["setpriv", f"--bounding-set=-all,{UNIT_CAPS}", "--inh-caps=-all",
         "--no-new-privs", f"--regid={gid}", "--clear-groups", "sh", "-c",
         'umask 0027 && exec "$@"', "sh", *command],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines = Lines(proc)
    try:
        lines.until(agent_said("finished", "prepare"), 60, "the prepare hook to finish")
        status = Path(f"/proc/{proc.pid}/status").read_text()
        assert "CapEff:\t00000000000000e0" in status  # setuid, setgid, kill: no more
        assert "NoNewPrivs:\t1" in status
        # The socket: root and the group's, 0660; the store: root's alone.
        sock = os.lstat(base / "run" / "api.sock")
        assert stat.S_ISSOCK(sock.st_mode)
        assert (sock.st_uid, sock.st_gid, stat.S_IMODE(sock.st_mode)) == (0, gid, 0o660)
        assert stat.S_IMODE(os.lstat(base / "data").st_mode) == 0o700
        for path in (base / "data").iterdir():
            st = os.lstat(path)
            assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, gid, 0o600), path
        member = people[MEMBER]
        history = as_member(member, "-m", "setui.cli", "history", "--json",
                            socket=base / "run" / "api.sock")
        assert history.returncode == 0 and history.stdout.strip(), history.stderr
        hello = as_member(member, "-c", (
            "import json, sys; from pathlib import Path\n"
            "from setui.api.client import AgentClient\n"
            "with AgentClient.connect(Path(sys.argv[1]), timeout=10) as client:\n"
            "    print(json.dumps({'uid': client.hello.you.uid, "
            "'pid': client.hello.agent.pid}))\n"), str(base / "run" / "api.sock"))
        assert hello.returncode == 0, hello.stderr
        said = json.loads(hello.stdout)
        assert said["uid"] == member.uid and said["pid"] == proc.pid
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    with Store.open_dir(base / "data", readonly=True) as store:
        runs = AgentLog(store, emulator.url).hook_runs()
    assert [(r.step, r.exit_status) for r in runs] == [("prepare", 0)], runs
    assert runs[0].output.startswith(f"id: uid={people[HOOKER].uid}({HOOKER}) ")
