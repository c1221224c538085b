"""Helpers for the API's tests: the agent as a real child process on a loopback emulator,
its socket and store in a directory other users can reach, real users and groups, and
clients run as those users (setpriv) in processes of their own.

The layout is the service's in miniature: ``base/data`` (the store, root:sapi-ops 0750),
``base/run/api.sock`` (the socket, made by the agent 0660 with the data directory's
group). ``sapi-ops`` stands in for the group that may reach the socket; ``setui`` is the
real default group of approvers, made for the tests when the machine lacks it.
"""

from __future__ import annotations

import contextlib
import grp
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal, overload

import pytest
from hypothesis import strategies as st

from setui.api.client import AgentClient, ApiError
from setui.api.codec import AgentInfo
from setui.api.peer import Authority
from setui.api.queries import QueryThread
from setui.api.server import ApiServer
from setui.api.socketfile import bind_socket
from setui.api.source import AgentSource
from setui.core.client import ImdsClient
from setui.emulator.scenario import parse_scenario
from setui.emulator.server import Emulator
from setui.monitor.state import MonitorState
from setui.store import Store
from tests.support.accounts import Account as Account
from tests.support.accounts import made_accounts, needs_accounts
from tests.support.children import SETUI, Lines, wait_until
from tests.support.emulated import posts as posts
from tests.support.install_helpers import installation

EVENT_ID = "F020BA2E-3BC0-4C40-A10B-86575A9EABD5"
VM = "app-vm-1"
SCENARIO = f"""
name = "api-user-reboot"
vm_name = "{VM}"
tail = 5
approval_delay = 0.5

[[events]]
id = "{EVENT_ID}"
type = "Reboot"
source = "User"
at = 0
notice = "15m"
duration = -1
"""

# Any JSON value at all: what a hostile peer may send in place of any part of a frame.
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=25)

OPS_GROUP = "sapi-ops"
APPROVERS_GROUP = "setui"
USERS = {"alice": (OPS_GROUP, APPROVERS_GROUP), "bob": (OPS_GROUP, APPROVERS_GROUP),
         "carol": (OPS_GROUP,), "mallory": (OPS_GROUP,), "eve": (OPS_GROUP,)}

needs_root = needs_accounts


@pytest.fixture(scope="session")
def accounts() -> Iterator[dict[str, Account]]:
    """sapi-alice and sapi-bob (in setui), sapi-carol, sapi-mallory and sapi-eve (not),
    all in sapi-ops; made by the first test process that needs them, removed by the last."""
    with made_accounts({f"sapi-{short}": groups for short, groups in USERS.items()},
                       (OPS_GROUP, APPROVERS_GROUP)) as made:
        yield {name.removeprefix("sapi-"): account for name, account in made.items()}


@pytest.fixture
def base(accounts: dict[str, Account]) -> Iterator[Path]:
    """A directory the test users can reach: data and run dirs root:sapi-ops 0750, and
    a sync dir any of them may write (for barriers between clients)."""
    ops = grp.getgrnam(OPS_GROUP).gr_gid
    path = Path(tempfile.mkdtemp(prefix="setui-api-", dir="/tmp"))
    path.chmod(0o755)
    for name in ("data", "run"):
        (path / name).mkdir(mode=0o750)
        os.chown(path / name, 0, ops)
        (path / name).chmod(0o750)
    (path / "sync").mkdir()
    (path / "sync").chmod(0o1777)
    (path / "client.py").write_text(CLIENT)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    emu = Emulator(parse_scenario(SCENARIO), speed=1.0)
    emu.start()
    yield emu
    emu.stop()


@contextlib.asynccontextmanager
async def agent_in_process(directory: Path, store: Store, *, endpoint: str, started: datetime,
                           state: MonitorState | None = None, pid: int = 1,
                           vm_name: str = "web-0", vm_id: str | None = None,
                           imds: ImdsClient | None = None) -> AsyncIterator[Path]:
    """The agent's API server in this loop over a real socket (its path, in
    ``directory``), the agent stood in for by the parts the server reads: a monitor
    holding ``state``, ``imds`` to approve through (None: no approval), ``store`` for the
    queries and the writes. A client that blocks must run on a thread."""
    monitor = SimpleNamespace(state=state or MonitorState(), now=lambda: started,
                              interval=1.0, recorder=None, endpoint=endpoint, vm_name=vm_name,
                              note_approved=lambda event_id: None, poll_now=lambda: None)
    monitor.health = lambda: monitor.state.health  # no quiet polls to take in
    agent = SimpleNamespace(steps={}, held=set(), log=None, vm_name=vm_name, vm_id=vm_id)
    info = AgentInfo(pid, started, vm_name, vm_id, endpoint, None, None, False)
    source = AgentSource(monitor=monitor, agent=agent, client=imds,  # type: ignore[arg-type]
                         store=store, info=info, host="vm-web-0")
    server = ApiServer(source, authority=Authority([]), queries=QueryThread(store.path),
                       say=print)
    bound = bind_socket(directory / "api.sock", group=None)
    await server.serve(bound.sock)
    try:
        yield directory / "api.sock"
    finally:
        await server.aclose()
        bound.remove()
        bound.sock.close()


@contextlib.contextmanager
def stand_in_agent(path: Path, hello: dict[str, object], answer: bytes = b"",
                   ) -> Iterator[None]:
    """Something serving ``path`` as no real agent would: its ``hello``, then ``answer``
    to the first request (or to the client closing without one), once."""
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(1)

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            conn.sendall(json.dumps({"hello": hello}).encode() + b"\n")
            conn.makefile("rb").readline()  # the request, or nothing when the client goes
            with contextlib.suppress(OSError):  # a client gone already
                conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join(timeout=30)
        server.close()


def plain_env(tmp_path: Path, *, data: str = "data", sock: str | None = None,
              **extra: str) -> dict[str, str]:
    """An agent's environment in a test's own directory (only root reaches it): its
    store in ``data``, its socket ``sock`` (None: none configured)."""
    env = dict(os.environ, SETUI_DATA_DIR=str(tmp_path / data), PYTHONUNBUFFERED="1",
               PYTHONIOENCODING="utf-8", HOOK_DIR=str(tmp_path))
    env.pop("SETUI_SOCKET", None)
    if sock is not None:
        env["SETUI_SOCKET"] = str(tmp_path / sock)
    env.update(extra)
    return env


def agent_env(base: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"SETUI_DATA_DIR": str(base / "data"), "SETUI_SOCKET": str(base / "run" /
                                                                        "api.sock"),
                "SETUI_CONFIG": str(base / "config.toml"), "PYTHONUNBUFFERED": "1",
                "PYTHONIOENCODING": "utf-8", "HOOK_DIR": str(base / "sync")})
    env.update(extra)
    return env


def start_agent(url: str, base: Path, *extra: str, env: dict[str, str] | None = None,
                interval: str = "0.2") -> tuple[subprocess.Popen[str], Lines]:
    """The agent as a child process; returns once its socket answers."""
    proc = subprocess.Popen(
        [*SETUI, "agent", "--endpoint", url, "--interval", interval, "--json", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8",
        env=env or agent_env(base))
    lines = Lines(proc)  # read from the start: a full pipe would stop the agent
    socket = Path((env or agent_env(base))["SETUI_SOCKET"])

    def answers() -> bool:
        if proc.poll() is not None:
            pytest.fail(f"the agent ended ({proc.returncode}): {proc.stderr.read()}")
        try:
            AgentClient.connect(socket, timeout=2).close()
        except ApiError:
            return False
        return True

    wait_until(answers, 30, "the agent's socket to answer")
    return proc, lines


def stop(proc: subprocess.Popen[str]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=30)


def run_script_as(account: Account | None, argv: list[str]) -> subprocess.Popen[str]:
    """``python argv...`` as ``account`` (None: root) with its groups from /etc/group, in
    a bare environment, with the ``installation``'s Python (which every user may read)."""
    ids = [] if account is None else ["setpriv", f"--reuid={account.uid}",
                                      f"--regid={account.gid}", "--init-groups"]
    env = {"PATH": os.environ.get("PATH", ""), "HOME": "/nonexistent",
           "SETUI_CONFIG": "/nonexistent/config.toml"}
    return subprocess.Popen([*ids, installation().python, *argv], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/")


@overload
def run_as(account: Account | None, base: Path, op: str, args: dict[str, object] | None = None,
           *, background: Literal[False] = False) -> dict[str, Any]: ...
@overload
def run_as(account: Account | None, base: Path, op: str, args: dict[str, object] | None = None,
           *, background: Literal[True]) -> subprocess.Popen[str]: ...
def run_as(account: Account | None, base: Path, op: str, args: dict[str, object] | None = None,
           *, background: bool = False) -> subprocess.Popen[str] | dict[str, Any]:
    """tests/api's client script as ``account``: its JSON answer, or the process when
    ``background``."""
    proc = run_script_as(account, [str(base / "client.py"), str(base / "run" / "api.sock"),
                                   op, json.dumps(args or {}), str(base / "sync")])
    if background:
        return proc
    return answer(proc)


def answer(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, f"client failed ({proc.returncode}): {out}{err}"
    return json.loads(out.strip().splitlines()[-1])


# The client each user runs: one op, its answer as one JSON line. ``approve`` waits at a
# barrier first (its name in the sync dir) when asked, so two users send at once.
CLIENT = r'''
import json, sys, time
from pathlib import Path
from setui.api.client import AgentClient, ApiError
from setui.api.codec import AgentInfo
from setui.api.peer import Authority
from setui.api.queries import QueryThread
from setui.api.server import ApiServer
from setui.api.socketfile import bind_socket
from setui.api.source import AgentSource
from setui.core.client import ImdsClient
from setui.monitor.state import MonitorState
from setui.store import Store
from setui.approval.snapshot import Confirmed, confirmed

path, op, args, sync = Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3]), Path(sys.argv[4])
out = {}
try:
    with AgentClient.connect(path, timeout=10) as client:
        you = client.hello.you
        out["you"] = {"uid": you.uid, "user": you.user, "may_approve": you.may_approve,
                      "why_not": you.why_not}
        if op == "approve":
            state, _ = client.state()
            shown = {i: confirmed(state.state.document, i) or Confirmed(i, {"EventId": i}, 0)
                     for i in args["ids"]}
            if args.get("barrier"):
                (sync / f"ready-{you.user}").touch()
                deadline = time.monotonic() + 60
                while not (sync / args["barrier"]).exists() and time.monotonic() < deadline:
                    time.sleep(0.01)
            outcomes = client.approve(args["ids"], shown, allow_other_vms=True)
            out["outcomes"] = [{"approved": o.approved, "refused": o.refused,
                                "message": o.message} for o in outcomes]
        elif op == "history":
            out["incarnations"] = [r.incarnation for r in client.history()]
        elif op in ("hold", "release"):
            held = getattr(client, op)(args["id"])
            out["held"] = held.held
            out["rule"], out["acts"] = held.rule, held.acts
        elif op == "dismiss":
            out["recorded"] = client.dismiss(args["ids"])
except ApiError as exc:
    out["error"] = {"code": exc.code, "message": exc.message}
print(json.dumps(out))
'''
