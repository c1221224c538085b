"""``run_as``: a rule's hooks run as the user it names, with a real user (made for the
module, removed after it) and a hook that prints ``id``; refused at load when the user is
unknown or the agent is not root; and what the unit's capability bounding set must keep
for it, measured under the set itself (setpriv drops the rest, as systemd does).
"""

from __future__ import annotations

import grp
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from setui.agent.hooks import run_hook
from setui.agent.policy import Hook, PolicyError, parse_policy
from setui.agent.runas import RunAs, parse_run_as
from setui.emulator.server import Emulator
from setui.store import Store
from setui.store.agent import AgentLog
from tests.support.accounts import Account, made_accounts, needs_accounts
from tests.support.agent_helpers import agent_said, records, start_agent, stop, write_policy
from tests.support.children import wait_until
from tests.support.install_helpers import installation

pytestmark = needs_accounts

ROOT = Path(__file__).parent.parent.parent
USER, EXTRA, OTHER = "srunas-hooker", "srunas-extra", "srunas-other"
# What the hook says about itself: who, where, and the environment run_as sets.
PRINT_ID = ("#!/bin/sh\n"
            "echo \"id: $(id)\"\n"
            "echo \"cwd: $(pwd)\"\n"
            "echo \"env: HOME=$HOME USER=$USER LOGNAME=$LOGNAME\"\n")


@pytest.fixture(scope="module")
def hooker() -> Iterator[Account]:
    """A user whose own group is srunas-hooker's and who is also in srunas-extra."""
    with made_accounts({USER: [USER, EXTRA]}, [USER, EXTRA, OTHER]) as made:
        yield made[USER]


@pytest.fixture
def hooks() -> Iterator[Path]:
    """A directory root owns, every user may pass through, and StrictModes accepts."""
    path = Path(tempfile.mkdtemp(prefix="setui-runas-", dir="/tmp"))
    path.chmod(0o755)
    script = path / "print-id"
    script.write_text(PRINT_ID)
    script.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def said(output: str, key: str) -> str:
    return next(line.split(": ", 1)[1] for line in output.splitlines()
                if line.startswith(key + ": "))


@pytest.mark.slow
async def test_a_hook_runs_as_the_user_with_its_groups_home_and_root_directory(
        hooker: Account, hooks: Path) -> None:
    import pwd

    result = await run_hook(Hook((str(hooks / "print-id"),), 60, RunAs(USER)), env={},
                            stdin=b"")
    assert result.ok, result.describe() + result.output
    ids = said(result.output, "id")
    assert ids.startswith(f"uid={hooker.uid}({USER}) gid={hooker.gid}({USER})")
    assert f"({EXTRA})" in ids  # its supplementary groups, as initgroups gives them
    assert "(root)" not in ids and "groups=0" not in ids
    assert said(result.output, "cwd") == "/"
    home = pwd.getpwnam(USER).pw_dir
    assert said(result.output, "env") == f"HOME={home} USER={USER} LOGNAME={USER}"
    # USER:GROUP: that group, and still the user's own ones beside it.
    other = await run_hook(Hook((str(hooks / "print-id"),), 60, RunAs(USER, OTHER)),
                           env={}, stdin=b"")
    assert said(other.output, "id").startswith(
        f"uid={hooker.uid}({USER}) gid={grp.getgrnam(OTHER).gr_gid}({OTHER})")
    # Without run_as: the agent's own user, as before.
    own = await run_hook(Hook((str(hooks / "print-id"),), 60), env={}, stdin=b"")
    assert said(own.output, "id").startswith(f"uid={os.geteuid()}(")


@pytest.mark.slow
async def test_a_user_gone_since_the_policy_was_read_runs_nothing(hooks: Path) -> None:
    with made_accounts({"srunas-gone": []}):
        hook = Hook((str(hooks / "print-id"),), 60, RunAs("srunas-gone"))
    result = await run_hook(hook, env={}, stdin=b"")
    assert result.exit_status is None and not result.ok
    assert result.describe() == ("could not start: run_as: there is no user 'srunas-gone' "
                                 "on this machine")


def policy(run_as: str, hook: str = "/usr/bin/id", line: str = "") -> str:
    return (f'[[rule]]\nname = "drain"\nprepare = "{hook}"\n{line}'
            f'run_as = {json.dumps(run_as)}\n')


@pytest.mark.slow
def test_run_as_is_checked_when_the_policy_is_read(hooker: Account) -> None:
    rule = parse_policy(policy(f"{USER}:{OTHER}")).rules[0]
    assert rule.run_as == RunAs(USER, OTHER)
    assert rule.prepare is not None and rule.prepare.run_as == rule.run_as
    for bad, why in ((f"{USER}:", "must be \"USER\" or \"USER:GROUP\""),
                     ("a b", "must be \"USER\" or \"USER:GROUP\""),
                     ("srunas-nobody-here", "there is no user 'srunas-nobody-here'"),
                     (f"{USER}:srunas-no-group", "there is no group 'srunas-no-group'")):
        with pytest.raises(PolicyError, match=why) as caught:
            parse_policy(policy(bad))
        assert caught.value.line == 4, bad  # the line that says run_as
    with pytest.raises(PolicyError, match="run_as names who runs its hooks, and it has "
                                          "none"):
        parse_policy(f'[[rule]]\nname = "tell"\nnotify = true\nrun_as = "{USER}"\n')
    assert parse_run_as(7) is None and parse_run_as("x:y:z") is None


@pytest.mark.slow
def test_an_agent_that_is_not_root_refuses_a_policy_with_run_as(
        hooker: Account, hooks: Path) -> None:
    path = hooks / "policy.toml"
    path.write_text(policy(USER, str(hooks / "print-id")))
    done = subprocess.run(
        ["setpriv", f"--reuid={hooker.uid}", f"--regid={hooker.gid}", "--init-groups",
         installation().python, "-m", "setui.cli", "agent", "--dry-run", "--policy",
         str(path)],
        env={"PATH": os.environ["PATH"], "HOME": "/nonexistent",
             "SETUI_CONFIG": "/nonexistent/config.toml", "SETUI_DATA_DIR": "/nonexistent/data"},
        capture_output=True, text=True, timeout=120, cwd="/")
    assert done.returncode == 2, done.stdout + done.stderr
    assert (f"policy refused: {path}:4: rule 'drain': run_as = '{USER}' needs the agent "
            f"to run as root (it runs as uid {hooker.uid})") in done.stderr


@pytest.mark.slow
def test_the_agent_runs_a_rules_hooks_as_its_user(
        tmp_path: Path, emulator: Emulator, hooker: Account, hooks: Path) -> None:
    text = ('[[rule]]\nname = "drain"\nevent_type = "Reboot"\nthis_vm = true\n'
            f'prepare = "{hooks / "print-id"}"\nrun_as = "{USER}"\napprove = "never"\n')
    proc, lines = start_agent(emulator.url, tmp_path, "--policy",
                              str(write_policy(tmp_path, text)))
    try:
        lines.until(agent_said("finished", "prepare"), 60, "the prepare hook to finish")
    finally:
        assert stop(proc) == 0
    assert not any(r.get("agent") == "failed" for r in records(lines))
    with Store.open_dir(tmp_path / "data", readonly=True) as store:
        runs = AgentLog(store, emulator.url).hook_runs()
    assert [(r.step, r.exit_status) for r in runs] == [("prepare", 0)]
    assert said(runs[0].output, "id").startswith(f"uid={hooker.uid}({USER})")


# -- the unit's capability bounding set, measured ------------------------------------------
# The agent's side of a run_as hook, in a child with the unit's identity and limits:
# root, primary group "users" standing in for setui, no supplementary groups, no new
# privileges, and only the capabilities given. It runs a hook as the user that outlives
# its 1 s timeout, then says what became of it, and what /proc tells it about that user's
# process (what the API reads of a client).
BOUNDED = r"""
import asyncio, json, os, sys
from pathlib import Path
from setui.agent.hooks import run_hook
from setui.agent.policy import Hook
from setui.agent.runas import RunAs

hooks, user = Path(sys.argv[1]), sys.argv[2]
result = asyncio.run(run_hook(Hook((str(hooks / "linger"),), 1.0, RunAs(user)), env={},
                              stdin=b""))
pid = int((hooks / "linger.pid").read_text()) if (hooks / "linger.pid").exists() else None
alive = pid is not None and Path(f"/proc/{pid}").exists() and \
    Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
try:  # what the API reads of a client of another user: no CAP_SYS_PTRACE needed
    login_uid_read = not alive or bool(Path(f"/proc/{pid}/loginuid").read_text())
except OSError:
    login_uid_read = False
print(json.dumps({"error": result.error, "timed_out": result.timed_out,
                  "output": result.output, "alive": alive, "pid": pid,
                  "login_uid_read": login_uid_read}))
"""
LINGER = "#!/bin/sh\necho \"$$\" > \"$(dirname \"$0\")/linger.pid\"\nid -u\nexec sleep 120\n"


@pytest.mark.slow
@pytest.mark.parametrize(("caps", "outcome"), [
    ("+setuid,+setgid,+kill", "stopped"),  # the unit's set: the hook runs and is stopped
    ("+setuid,+setgid", "outlives its timeout"),  # no CAP_KILL: root cannot signal it
    ("+setgid,+kill", "cannot start"),  # no CAP_SETUID: it cannot become the user
    ("+setuid,+kill", "cannot start"),  # no CAP_SETGID: nor take its groups
])
def test_what_the_bounding_set_must_keep_for_run_as(
        hooker: Account, hooks: Path, caps: str, outcome: str) -> None:
    (hooks / "linger").write_text(LINGER)
    (hooks / "linger").chmod(0o755)
    os.chmod(hooks, 0o777 | 0o1000)  # the hook, as the user, writes its pid here
    os.chown(hooks, 0, 0)
    done = subprocess.run(
        ["setpriv", f"--bounding-set=-all,{caps}", "--inh-caps=-all", "--no-new-privs",
         f"--regid={grp.getgrnam('users').gr_gid}", "--clear-groups",
         sys.executable, "-c", BOUNDED, str(hooks), USER],
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT / "src")},
        capture_output=True, text=True, timeout=120, cwd="/")
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    try:
        if outcome == "cannot start":
            assert seen["error"] == f"Operation not permitted (as {USER})", seen
            assert seen["pid"] is None
            return
        assert seen["timed_out"] and seen["output"].split()[0] == str(hooker.uid), seen
        assert seen["alive"] is (outcome == "outlives its timeout"), seen
        assert seen["login_uid_read"], seen
    finally:
        if seen.get("alive"):
            os.kill(seen["pid"], 9)
            wait_until(lambda: gone(seen["pid"]), 30, "the lingering hook to go")


def gone(pid: int) -> bool:
    """No such process, or only a zombie waiting for its reaper."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "Z"
    except (OSError, IndexError):
        return True
