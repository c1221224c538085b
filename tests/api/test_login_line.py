"""The login line: the hook `setui service install` writes, sourced by a real shell as a
real user, asking a real agent (on a loopback emulator) over its socket; what it says
with an event of this VM, with none, to a user who may not reach the socket, and against
a socket that never answers. Its lines from hostile frames, and what it imports.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

from setui import loginline
from setui.api.client import DEFAULT_SOCKET, AgentClient
from setui.core.model import is_this_vm
from setui.emulator.scenario import parse_scenario
from setui.emulator.server import Emulator
from setui.install.loginhook import render_hook
from tests.support.api_helpers import (
    EVENT_ID,
    JSON,
    VM,
    Account,
    needs_root,
    run_as,
    start_agent,
    stop,
)
from tests.support.children import wait_until
from tests.support.install_helpers import installation

OTHER_VM = "other-vm-7"
TWO_VMS = f"""
name = "login-line"
vm_name = "{VM}"
tail = 600

[[events]]
id = "{EVENT_ID}"
type = "Reboot"
at = 0
notice = "15m"

[[events]]
id = "0E3C4A1B-0000-4000-8000-000000000007"
type = "Freeze"
at = 0
notice = "10m"
resources = ["{OTHER_VM}"]
"""
NO_EVENT = f"""
name = "login-line-quiet"
vm_name = "{VM}"
tail = 5
"""


def _everyones_python() -> str:
    """A Python 3.10 or later that every user can run: the ``installation``'s, unless its
    interpreter lives where others cannot reach (a build under /root), else the
    system's."""
    for candidate in (installation().python, "/usr/bin/python3"):
        done = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c",
             '[ -x "$0" ] && "$0" -I -S -c "import sys; assert sys.version_info >= (3, 10)"',
             candidate], capture_output=True, timeout=60, cwd="/")
        if done.returncode == 0:
            return candidate
    pytest.skip("no Python 3.10 or later that every user may run")


@pytest.fixture(scope="module")
def hook() -> Iterator[Path]:
    """The hook as `setui service install` writes it (tests/install check that it does),
    naming a Python every user may run and this setui, where every user may read it."""
    directory = Path(tempfile.mkdtemp(prefix="setui-login-", dir="/tmp"))
    directory.chmod(0o755)
    path = directory / "setui-login.sh"
    path.write_text(render_hook(_everyones_python(), installation().package.parent))
    path.chmod(0o644)
    yield path
    shutil.rmtree(directory, ignore_errors=True)


def login(hook: Path, sock: Path, account: Account | None = None, *,
          interactive: bool = True, budget: str | None = "10") -> str:
    """Source the hook as an sh login would, as ``account`` (None: root); what it
    printed. ``budget``: the
    login line's own (generous where the agent must answer on a loaded machine; None:
    the default). Ends well within a generous deadline or fails."""
    ids: list[str] = []
    if account is not None:
        ids = ["setpriv", f"--reuid={account.uid}", f"--regid={account.gid}",
               "--init-groups"]
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "SETUI_SOCKET": str(sock)}
    if budget is not None:
        env["SETUI_LOGIN_BUDGET"] = budget
    shell = ["sh", "-i", "-c"] if interactive else ["sh", "-c"]
    done = subprocess.run([*ids, *shell, f". {hook}; echo done"], capture_output=True,
                          text=True, timeout=60, env=env, cwd="/", stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("done\n"), done.stdout
    return done.stdout.removesuffix("done\n")


NOBODY = Account("nobody", 65534, 65534)


def _ready(sock: Path) -> bool:
    with AgentClient.connect(sock) as client:
        return client.hello.agent.vm_name == VM and \
            client.state()[0].state.document is not None


@contextlib.contextmanager
def agent_on(scenario: str, base: Path) -> Iterator[Path]:
    emu = Emulator(parse_scenario(scenario), speed=1.0)
    emu.start()
    proc, _ = start_agent(emu.url, base)
    sock = base / "run" / "api.sock"
    try:
        wait_until(lambda: _ready(sock), 30, "the agent's first answer and this VM's name")
        yield sock
    finally:
        assert stop(proc) == 0
        emu.stop()


@needs_root
@pytest.mark.slow
def test_the_login_lists_this_vms_event_and_who_holds_or_approved_it(
        base: Path, hook: Path, accounts: dict[str, Account]) -> None:
    with agent_on(TWO_VMS, base) as sock:
        said = login(hook, sock, accounts["carol"])
        lines = said.splitlines()
        assert len(lines) == 2, said
        assert lines[0].startswith("setui: Reboot Scheduled, NotBefore T-1"), said
        assert lines[0].endswith(" UTC)"), said  # T-14:5x (HH:MM:SS UTC), nothing more
        assert "Freeze" not in said and OTHER_VM not in said  # another VM's event
        assert lines[1] == "setui: `setui` shows them, with the agent's plan and the history"
        # Nothing in a shell that is not interactive (scp, a command over ssh).
        assert login(hook, sock, accounts["carol"], interactive=False) == ""
        # Nothing for a user who may not reach the socket.
        assert login(hook, sock, NOBODY) == ""
        # Nothing once the budget is spent (a millisecond: Python's start-up, inside it,
        # takes more).
        assert login(hook, sock, accounts["carol"], budget="0.001") == ""
        held = run_as(accounts["alice"], base, "hold", {"id": EVENT_ID})
        assert held["held"] is True, held
        said = login(hook, sock, accounts["carol"])
        assert said.splitlines()[0].endswith(" UTC), held by sapi-alice"), said
        released = run_as(accounts["bob"], base, "release", {"id": EVENT_ID})
        assert released["held"] is False, released
        assert "held" not in login(hook, sock, accounts["carol"])
        approved = run_as(accounts["bob"], base, "approve", {"ids": [EVENT_ID]})
        assert approved["outcomes"][0]["approved"], approved
        # Started a second after the approval (the scenario's approval_delay).
        wait_until(lambda: login(hook, sock, accounts["carol"]).startswith(
            "setui: Reboot Started, approved by sapi-bob\n"), 30,
            "the login to say the event started, approved by bob")


@needs_root
@pytest.mark.slow
def test_nothing_is_said_when_no_event_is_scheduled(
        base: Path, hook: Path, accounts: dict[str, Account]) -> None:
    with agent_on(NO_EVENT, base) as sock:
        assert login(hook, sock, accounts["carol"]) == ""


@pytest.mark.slow
def test_a_socket_that_never_answers_says_nothing_and_the_login_goes_on(
        tmp_path: Path, hook: Path) -> None:
    """Someone listens and never answers (an agent stopped with SIGSTOP, say): the
    default budget ends it. The deadline here is generous, not a timing."""
    sock = tmp_path / "api.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(sock))
        server.listen(8)
        assert login(hook, sock, budget=None) == ""
        # It was asked: the connection waits in the backlog, never accepted.
        server.settimeout(0)
        with server.accept()[0]:
            pass


@pytest.mark.slow
def test_no_socket_says_nothing(tmp_path: Path, hook: Path) -> None:
    assert login(hook, tmp_path / "absent.sock", budget=None) == ""


@pytest.mark.slow
def test_the_login_line_loads_no_more_of_setui_than_it_must(hook: Path) -> None:
    """As the hook runs it (-I -S), after a whole run: the socket absent."""
    code = ("import sys; sys.path.append(sys.argv[1]); from setui.loginline import main; "
            "main(); print(sorted(m for m, module in sys.modules.items() if module and "
            "m.split('.')[0] in ('setui', 'email', 'sqlite3', 'httpx', 'asyncio', 'h11', "
            "'typing')))")
    site = str(Path(loginline.__file__).parent.parent)
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code, site], capture_output=True,
                          text=True, timeout=60, env={"SETUI_SOCKET": "/nonexistent.sock"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(["setui", "setui.core", "setui.core.textsafe",
                                       "setui.core.timefmt", "setui.loginline"])


# -- the lines, from frames as the agent sends them (and as a hostile one might) ----------
def _frames(events: list[object], *, vm_name: object = VM, held: object = None,
            approvals: object = None, now: str = "2026-11-25T19:00:00.000000Z",
            lives: object = None) -> tuple[dict[str, Any], dict[str, Any]]:
    hello = {"api": 1, "agent": {"vm_name": vm_name}}
    state = {"now": now, "document": {"DocumentIncarnation": 1, "Events": events},
             "lives": lives if lives is not None else [
                 {"event_id": "E-1", "not_before": "2026-11-25T19:09:58.000000Z"}],
             "approvals": approvals or {}}
    return hello, {"state": state, "plan": {"steps": [], "held": held}}


def _event(**fields: object) -> dict[str, object]:
    return {"EventId": "E-1", "EventType": "Reboot", "EventStatus": "Scheduled",
            "Resources": [VM], "NotBefore": "Wed, 25 Nov 2026 19:09:58 GMT", **fields}


def test_a_scheduled_event_with_its_countdown_and_who_approved_it() -> None:
    hello, answer = _frames([_event()], approvals={"E-1": {"user": "sapi-bob"}})
    assert loginline.lines(hello, answer, {}) == [
        "setui: Reboot Scheduled, NotBefore T-9:58 (19:09:58 UTC), approved by sapi-bob",
        "setui: `setui` shows them, with the agent's plan and the history"]


def test_a_hold_whose_holder_is_not_known_says_held() -> None:
    hello, answer = _frames([_event(EventStatus="Started", NotBefore="")], held=["E-1"])
    assert loginline.lines(hello, answer, {})[0] == "setui: Reboot Started, held"
    assert loginline.lines(hello, answer, {"E-1": "sapi-alice"})[0] == \
        "setui: Reboot Started, held by sapi-alice"


def test_text_from_the_agent_is_escaped_and_bounded() -> None:
    hostile = "Reboot\x1b]0;owned\x07\u202e" + "x" * 500
    hello, answer = _frames([_event(EventType=hostile)],
                            approvals={"E-1": {"user": "ev\x1b[2Jil"}})
    line = loginline.lines(hello, answer, {})[0]
    assert "\x1b" not in line and "\u202e" not in line and "\x07" not in line
    assert "Reboot\\x1b]0;owned\\x07\\u202e" in line and "approved by ev\\x1b[2Jil" in line
    assert len(line) < 200


def test_when_the_vms_name_is_not_known_every_event_is_said_with_its_vms() -> None:
    hello, answer = _frames([_event(Resources=["web-1", "web-2"])], vm_name=None)
    assert loginline.lines(hello, answer, {})[0] == \
        "setui: Reboot Scheduled, NotBefore T-9:58 (19:09:58 UTC), for web-1, web-2"


@pytest.mark.parametrize("frames", [
    ({}, {}), ({"api": 1}, {"state": None}), ({"api": 1}, {"state": {"document": None}}),
    ({"api": 1}, {"state": {"document": {"Events": "no"}}}),
    _frames([]), _frames([_event(Resources=[OTHER_VM])]), _frames(["E-1", None, 7]),
])
def test_no_event_of_this_vm_or_no_readable_state_says_nothing(
        frames: tuple[dict[str, Any], dict[str, Any]]) -> None:
    assert loginline.lines(frames[0], frames[1], {}) == []


@settings(max_examples=300, deadline=None)
@given(hello=JSON, state=JSON, plan=JSON, event=JSON, life=JSON, holders=JSON)
def test_any_frame_at_all_gives_lines_or_none_and_never_a_control(
        hello: object, state: object, plan: object, event: object, life: object,
        holders: object) -> None:
    """Whatever a hostile agent puts in place of any part of its frames."""
    good_hello, good = _frames([_event()])
    for frames in (
            (hello, {"state": state, "plan": plan}),
            (good_hello, {**good, "plan": plan}),
            (good_hello, {"state": {**good["state"], "document": {"Events": [event]}}}),
            (good_hello, {"state": {**good["state"], "lives": [life]}, "plan": plan}),
            ({"agent": {"vm_name": event}}, good)):
        said = loginline.lines(frames[0] if isinstance(frames[0], dict) else {}, frames[1],
                               holders if isinstance(holders, dict) else {})
        assert all(isinstance(line, str) and line.isprintable() for line in said)


@pytest.mark.parametrize(("resource", "vm_name"), [
    ("app-vm-1", "app-vm-1"), ("APP-VM-1", "app-vm-1"), ("_app-vm-1", "app-vm-1"),
    ("app-vm-10", "app-vm-1"), ("", "app-vm-1"), ("app-vm-1", ""), ("İ", "i̇"),
    ("ß", "ss"), ("__x", "_X"),
])
def test_this_vm_is_the_models_rule(resource: str, vm_name: str) -> None:
    assert loginline.this_vm([resource], vm_name) is is_this_vm(resource, vm_name)


def test_its_default_socket_is_the_clients() -> None:
    assert Path(loginline.DEFAULT_SOCKET) == DEFAULT_SOCKET


@pytest.mark.slow
def test_the_hook_quotes_what_it_names(tmp_path: Path) -> None:
    text = render_hook("/opt/it's here/bin/python3", tmp_path / "a b")
    done = subprocess.run(["sh", "-n", "-c", text], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "'/opt/it'\"'\"'s here/bin/python3' -I -S -c" in text


@pytest.mark.slow
def test_a_module_beside_setui_never_stands_in_for_the_standard_librarys(
        tmp_path: Path) -> None:
    """site-packages may hold a backport named as a library module (enum.py, typing.py):
    the hook looks in setui's directory after the standard library."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "setui").symlink_to(Path(loginline.__file__).parent)
    for name in ("json", "socket", "enum", "re"):
        (site / f"{name}.py").write_text(f"print('the stand-in {name}')\n")
    hook = tmp_path / "setui-login.sh"
    hook.write_text(render_hook(sys.executable, site))
    with socket.socket(socket.AF_UNIX) as server:  # something to connect to, never answering
        server.bind(str(tmp_path / "api.sock"))
        server.listen(1)
        done = subprocess.run(["sh", "-i", "-c", f". {hook}; echo done"], capture_output=True,
                              text=True, timeout=60, stdin=subprocess.DEVNULL, cwd="/",
                              env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent",
                                   "SETUI_SOCKET": str(tmp_path / "api.sock")})
    assert done.stdout == "done\n", done.stdout


def test_frames_split_or_joined_are_read_whole_and_a_refusal_ends_it() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        frames = loginline._Frames(ours, time.monotonic() + 30)
        theirs.sendall(b'{"hello": {"api": 1}}\n{"push": "tick"}\n{"id": 1, "ok": {"x"')
        assert frames.next() == {"hello": {"api": 1}}
        theirs.sendall(b': 2}}\n{"error": {"code": "busy", "message": "full"}}\n')
        assert frames.answer(1) == {"x": 2}  # the push before it passed over
        with pytest.raises(loginline._Silent):
            frames.answer(2)
        theirs.sendall(b'[1]\n')
        with pytest.raises(loginline._Silent):
            frames.next()
        spent = loginline._Frames(ours, time.monotonic() - 1)
        with pytest.raises(loginline._Silent):
            spent.next()
