"""The headless commands attached to a real agent, run as real users (setpriv) in
processes of their own: each shows what the agent recorded before it started, asks IMDS
nothing (their own endpoint is a decoy emulator whose request log must stay empty) and
keeps no store; approvals go through the agent as the kernel says who asks; and
standalone still works, told so or with no agent, saying why when the socket given does
not answer."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, overload

import httpx
import pytest

from setui.api.client import Subscription, VmPush
from setui.emulator.faults import parse_faults
from setui.emulator.scenario import parse_scenario
from setui.emulator.server import Emulator
from setui.store import APPROVE_ATTEMPT, APPROVE_OUTCOME, DISMISSED, REFUSED, Store
from tests.support.api_helpers import (
    EVENT_ID,
    VM,
    Account,
    needs_root,
    posts,
    run_as,
    start_agent,
    stop,
)
from tests.support.children import PYTHON, Lines, wait_until
from tests.support.install_helpers import installation
from tests.support.scripted import Answer, Hang, ScriptedImds, document, event
from tests.support.waiting import PATIENCE

pytestmark = [pytest.mark.slow, needs_root]

MINE = "F02C2EDE-3B1C-4D5E-9F00-0123456789AB"
DECOY = 'name = "decoy"\nvm_name = "decoy-vm"\ntail = 600\n'


@pytest.fixture
def decoy() -> Iterator[Emulator]:
    """What the commands are told IMDS is: attached, they must never ask it anything."""
    with Emulator(parse_scenario(DECOY)) as emulator:
        yield emulator


@overload
def setui_as(account: Account | None, base: Path, *args: str, endpoint: str,
             stdin: str | None = None, data: Path | None = None,
             background: Literal[False] = False) -> subprocess.CompletedProcess[str]: ...
@overload
def setui_as(account: Account | None, base: Path, *args: str, endpoint: str,
             stdin: str | None = None, data: Path | None = None,
             background: Literal[True]) -> subprocess.Popen[str]: ...
def setui_as(account: Account | None, base: Path, *args: str, endpoint: str,
             stdin: str | None = None, data: Path | None = None,
             background: bool = False) -> subprocess.CompletedProcess[str] | subprocess.Popen[str]:
    """``setui ARGS`` as ``account`` (None: root) in a bare environment: the agent's
    socket in ``base``, IMDS at ``endpoint``, no store of its own unless ``data``."""
    ids = [] if account is None else ["setpriv", f"--reuid={account.uid}",
                                      f"--regid={account.gid}", "--init-groups"]
    env = {"PATH": os.environ.get("PATH", ""), "HOME": "/nonexistent",
           "SETUI_CONFIG": "/nonexistent/config.toml",
           "SETUI_SOCKET": str(base / "run" / "api.sock"), "SETUI_ENDPOINT": endpoint,
           "SETUI_AUDIT_FORWARD": "none", "PYTHONIOENCODING": "utf-8"}
    if data is not None:
        env["SETUI_DATA_DIR"] = str(data)
    # Root's children through the shim that hears Ctrl-C (children.py); another user's
    # directly (the shim's exec goes through a path only root may follow here).
    python = PYTHON if account is None else [installation().python]
    command = [*ids, *python, "-m", "setui.cli", *args]
    if background:
        return subprocess.Popen(command, env=env, cwd="/", text=True, encoding="utf-8",
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
    return subprocess.run(command, env=env, cwd="/", input=stdin or "", text=True,
                          encoding="utf-8", capture_output=True, timeout=120)


def _audit(base: Path) -> list[Any]:
    with Store.open_dir(base / "data", readonly=True) as store:
        return store.audit_log.records(oldest_first=True)


def _recorded(base: Path) -> None:
    """Wait until the agent has stored its first document."""
    with Store.open_dir(base / "data", readonly=True) as store:
        wait_until(lambda: store.history.incarnations(limit=1) != [], 30,
                   "the first document stored")


@contextlib.contextmanager
def agent_running(url: str, base: Path) -> Iterator[subprocess.Popen[str]]:
    """The agent, from its first document stored until a clean stop."""
    proc, _ = start_agent(url, base)
    try:
        _recorded(base)
        yield proc
    finally:
        assert stop(proc) == 0


def test_every_reader_shows_what_the_agent_recorded_and_asks_imds_nothing(
        base: Path, emulator: Emulator, decoy: Emulator,
        accounts: dict[str, Account]) -> None:
    alice = accounts["alice"]
    with agent_running(emulator.url, base) as proc:
        assert run_as(accounts["bob"], base, "dismiss", {"ids": [EVENT_ID]})["recorded"]

        def ok(*args: str, who: Account | None = alice) -> subprocess.CompletedProcess[str]:
            done = setui_as(who, base, *args, endpoint=decoy.url)
            assert done.returncode == 0, (args, done.stdout, done.stderr)
            assert "Traceback" not in done.stderr
            return done

        listed = ok("events")
        assert EVENT_ID in listed.stdout and f"this VM: {VM}" in listed.stdout
        # (A second line would say the agent's state is stale: on a loaded machine it
        # may be, and that is not what is tested here.)
        assert listed.stderr.startswith(f"setui events: attached to the agent (pid "
                                        f"{proc.pid}, up ")
        shown = json.loads(ok("events", "--json").stdout)
        assert [e["event_id"] for e in shown["events"]] == [EVENT_ID]
        assert shown["vm_name"] == VM and shown["endpoint"] == emulator.url
        attached = shown["attached"]
        assert attached["pid"] == proc.pid and attached["words"].startswith(
            f"attached to the agent (pid {proc.pid}, up ")
        assert attached["live"] is (attached["problem"] is None)

        history = ok("history").stdout
        assert "recording began" in history and "Reboot F020BA2E" in history
        assert EVENT_ID in ok("history", "show", "1", "--diff").stdout
        story = ok("history", "--event", EVENT_ID[:8]).stdout
        assert "first seen: Scheduled" in story and "sapi-bob on vm dismissed" in story
        listed_audit = ok("audit").stdout
        assert "dismissed" in listed_audit and "by sapi-bob" in listed_audit
        assert "chain: ok, 1 record" in listed_audit
        # The whole-record queries as root (no wait between them): the same record.
        assert ok("audit", "verify", who=None).stdout.startswith("ok, 1 record")
        [exported] = [json.loads(line) for line in
                      ok("audit", "export", "-", who=None).stdout.splitlines()]
        assert exported["action"] == DISMISSED and exported["user"] == "sapi-bob"
        copy = base / "sync" / "copy.jsonl"  # a copy kept off the VM, checked against
        copy.write_text(json.dumps(exported) + "\n")
        copy.chmod(0o644)
        assert "the 1 records of the copy match the log" in ok(
            "audit", "verify", "--against", str(copy)).stdout
        report = ok("report", who=None).stdout
        assert EVENT_ID in report and f"**Endpoint:** {emulator.url}" in report, report
        scenario = parse_scenario(ok("history", "export-scenario", "-", who=None).stdout)
        assert [e.id for e in scenario.events] == [EVENT_ID]
    assert decoy.requests == []
    assert not (base / "mine").exists()


def test_two_users_approving_at_once_through_the_cli_make_one_post_under_the_winner(
        base: Path, emulator: Emulator, decoy: Emulator,
        accounts: dict[str, Account]) -> None:
    with agent_running(emulator.url, base):
        running = {who: setui_as(accounts[who], base, "approve", EVENT_ID, "--yes",
                                 endpoint=decoy.url, background=True)
                   for who in ("alice", "bob")}
        done = {who: (*p.communicate(timeout=120), p.returncode)
                for who, p in running.items()}
    winners = [who for who, (_out, _err, code) in done.items() if code == 0]
    assert len(winners) == 1, done
    winner = winners[0]
    loser = "bob" if winner == "alice" else "alice"
    out, _err, code = done[loser]
    # Refused, and why depends on when it came: the winner's approval in flight or done
    # (the claim), the event started since it was shown (the snapshot differs), or
    # started before it was shown at all (a slow start, seen under make test-hogs).
    said = " ".join(out.split())
    assert code == 1, done
    assert (f"already approved by sapi-{winner}" in said
            or f"may already have been sent by sapi-{winner}" in said
            or "has started since it was shown" in said
            or f"{EVENT_ID} (Reboot) has already started" in said), done
    assert "approved: the service answered HTTP 200" in done[winner][0]
    assert len(posts(emulator)) == 1 and decoy.requests == []
    attempts = [r for r in _audit(base) if r.action == APPROVE_ATTEMPT]
    assert [(r.user, r.details["api"]["uid"]) for r in attempts] == [
        (f"sapi-{winner}", accounts[winner].uid)]


def test_a_non_approver_is_refused_says_who_may_and_is_recorded(
        base: Path, emulator: Emulator, decoy: Emulator,
        accounts: dict[str, Account]) -> None:
    with agent_running(emulator.url, base):
        said = setui_as(accounts["carol"], base, "approve", EVENT_ID, "--yes",
                        endpoint=decoy.url)
        asked = setui_as(accounts["carol"], base, "approve", EVENT_ID, endpoint=decoy.url)
    for done in (said, asked):
        assert done.returncode == 1, done.stdout + done.stderr
        # Said once, with who may approve and what to do (tests/api/test_no_bypass.py).
        assert f"{EVENT_ID}: refused: the agent does not take approvals from sapi-carol: " \
               "you are not root and not in group setui, who may approve here: ask an " \
               "administrator to add you to it (it counts from your next login); nothing " \
               "was sent" in done.stdout
        assert "REFUSED" not in done.stdout
        assert "Approve?" not in done.stdout  # nothing to ask: the agent would refuse it
    assert posts(emulator) == [] and decoy.requests == []
    refused = [r for r in _audit(base) if r.action == REFUSED]
    assert [(r.user, r.event_id, r.details["op"]) for r in refused] == [
        ("sapi-carol", EVENT_ID, "approve")] * 2


def test_standalone_when_told_or_with_no_agent_and_why_when_its_socket_does_not_answer(
        base: Path, emulator: Emulator, decoy: Emulator, tmp_path: Path) -> None:
    def events(*args: str) -> subprocess.CompletedProcess[str]:
        done = setui_as(None, base, "events", *args, endpoint=decoy.url, data=tmp_path)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        return done

    # No agent at the socket given (SETUI_SOCKET): standalone, said in one line.
    alone = events()
    assert alone.stderr == (f"setui events: standalone: no agent at {base / 'run' / 'api.sock'}"
                            ": nothing is there (the socket named by --socket, SETUI_SOCKET "
                            "or socket = in the config)\n")
    assert "No scheduled events" in alone.stdout
    assert len(decoy.requests) > 0
    # A socket left behind by an agent that died: standalone, said in one line.
    left = socket.socket(socket.AF_UNIX)
    left.bind(str(base / "run" / "api.sock"))
    left.close()
    told = events()
    assert told.stderr == (f"setui events: standalone: no agent at {base / 'run' / 'api.sock'}"
                           " (a socket is left there; nothing answers)\n")
    (base / "run" / "api.sock").unlink()
    # The agent runs, and --standalone is given: this command polls and records itself.
    with agent_running(emulator.url, base):
        asked = len(decoy.requests)
        own = events("--standalone")
        assert own.stderr == "" and EVENT_ID not in own.stdout
        assert len(decoy.requests) > asked
        history = setui_as(None, base, "history", "--standalone", endpoint=decoy.url,
                           data=tmp_path)
        assert EVENT_ID not in history.stdout and "recording began" in history.stdout
        # And attached, for the contrast: the agent's event.
        assert EVENT_ID in events().stdout


def test_someone_who_may_not_reach_the_socket_is_told_so_and_runs_standalone(
        base: Path, emulator: Emulator, decoy: Emulator) -> None:
    with agent_running(emulator.url, base):
        nobody = setui_as(Account("nobody", 65534, 65534), base, "history",
                          endpoint=decoy.url)
    assert nobody.returncode == 0 and "Traceback" not in nobody.stderr, nobody.stderr
    assert nobody.stderr.startswith(
        f"setui history: standalone: cannot reach the agent at {base / 'run' / 'api.sock'}: "
        "you are not in group sapi-ops\n")
    assert EVENT_ID not in nobody.stdout


@contextlib.contextmanager
def watching(base: Path, decoy: Emulator, *, attaches: int) -> Iterator[Lines]:
    """``setui watch --json`` as root, attached to the agent in ``base``; its lines. After,
    ended by Ctrl-C: cleanly, having attached ``attaches`` times and asked IMDS nothing."""
    watch = setui_as(None, base, "watch", "--json", endpoint=decoy.url, background=True)
    assert isinstance(watch, subprocess.Popen)
    try:
        yield Lines(watch)
    finally:
        watch.send_signal(signal.SIGINT)
        _out, err = watch.communicate(timeout=60)
    assert watch.returncode == 0 and "Traceback" not in err, err
    assert err.count("setui: attached to the agent (pid") == attaches, err
    assert decoy.requests == []


def test_watch_prints_the_agents_lines_and_carries_on_across_its_restart(
        base: Path, emulator: Emulator, decoy: Emulator) -> None:
    proc, _ = start_agent(emulator.url, base)
    try:
        with watching(base, decoy, attaches=2) as lines:
            first = json.loads(lines.until(lambda line: EVENT_ID in line, 60, "the event"))
            assert first["change"] == "appeared" and first["initial"] is True
            assert first["this_vm"] is True
            assert stop(proc) == 0
            gone = json.loads(lines.until(lambda line: "went away" in line, 60,
                                          "the agent gone"))
            assert gone["change"] == "connection" and gone["state"] == "stale"
            proc, _ = start_agent(emulator.url, base)
            # The agent started again may say "enabling" until its own first poll is
            # answered: what watch must come back to is the agent's word that the
            # connection is live.
            back = json.loads(lines.until(
                lambda line: '"connection"' in line and json.loads(line)["state"] != "enabling",
                60, "it back"))
            assert back["state"] == "live", back
    finally:
        assert stop(proc) == 0
    assert not any(line.startswith('{"time"') and '"recording' in line for line in lines.seen)


async def _vm_pushed(sub: Subscription) -> VmPush:
    """The agent's next ``vm`` push to ``sub``, past its states and ticks."""
    async for push in sub:
        if isinstance(push, VmPush):
            return push
    raise AssertionError("the agent went before it pushed this VM")


async def test_watch_attached_before_the_agent_knew_this_vm_marks_its_events_once_pushed(
        base: Path, emulator: Emulator, decoy: Emulator) -> None:
    """The agent learns this VM's name after a watch attached (the compute metadata failing
    first): watch takes the agent's ``vm`` push, without reconnecting, and marks the next
    change as this VM's, where before it could only say it did not know."""
    emulator.set_faults(parse_faults("compute-503=1"))
    proc, _ = start_agent(emulator.url, base)
    try:
        with watching(base, decoy, attaches=1) as lines:  # one: the push, not a reconnect
            first = json.loads(lines.until(lambda line: EVENT_ID in line, 60, "the event"))
            assert first["change"] == "appeared" and first["this_vm"] is None
            # A subscriber of the test's own hears the push in the same sweep as watch,
            # so the change made after it reaches watch after the push too.
            sub = await Subscription.open(base / "run" / "api.sock", timeout=10)
            try:
                assert sub.hello.agent.vm_name is None
                emulator.set_faults(None)
                pushed = await asyncio.wait_for(_vm_pushed(sub), PATIENCE)
            finally:
                await sub.aclose()
            assert pushed.vm.vm_name == VM
            answer = httpx.post(f"{emulator.url}/metadata/scheduledevents",
                                params={"api-version": "2020-07-01"},
                                headers={"Metadata": "true"},
                                json={"StartRequests": [{"EventId": EVENT_ID}]})
            assert answer.status_code == 200
            started = json.loads(lines.until(lambda line: '"started"' in line, 60,
                                             "the start"))
    finally:
        assert stop(proc) == 0
    assert started["this_vm"] is True, started


# -- an approval in the agent, as the command hears it ---------------------------------------------
@pytest.fixture
def served(base: Path, scripted: ScriptedImds) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """An agent on the scripted metadata service, serving MINE of web-0."""
    scripted.serve(document(7, event(MINE, ["web-0"])))
    proc, _ = start_agent(scripted.url, base)
    _recorded(base)
    yield proc, base
    if proc.poll() is None:
        stop(proc)


def test_each_failed_try_in_the_agent_is_printed_as_it_comes(
        served: tuple[subprocess.Popen[str], Path], scripted: ScriptedImds,
        decoy: Emulator) -> None:
    _proc, base = served
    scripted.on_posts(Answer(503, retry_after=1))
    done = setui_as(None, base, "approve", MINE, "--yes", endpoint=decoy.url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{MINE}: try 1: the metadata service failed (503 Service Unavailable)" \
        in done.stdout
    assert "; trying again in 1s" in done.stdout
    assert f"{MINE}: approved: the service answered HTTP 200" in done.stdout
    assert "at try 2" in done.stdout
    assert len(scripted.posts()) == 2 and decoy.requests == []


def test_ctrl_c_while_the_agent_approves_leaves_it_to_the_agent(
        served: tuple[subprocess.Popen[str], Path], scripted: ScriptedImds,
        decoy: Emulator) -> None:
    _proc, base = served
    scripted.on_posts(Hang())  # the first try times out; the agent tries again
    approving = setui_as(None, base, "approve", MINE, "--yes", endpoint=decoy.url,
                         background=True)
    assert isinstance(approving, subprocess.Popen)
    wait_until(lambda: len(scripted.posts()) == 1, 60, "the agent's POST")
    approving.send_signal(signal.SIGINT)
    out, err = approving.communicate(timeout=60)
    assert approving.returncode == 1 and "Traceback" not in err, out + err
    assert "setui approve: interrupted: the approval runs in the agent, which goes on with " \
           "it: `setui audit` shows the outcome" in err
    # It did: the second try, after the first timed out, was accepted, and recorded.
    wait_until(lambda: any(r.action == APPROVE_OUTCOME for r in _audit(base)), 60,
               "the agent's outcome")
    outcome = next(r for r in _audit(base) if r.action == APPROVE_OUTCOME)
    assert outcome.user == "root" and outcome.status == 200
    assert len(scripted.posts()) == 2


def test_a_connection_lost_mid_approval_is_an_outcome_unknown(
        served: tuple[subprocess.Popen[str], Path], scripted: ScriptedImds,
        decoy: Emulator) -> None:
    proc, base = served
    scripted.on_posts(Hang())
    approving = setui_as(None, base, "approve", MINE, "--yes", endpoint=decoy.url,
                         background=True)
    assert isinstance(approving, subprocess.Popen)
    wait_until(lambda: len(scripted.posts()) == 1, 60, "the agent's POST")
    proc.kill()
    proc.wait(timeout=30)
    out, err = approving.communicate(timeout=60)
    assert approving.returncode == 1 and "Traceback" not in err, out + err
    said = " ".join(out.split())
    assert f"{MINE}: outcome unknown: the connection to the agent was lost while it " \
           "approved" in said
    assert "ask the agent: `setui audit` shows what became of it" in said
