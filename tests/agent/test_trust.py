"""The agent runs only what root could have written (sshd's StrictModes): a policy, a hook
or a directory above them that an unprivileged user owns or can write makes a root agent
refuse to start (exit 2, naming the file and why), and a hook that changed hands after
start is not run. The unprivileged user is a real one (nobody, uid 65534): the files are
given to it with chown, as root (the tests run as root, as the agent may); nobody's own
processes could not reach pytest's root-only temporary directories to write them."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from setui.agent.trust import untrusted, untrusted_command
from setui.core.clock import utc_now
from setui.emulator.server import Emulator
from setui.store import Store
from setui.store.agent import HOLD, RELEASE, AgentLog
from setui.store.records import AuditEntry
from tests.support.agent_helpers import (
    EVENT_ID,
    agent_env,
    agent_said,
    posts,
    start_agent,
    stop,
    write_policy,
)
from tests.support.children import SETUI, Lines
from tests.support.install_helpers import installation

NOBODY = 65534
pytestmark = pytest.mark.skipif(
    os.name != "posix" or os.geteuid() != 0,
    reason="needs root: to give files to another user, and to be the agent that must refuse")

# What the hook does if it is ever run: say as whom.
HOOK = '#!/bin/sh\nid -u > "$HOOK_DIR/ran-as"\n'


def _setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    """etc/ (root, 0755) holding policy.toml and hooks/prepare.sh, all root's and 0755/0644."""
    etc = tmp_path / "etc"
    hooks = etc / "hooks"
    hooks.mkdir(parents=True)
    etc.chmod(0o755)
    hooks.chmod(0o755)
    hook = hooks / "prepare.sh"
    hook.write_text(HOOK)
    hook.chmod(0o755)
    policy = etc / "policy.toml"
    policy.write_text(f'[[rule]]\nname = "drain"\nprepare = "{hook}"\n'
                      'approve = "after-prepare"\n')
    policy.chmod(0o644)
    return etc, policy, hook


def _policy_owned(etc: Path, policy: Path, hook: Path) -> tuple[Path, str]:
    os.chown(policy, NOBODY, NOBODY)
    return policy, f"the policy: {policy}: owned by uid {NOBODY} (nobody)"


def _hook_owned(etc: Path, policy: Path, hook: Path) -> tuple[Path, str]:
    os.chown(hook, NOBODY, NOBODY)
    return policy, f"the prepare hook of rule drain: {hook}: owned by uid {NOBODY} (nobody)"


def _directory_owned(etc: Path, policy: Path, hook: Path) -> tuple[Path, str]:
    os.chown(hook.parent, NOBODY, NOBODY)  # nobody could put another file in its place
    return policy, (f"the prepare hook of rule drain: {hook}: the directory {hook.parent} "
                    f"is owned by uid {NOBODY} (nobody)")


def _hook_writable(etc: Path, policy: Path, hook: Path) -> tuple[Path, str]:
    hook.chmod(0o757)
    return policy, f"{hook}: writable by group or others (mode 0757)"


def _directory_writable(etc: Path, policy: Path, hook: Path) -> tuple[Path, str]:
    etc.chmod(0o775)
    return policy, f"the policy: {policy}: the directory {etc} is writable by group or others"


def _linked(etc: Path, policy: Path, hook: Path) -> tuple[Path, str]:
    # A link in a sticky directory (as /tmp is) belongs to whoever made it.
    public = etc / "public"
    public.mkdir()
    public.chmod(0o1777)
    link = public / "policy.toml"
    link.symlink_to(policy)
    os.lchown(link, NOBODY, NOBODY)
    return link, f"the symbolic link {link} is owned by uid {NOBODY} (nobody)"


@pytest.mark.parametrize("spoil", [_policy_owned, _hook_owned, _directory_owned,
                                   _hook_writable, _directory_writable, _linked])
@pytest.mark.slow
def test_a_root_agent_refuses_to_start_on_what_another_user_could_change(
        tmp_path: Path, spoil: Callable[[Path, Path, Path], tuple[Path, str]]) -> None:
    etc, policy, hook = _setup(tmp_path)
    named, why = spoil(etc, policy, hook)
    done = subprocess.run([*SETUI, "agent", "--endpoint", "http://127.0.0.1:9", "--policy",
                           str(named)], capture_output=True, text=True, timeout=60,
                          env=agent_env(tmp_path))
    assert done.returncode == 2, done.stderr
    assert "setui agent: refusing to start: " in done.stderr
    assert why in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "ran-as").exists()


@pytest.mark.slow
def test_the_same_for_a_policy_named_in_a_config_file(tmp_path: Path) -> None:
    _, policy, _ = _setup(tmp_path)
    config = tmp_path / "config.toml"
    config.write_text(f'policy = "{policy}"\n')
    env = agent_env(tmp_path, SETUI_CONFIG=str(config))
    command = [*SETUI, "agent", "--endpoint", "http://127.0.0.1:9"]
    os.chown(policy, NOBODY, NOBODY)
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 2
    assert f"the policy: {policy}: owned by uid {NOBODY} (nobody)" in done.stderr
    # And the config file itself decides which policy runs: it is held to the same rule.
    os.chown(policy, 0, 0)
    os.chown(config, NOBODY, NOBODY)
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 2
    assert f"the config file: {config}: owned by uid {NOBODY} (nobody)" in done.stderr


@pytest.mark.slow
def test_a_hook_the_user_rewrote_is_never_run_as_root(tmp_path: Path) -> None:
    # What was reproduced: the user's own hook, run by a root agent, said uid=0.
    _, policy, hook = _setup(tmp_path)
    hook.write_text(f"#!/bin/sh\nid > {tmp_path}/ran-as\n")
    os.chown(hook, NOBODY, NOBODY)
    done = subprocess.run([*SETUI, "agent", "--endpoint", "http://127.0.0.1:9", "--policy",
                           str(policy)], capture_output=True, text=True, timeout=60,
                          env=agent_env(tmp_path))
    assert done.returncode == 2 and str(hook) in done.stderr
    assert not (tmp_path / "ran-as").exists()


@pytest.mark.slow
def test_a_dry_run_says_what_a_real_run_would_refuse_and_goes_on(
        tmp_path: Path, emulator: Emulator) -> None:
    _, policy, hook = _setup(tmp_path)
    os.chown(hook, NOBODY, NOBODY)
    proc, lines = start_agent(emulator.url, tmp_path, "--policy", str(policy), "--dry-run")
    try:
        lines.until(agent_said("would", "prepare"), 30, "the dry run to go on")
    finally:
        assert stop(proc) == 0
    errors = proc.stderr.read() if proc.stderr else ""
    assert (f"a real run would refuse to start: {policy}:3: the prepare hook of rule drain: "
            f"{hook}") in errors


@pytest.mark.slow
def test_a_hook_that_changed_hands_after_start_is_refused_when_its_turn_comes(
        tmp_path: Path, emulator: Emulator) -> None:
    _, policy, hook = _setup(tmp_path)
    policy.write_text(f'[[rule]]\nname = "drain"\nevent_source = "User"\nprepare = "{hook}"\n'
                      'approve = "after-prepare"\n')
    person = "oncall"

    def hold(action: str) -> None:
        entry = AuditEntry(action=action, time=utc_now(), user=person, host="vm",
                           endpoint=emulator.url, event_id=EVENT_ID)
        with Store.open_dir(tmp_path / "data") as store:
            AgentLog(store, emulator.url).set_hold(EVENT_ID, held=action == HOLD,
                                                   entry=entry)

    hold(HOLD)  # so the agent starts (its check passes) and waits
    proc, lines = start_agent(emulator.url, tmp_path, "--policy", str(policy))
    try:
        lines.until(agent_said("matched"), 30, "the rule to match")
        os.chown(hook, NOBODY, NOBODY)
        hold(RELEASE)
        failed = lines.until(agent_said("failed", "prepare"), 30, "the refused hook")
        lines.until(agent_said("skipped", "approve"), 30, "no approval")
    finally:
        assert stop(proc) == 0
    assert f"refused: {hook}: owned by uid {NOBODY} (nobody)" in failed
    assert not (tmp_path / "ran-as").exists()
    assert posts(emulator) == []


def test_what_the_check_follows(tmp_path: Path) -> None:
    # A sticky directory owned by root passes to an entry root owns (as /tmp/x does).
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    mine = sticky / "mine"
    mine.write_text("x")
    mine.chmod(0o644)
    assert untrusted(mine) is None
    theirs = sticky / "theirs"
    theirs.write_text("x")
    os.chown(theirs, NOBODY, NOBODY)
    assert "owned by uid 65534" in (untrusted(theirs) or "")
    # Not sticky: group or others may replace anything in it.
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    (open_dir / "f").write_text("x")
    assert "is writable by group or others" in (untrusted(open_dir / "f") or "")
    # A link is followed: what it points to is checked, and where the link itself lives.
    link = tmp_path / "link"
    link.symlink_to(open_dir / "f")
    assert f"the directory {open_dir} is writable" in (untrusted(link) or "")
    assert "not an absolute path" in (untrusted("relative/hook") or "")
    assert "cannot be checked" in (untrusted(tmp_path / "missing") or "")
    assert untrusted(write_policy(tmp_path, "")) is None


# The config file the root agent reads: who may approve, the store, the socket, IMDS and
# where audit records go. What was reproduced: a file nobody owned, naming nobody among
# the approvers and with no policy key, was taken, and nobody's hello said may_approve.
NAMES_NOBODY = 'approvers = ["%ops", "nobody"]\n'


def _config_owned(config: Path) -> str:
    os.chown(config, NOBODY, NOBODY)
    return (f"refusing to start: the config file: {config}: owned by uid {NOBODY} (nobody), "
            "not by root or this agent's user (uid 0 (root))")


def _config_directory_writable(config: Path) -> str:
    config.parent.chmod(0o777)  # anyone could put another file in its place
    return (f"refusing to start: the config file: {config}: the directory {config.parent} "
            "is writable by group or others (mode 0777)")


def _config_directory_owned(config: Path) -> str:
    os.chown(config.parent, NOBODY, NOBODY)
    return (f"refusing to start: the config file: {config}: the directory {config.parent} "
            f"is owned by uid {NOBODY} (nobody)")


@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry-run"])
@pytest.mark.parametrize("spoil", [_config_owned, _config_directory_writable,
                                   _config_directory_owned])
@pytest.mark.slow
def test_a_root_agent_refuses_a_config_file_another_user_could_change(
        tmp_path: Path, spoil: Callable[[Path], str], dry_run: bool) -> None:
    etc = tmp_path / "etc"
    etc.mkdir(mode=0o755)
    config = etc / "config.toml"
    config.write_text(NAMES_NOBODY)
    config.chmod(0o644)
    why = spoil(config)
    # A dry run too: it still serves the socket and writes the store the file names.
    done = subprocess.run([*SETUI, "agent", "--endpoint", "http://127.0.0.1:9",
                           *(["--dry-run"] if dry_run else [])],
                          capture_output=True, text=True, timeout=60,
                          env=agent_env(tmp_path, SETUI_CONFIG=str(config)))
    assert done.returncode == 2, done.stderr
    assert why in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    # Refused before anything: no store was made, no socket.
    assert not (tmp_path / "data").exists()



@pytest.mark.slow
def test_an_agent_of_a_users_own_reads_that_users_own_config(emulator: Emulator) -> None:
    # The rule is the agent's user's, not root's alone: nobody's own agent takes nobody's
    # own file (what a root agent refuses above), and serves the approvers it names.
    base = Path(tempfile.mkdtemp(prefix="setui-own-", dir="/tmp"))
    try:
        base.chmod(0o755)
        home = base / "home"
        home.mkdir(mode=0o755)
        config = home / "config.toml"
        config.write_text('approvers = ["nobody"]\n')
        config.chmod(0o644)
        for path in (home, config):
            os.chown(path, NOBODY, NOBODY)
        env = dict(os.environ, SETUI_CONFIG=str(config), SETUI_DATA_DIR=str(home / "data"),
                   SETUI_SOCKET=str(home / "api.sock"), HOME=str(home),
                   PYTHONUNBUFFERED="1", PYTHONIOENCODING="utf-8")
        proc = subprocess.Popen(
            # The interpreter without children's shim: its exec of the interpreter again
            # is refused to nobody here (EACCES), the first one is not.
            ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
             installation().python, "-m", "setui.cli", "agent", "--endpoint", emulator.url,
             "--interval", "0.2"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, encoding="utf-8",
            env=env, cwd="/")
        lines = Lines(proc)
        try:
            said = lines.until(lambda line: "may approve:" in line, 60, "the API")
        finally:
            assert stop(proc) == 0
        assert "may approve: root and nobody" in said
        assert not any("refusing" in line for line in lines.seen)
    finally:
        shutil.rmtree(base, ignore_errors=True)


# What was reproduced: ["/bin/sh", "/path/evil.sh"] with the script (or its directory)
# nobody's ran as root (uid=0): only the program was checked, not what it reads as code.
def _interpreted(tmp_path: Path) -> tuple[Path, Path]:
    """etc/policy.toml (root's) whose prepare hook is /bin/sh with scripts/evil.sh."""
    _, policy, _ = _setup(tmp_path)
    scripts = tmp_path / "scripts"
    scripts.mkdir(mode=0o755)
    script = scripts / "evil.sh"
    script.write_text(f"id -u > {tmp_path}/ran-as\n")
    script.chmod(0o644)
    policy.write_text('[[rule]]\nname = "drain"\nevent_source = "User"\n'
                      f'prepare = ["/bin/sh", "{script}"]\napprove = "after-prepare"\n')
    return policy, script


def _script_owned(script: Path) -> str:
    os.chown(script, NOBODY, NOBODY)
    return f"argument {script}: owned by uid {NOBODY} (nobody)"


def _script_directory_owned(script: Path) -> str:
    os.chown(script.parent, NOBODY, NOBODY)
    return f"argument {script}: the directory {script.parent} is owned by uid {NOBODY}"


def _script_missing_in_theirs(script: Path) -> str:
    # Not there yet, in a directory anyone may add names to (as /tmp): it could be made
    # there before the hook runs.
    script.unlink()
    script.parent.chmod(0o1777)
    return (f"argument {script}: is not there, and someone else could make it: "
            f"{script.parent} is writable by group or others (mode 1777)")


@pytest.mark.parametrize("spoil", [_script_owned, _script_directory_owned,
                                   _script_missing_in_theirs])
@pytest.mark.slow
def test_a_script_behind_an_interpreter_is_held_to_the_same_rule(
        tmp_path: Path, spoil: Callable[[Path], str]) -> None:
    policy, script = _interpreted(tmp_path)
    why = spoil(script)
    done = subprocess.run([*SETUI, "agent", "--endpoint", "http://127.0.0.1:9", "--policy",
                           str(policy)], capture_output=True, text=True, timeout=60,
                          env=agent_env(tmp_path))
    assert done.returncode == 2, done.stderr
    # Where in the policy (its line) and why, as a policy error says it.
    assert (f"setui agent: refusing to start: {policy}:4: the prepare hook of rule drain: "
            f"{why}") in done.stderr, done.stderr
    assert not (tmp_path / "ran-as").exists()


@pytest.mark.slow
def test_a_root_script_behind_an_interpreter_still_runs(
        tmp_path: Path, emulator: Emulator) -> None:
    policy, _ = _interpreted(tmp_path)
    proc, lines = start_agent(emulator.url, tmp_path, "--policy", str(policy))
    try:
        lines.until(agent_said("finished", "prepare"), 30, "the root-owned script to run")
    finally:
        assert stop(proc) == 0
    assert (tmp_path / "ran-as").read_text().strip() == "0"


@pytest.mark.slow
def test_a_script_given_away_after_start_is_refused_when_its_turn_comes(
        tmp_path: Path, emulator: Emulator) -> None:
    policy, script = _interpreted(tmp_path)

    def hold(action: str) -> None:
        entry = AuditEntry(action=action, time=utc_now(), user="oncall", host="vm",
                           endpoint=emulator.url, event_id=EVENT_ID)
        with Store.open_dir(tmp_path / "data") as store:
            AgentLog(store, emulator.url).set_hold(EVENT_ID, held=action == HOLD,
                                                   entry=entry)

    hold(HOLD)  # so the agent starts (its check passes) and waits
    proc, lines = start_agent(emulator.url, tmp_path, "--policy", str(policy))
    try:
        lines.until(agent_said("matched"), 30, "the rule to match")
        os.chown(script, NOBODY, NOBODY)
        hold(RELEASE)
        failed = lines.until(agent_said("failed", "prepare"), 30, "the refused hook")
    finally:
        assert stop(proc) == 0
    assert f"refused: argument {script}: owned by uid {NOBODY} (nobody)" in failed
    assert not (tmp_path / "ran-as").exists()
    assert posts(emulator) == []


def test_which_arguments_name_files(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    program = tmp_path / "program"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    mine = tmp_path / "mine.sh"
    mine.write_text("true\n")
    mine.chmod(0o644)
    theirs = tmp_path / "theirs.sh"
    theirs.write_text("true\n")
    os.chown(theirs, NOBODY, NOBODY)
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)

    def check(*argv: str) -> str | None:
        return untrusted_command([str(program), *argv])

    assert check(str(mine)) is None
    assert f"argument {theirs}: owned by uid {NOBODY}" in (check(str(theirs)) or "")
    # Options are not files, nor a command string (words: not looked into, and a name
    # longer than a file name can be is no file either); after --, everything may be.
    assert check("-c", "echo hello; exit 0", "--force", "-x" * 200) is None
    assert check("-c", "x" * 300) is None
    (tmp_path / "-c").write_text("")
    os.chown(tmp_path / "-c", NOBODY, NOBODY)
    assert check("--", str(tmp_path / "-c")) is not None
    # A relative argument names a file under /, where every hook runs.
    assert check("etc") is None
    assert check("no-such-file-here") is None
    # Devices of root's at any mode; a directory as one on the way would be.
    assert check("/dev/null") is None
    assert check(str(sticky)) is None
    assert "writable by group or others" in (check(str(tmp_path / "sticky" / "new")) or "")
    assert check(str(tmp_path / "new-name")) is None  # only root could make it there
    assert "not a file name" in (check("/etc/pass\0wd") or "")
