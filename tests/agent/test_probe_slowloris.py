"""The probe and metrics servers under a slowloris from another user: a real agent with
``--health`` and ``--metrics`` on loopback, 200 half-sent requests held open by a process
of another uid (setpriv) and opened again as soon as they are dropped; a well-behaved
client's ``/readyz``, ``/healthz`` and ``/metrics`` are answered all the same, several
times in a row."""

from __future__ import annotations

import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from setui.emulator.server import Emulator
from tests.support.accounts import Account, made_accounts, needs_accounts
from tests.support.agent_helpers import start_agent, stop
from tests.support.children import wait_until
from tests.support.install_helpers import installation

pytestmark = [pytest.mark.slow, needs_accounts]

SLOWLORIS = Path(__file__).with_name("slowloris.py")
ATTACKERS = 200
PROBES = 5  # in a row, each answered
ANSWER_WITHIN = 10.0  # seconds: generous; a well-behaved probe is answered in a few ms
ATTACK_FOR = 120.0  # seconds at most that an attacker runs (it is stopped before)
USER = "sloris"

URLS = re.compile(r"setui agent: (metrics|health probe) at (http://127\.0\.0\.1:\d+)/")


@pytest.fixture(scope="module")
def attacker() -> Iterator[Account]:
    with made_accounts({USER: []}) as made:
        yield made[USER]


class Slowloris:
    """slowloris.py as ``account``, against ``port`` from ``source``."""

    def __init__(self, account: Account, port: int, path: str, source: str) -> None:
        self.proc = subprocess.Popen(
            ["setpriv", f"--reuid={account.uid}", f"--regid={account.gid}",
             "--clear-groups", installation().python, "-I", "-c", SLOWLORIS.read_text(),
             "127.0.0.1", str(port), path, str(ATTACKERS), str(ATTACK_FOR), source],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/",
            env={"PATH": "/usr/bin:/bin"})
        self.said: list[str] = []
        assert self.proc.stdout is not None
        out = self.proc.stdout
        threading.Thread(target=lambda: self.said.extend(out), daemon=True).start()

    def holding(self) -> bool:
        assert self.proc.poll() is None, self.proc.stderr.read() if self.proc.stderr else ""
        return any(line.startswith("holding ") for line in self.said)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=20)


def _addresses(proc: subprocess.Popen[str]) -> dict[str, str]:
    """The agent's metrics and probe URLs, from its stderr; the rest of it is drained."""
    assert proc.stderr is not None
    found: dict[str, str] = {}
    deadline = time.monotonic() + 60
    while len(found) < 2 and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if match := URLS.search(line):
            found[match.group(1)] = match.group(2)
        elif not line and proc.poll() is not None:
            break
    assert len(found) == 2, f"the agent said where it listens for only {found}"
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    return found


def _answered(url: str, want: str) -> None:
    """A well-behaved client's GET, answered (200 or 503) within ANSWER_WITHIN."""
    with httpx.Client(trust_env=False, timeout=ANSWER_WITHIN) as client:
        try:
            answer = client.get(url)
        except httpx.HTTPError as exc:
            pytest.fail(f"{url} was not answered within {ANSWER_WITHIN} s: {exc!r}")
    assert answer.status_code in (200, 503) and want in answer.text, answer.text[:300]


@pytest.mark.parametrize("source", ["127.0.0.1", "127.0.0.2"])
def test_a_probe_is_answered_while_another_user_holds_200_slow_requests(
        tmp_path: Path, emulator: Emulator, attacker: Account, source: str) -> None:
    """From the same address as the probe (another uid: told apart by the kernel's word)
    or from another address (another VM of the network)."""
    proc, _ = start_agent(emulator.url, tmp_path, "--health", "127.0.0.1:0",
                          "--metrics", "127.0.0.1:0")
    try:
        urls = _addresses(proc)
        wait_until(lambda: "setui_polls_total" in httpx.get(
            f"{urls['metrics']}/metrics", timeout=10).text, 30, "a first scrape")
        for name, path, checks in (
                ("health probe", "/readyz", [("/readyz", "ready"), ("/healthz", "IMDS")]),
                ("metrics", "/metrics", [("/metrics", "setui_polls_total")])):
            port = int(urls[name].rsplit(":", 1)[1])
            slow = Slowloris(attacker, port, path, source)
            try:
                wait_until(slow.holding, 60, f"{ATTACKERS} slow requests to {name}")
                for _ in range(PROBES):
                    for where, want in checks:
                        _answered(urls[name] + where, want)
                assert slow.proc.poll() is None  # it was attacking all along
            finally:
                slow.close()
        assert proc.poll() is None
    finally:
        assert stop(proc) == 0


def test_where_the_kernel_does_not_name_the_user_a_probe_is_answered_all_the_same(
        attacker: Account) -> None:
    """The server as the shipped unit runs it, where netlink is not allowed: a client on
    this host is its address alone, so the slowloris and the probe count as one client.
    A probe's request, whole when its connection is accepted, is answered all the same."""
    import asyncio

    from setui.agent.scrape import BoundedServer, http_response

    def by_address(conn: socket.socket) -> tuple[str, int | None]:
        return (str(conn.getpeername()[0]), None)

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = BoundedServer(lambda head: http_response(200, b"ready\n"), client_of=by_address)
    try:
        _, port = asyncio.run_coroutine_threadsafe(
            server.start("127.0.0.1", 0), loop).result(30)
        slow = Slowloris(attacker, port, "/readyz", "127.0.0.1")
        try:
            wait_until(slow.holding, 60, f"{ATTACKERS} slow requests")
            for _ in range(PROBES):
                _answered(f"http://127.0.0.1:{port}/readyz", "ready")
            assert slow.proc.poll() is None
            assert server.refused > 0  # the slowloris was at its share, and refused
        finally:
            slow.close()
    finally:
        asyncio.run_coroutine_threadsafe(server.aclose(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        loop.close()


def test_the_kernel_names_the_user_of_a_client_on_this_host(attacker: Account) -> None:
    """A connection from another user's process on 127.0.0.1: its client is the address
    and that user's uid, as netlink's sock_diag says (not the agent's own, root)."""
    from setui.agent.peers import client_of

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.settimeout(60)
        port = listener.getsockname()[1]
        child = subprocess.Popen(
            ["setpriv", f"--reuid={attacker.uid}", f"--regid={attacker.gid}",
             "--clear-groups", installation().python, "-I", "-c",
             "import socket, sys\n"
             f"s = socket.create_connection(('127.0.0.1', {port}))\n"
             "sys.stdin.read()\n"],
            stdin=subprocess.PIPE, cwd="/", env={"PATH": "/usr/bin:/bin"})
        try:
            accepted, _ = listener.accept()
            with accepted:
                assert client_of(accepted) == ("127.0.0.1", attacker.uid)
        finally:
            assert child.stdin is not None
            child.stdin.close()
            child.wait(timeout=30)
