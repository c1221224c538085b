"""Nothing goes around the agent: a front end that cannot reach it where it should be does
not approve on its own without being told to.

A socket given on purpose (here SETUI_SOCKET) that is not there, or is not a socket, is
an error for ``setui approve`` and one line for ``setui events``; where the agent is
installed as the service (its unit, or its runtime directory, under the test's system
root: SETUI_SYSTEM_ROOT), approving without it needs ``--standalone``, which says the
approval is not in the agent's audit log. A refusal by the agent names who may approve as
its config has it, and says "refused" once. Real ``setui`` processes, as a real user who
reaches the socket's group and is not an approver (sapi-carol), against the built-in
emulator on loopback."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from setui.emulator.server import Emulator
from setui.store import Store
from tests.support.api_helpers import (
    EVENT_ID,
    Account,
    agent_env,
    needs_root,
    posts,
    start_agent,
    stop,
)
from tests.support.children import wait_until
from tests.support.install_helpers import installation

pytestmark = [pytest.mark.slow, needs_root]


def setui_as(account: Account, *args: str, endpoint: str, data: Path,
             stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    """``setui ARGS`` as ``account`` in a bare environment plus ``env``: IMDS at
    ``endpoint``, its own store in ``data`` (made, the account's)."""
    data.mkdir(exist_ok=True)
    os.chown(data, account.uid, account.gid)
    bare = {"PATH": os.environ.get("PATH", ""), "HOME": "/nonexistent",
            "SETUI_CONFIG": "/nonexistent/config.toml",
            "SETUI_ENDPOINT": endpoint, "SETUI_DATA_DIR": str(data),
            "SETUI_AUDIT_FORWARD": "none", "PYTHONIOENCODING": "utf-8", **env}
    command = ["setpriv", f"--reuid={account.uid}", f"--regid={account.gid}",
               "--init-groups", installation().python, "-m", "setui.cli", *args]
    return subprocess.run(command, env=bare, cwd="/", input=stdin, text=True,
                          encoding="utf-8", capture_output=True, timeout=120)


def test_a_given_socket_that_is_not_there_is_an_error_for_approve_and_a_line_for_events(
        base: Path, emulator: Emulator, accounts: dict[str, Account]) -> None:
    carol, sock = accounts["carol"], base / "run" / "api.sock"
    approve = setui_as(carol, "approve", EVENT_ID, endpoint=emulator.url,
                       data=base / "sync" / "carol", stdin="y\n", SETUI_SOCKET=str(sock))
    assert approve.returncode == 2, approve.stdout + approve.stderr
    assert "Approve?" not in approve.stdout
    assert approve.stderr.count(f"no agent at {sock}: nothing is there") == 1, approve.stderr
    assert "--standalone" in approve.stderr and "Traceback" not in approve.stderr
    assert emulator.requests == []  # IMDS was asked nothing: nothing went around the agent
    events = setui_as(carol, "events", endpoint=emulator.url, data=base / "sync" / "carol",
                      SETUI_SOCKET=str(sock))
    assert events.returncode == 0, events.stderr
    assert events.stderr.splitlines() == [
        f"setui events: standalone: no agent at {sock}: nothing is there "
        "(the socket named by --socket, SETUI_SOCKET or socket = in the config)"]
    assert EVENT_ID in events.stdout


def test_a_file_or_a_directory_at_the_socket_is_said_to_be_not_a_socket(
        base: Path, emulator: Emulator, accounts: dict[str, Account]) -> None:
    carol = accounts["carol"]
    regular = base / "sync" / "a-file"
    regular.write_text("")
    directory = base / "sync" / "a-directory"
    directory.mkdir()
    for path, kind in ((regular, "a regular file"), (directory, "a directory")):
        events = setui_as(carol, "events", endpoint=emulator.url,
                          data=base / "sync" / "carol", SETUI_SOCKET=str(path))
        assert events.returncode == 0, events.stderr
        assert events.stderr.splitlines() == [
            f"setui events: standalone: no agent at {path}: it is {kind}, not a socket"], \
            events.stderr
        approve = setui_as(carol, "approve", EVENT_ID, endpoint=emulator.url,
                           data=base / "sync" / "carol", stdin="y\n",
                           SETUI_SOCKET=str(path))
        assert approve.returncode == 2, approve.stdout + approve.stderr
        assert f"{kind}, not a socket" in approve.stderr and "Approve?" not in approve.stdout
    assert posts(emulator) == []


@pytest.mark.parametrize("installed", ["unit", "runtime directory"])
def test_where_the_service_is_installed_approving_without_the_agent_needs_standalone(
        installed: str, base: Path, emulator: Emulator, accounts: dict[str, Account],
        ) -> None:
    carol, system = accounts["carol"], base / "system"
    if installed == "unit":
        evidence = system / "etc" / "systemd" / "system" / "setui-agent.service"
    else:
        evidence = system / "run" / "setui"
    evidence.parent.mkdir(parents=True)
    evidence.mkdir() if installed != "unit" else evidence.write_text("[Unit]\n")
    system.chmod(0o755)
    for parent in evidence.relative_to(system).parents:
        (system / parent).chmod(0o755)
    data = base / "sync" / "carol"

    refused = setui_as(carol, "approve", EVENT_ID, endpoint=emulator.url, data=data,
                       stdin="y\n", SETUI_SYSTEM_ROOT=str(system))
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "Approve?" not in refused.stdout
    said = " ".join(refused.stderr.split())
    assert f"the agent is installed as this VM's service ({evidence})" in said, said
    assert "--standalone" in said
    assert emulator.requests == []

    events = setui_as(carol, "events", endpoint=emulator.url, data=data,
                      SETUI_SYSTEM_ROOT=str(system))
    assert events.returncode == 0 and len(events.stderr.splitlines()) == 1, events.stderr
    assert events.stderr.startswith("setui events: standalone: ")

    told = setui_as(carol, "approve", EVENT_ID, "--standalone", endpoint=emulator.url,
                    data=data, stdin="y\n", SETUI_SYSTEM_ROOT=str(system))
    assert told.returncode == 0, told.stdout + told.stderr
    assert "Approve? [y/N]" in told.stdout
    assert "not in the agent's audit log" in " ".join(told.stderr.split()), told.stderr
    assert len(posts(emulator)) == 1
    with Store.open_dir(data, readonly=True) as store:  # carol's own log has it
        assert [r.user for r in store.audit_log.records()][-1] == "sapi-carol"


@pytest.mark.parametrize("approvers", [None, '["sapi-bob", "%sapi-nobody-group"]'])
def test_a_refusal_names_who_may_approve_as_the_agent_has_it_and_says_refused_once(
        approvers: str | None, base: Path, emulator: Emulator,
        accounts: dict[str, Account]) -> None:
    if approvers is not None:
        (base / "config.toml").write_text(f"approvers = {approvers}\n")
    proc, _ = start_agent(emulator.url, base, env=agent_env(base))
    try:
        with Store.open_dir(base / "data", readonly=True) as store:
            wait_until(lambda: store.history.incarnations(limit=1) != [], 30,
                       "the first document stored")
        done = [setui_as(accounts["carol"], "approve", EVENT_ID, *yes, endpoint=emulator.url,
                         data=base / "sync" / "carol", stdin="y\n",
                         SETUI_SOCKET=str(base / "run" / "api.sock"))
                for yes in ((), ("--yes",))]
    finally:
        assert stop(proc) == 0
    for run in done:
        assert run.returncode == 1, run.stdout + run.stderr
        said = " ".join((run.stdout + run.stderr).split())
        assert said.lower().count("refused") == 1, said
        assert "Approve?" not in said
        if approvers is None:
            assert "you are not root and not in group setui" in said
            assert said.count("group setui") == 1, said
        else:
            assert f"approvers = {approvers}" in said, said
            assert "group setui" not in said, said
    assert posts(emulator) == []
