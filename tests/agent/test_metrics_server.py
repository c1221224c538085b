"""The metrics endpoint under clients that hold connections open: a real agent with a
limit of 128 open files, 200 idle connections kept open (each reopened when the agent
drops it), and the agent still polls, runs its hook, approves, and says little; and the
endpoint's cap and deadlines on their own."""

from __future__ import annotations

import asyncio
import selectors
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from setui.emulator.scenario import parse_scenario
from setui.emulator.server import Emulator
from tests.support.agent_helpers import (
    USER_REBOOT,
    agent_env,
    metrics_url,
    posts,
    stop,
    write_policy,
)
from tests.support.children import SETUI, Lines, wait_until
from tests.support.waiting import until

IDLE = 200
FILES = 128

# The agents' tests' User Reboot, appearing 8 s in: after the idle connections are open.
LATE_REBOOT = USER_REBOOT.replace("\nat = 0\n", "\nat = 8\n")

POLICY = """
[[rule]]
name = "drain"
this_vm = true
prepare = "{hook}"
approve = "after-prepare"
"""


class IdleClients:
    """``count`` connections that send nothing; one the agent closes is opened again (at
    most every half second each), as a careless or hostile client would."""

    def __init__(self, port: int, count: int) -> None:
        self.port = port
        self.count = count
        self.opened = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _connect(self) -> socket.socket | None:
        sock = socket.socket()
        sock.setblocking(False)
        try:
            sock.connect_ex(("127.0.0.1", self.port))
        except OSError:
            sock.close()
            return None
        self.opened += 1
        return sock

    def _run(self) -> None:
        selector = selectors.DefaultSelector()
        due: list[float] = []
        for _ in range(self.count):
            sock = self._connect()
            if sock is not None:
                selector.register(sock, selectors.EVENT_READ)
            else:
                due.append(time.monotonic() + 0.5)
        while not self._stop.is_set():
            for key, _ in selector.select(0.1):
                sock = key.fileobj  # type: ignore[assignment]  # checked on the next line
                assert isinstance(sock, socket.socket)
                try:
                    data = sock.recv(4096)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:  # closed by the agent: open another later
                    selector.unregister(sock)
                    sock.close()
                    due.append(time.monotonic() + 0.5)
            now = time.monotonic()
            for when in [d for d in due if d <= now]:
                due.remove(when)
                sock = self._connect()
                if sock is not None:
                    selector.register(sock, selectors.EVENT_READ)
                else:
                    due.append(now + 0.5)
        for key in list(selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        selector.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


@pytest.fixture
def late_emulator() -> Iterator[Emulator]:
    assert "\nat = 8\n" in LATE_REBOOT
    emu = Emulator(parse_scenario(LATE_REBOOT), speed=1.0)
    emu.start()
    yield emu
    emu.stop()


@pytest.mark.slow  # a real agent, real time
def test_idle_connections_do_not_starve_the_agent(tmp_path: Path, late_emulator: Emulator,
                                                  hook: Path) -> None:
    policy = write_policy(tmp_path, POLICY.format(hook=hook))
    proc = subprocess.Popen(
        ["prlimit", f"--nofile={FILES}:{FILES}", "--", *SETUI, "agent", "--endpoint",
         late_emulator.url, "--interval", "0.2", "--json", "--policy", str(policy),
         "--metrics", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8",
        env=agent_env(tmp_path))
    lines = Lines(proc)
    clients: IdleClients | None = None
    errors: list[str] = []
    try:
        url = metrics_url(proc)
        assert proc.stderr is not None
        stderr = proc.stderr
        threading.Thread(target=lambda: errors.extend(stderr), daemon=True).start()
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        clients = IdleClients(port, IDLE)
        wait_until(lambda: clients.opened >= IDLE, 30, "the idle connections to open")
        gets = len(late_emulator.requests)
        # Polls go on: 20 more at 0.2 s apart, with every connection still held.
        wait_until(lambda: len(late_emulator.requests) >= gets + 20, 60,
                   "polls to go on while the idle connections are held")
        # The event appears, the hook runs and the approval is posted, all while held.
        wait_until(lambda: posts(late_emulator), 90,
                   "the approval to be posted while the idle connections are held")
        assert (tmp_path / "runs").read_text().startswith("prepare ")
        assert proc.poll() is None
        failed = [line for line in lines.seen if '"unreachable"' in line
                  or "Too many open files" in line]
        assert not failed, failed[:5]
    finally:
        if clients is not None:
            clients.close()
    # Once the idle clients are gone, a scrape is answered again.
    wait_until(lambda: _scrape(url), 30, "a scrape to be answered once they are gone")
    assert stop(proc) == 0
    text = "".join(errors)
    assert len(text) < 4000, text[:2000]
    assert "Traceback" not in text and "Too many open files" not in text, text[:2000]


def _scrape(url: str) -> bool:
    try:
        return "setui_polls_total" in httpx.get(url, timeout=5).text
    except httpx.HTTPError:
        return False


async def _dropped(reader: asyncio.StreamReader) -> bool:
    """Whether the server closed or reset the connection, having said nothing."""
    try:
        return await asyncio.wait_for(reader.read(), 30) == b""
    except ConnectionResetError:
        return True


async def test_a_client_gets_its_share_and_the_greediest_makes_room() -> None:
    """One client (an address here) holds at most its share: a new connection of its
    without a whole request yet is reset. When the server is full, a new client's
    connection takes the place of the oldest of the client holding the most. A request
    whole at its accept is answered then, whoever sends it, even from the greedy client's
    own address. A client that never reads a large answer is aborted after the send
    deadline."""
    from setui.agent.scrape import MetricsServer

    big = b"x" * (32 << 20)  # more than the socket buffers hold

    def exposition(accept: str) -> tuple[bytes, str]:
        return (big if accept == "big" else b"setui_up 1\n"), "text/plain"

    server = MetricsServer(exposition, max_connections=3, max_per_client=2,
                           head_timeout=60, send_timeout=0.5)
    host, port = await server.start("127.0.0.1", 0)
    held: list[asyncio.StreamWriter] = []

    async def connect(source: str) -> asyncio.StreamReader | None:
        """A connection that sends part of a request; None if it was reset at once."""
        try:
            reader, writer = await asyncio.open_connection(host, port,
                                                           local_addr=(source, 0))
            held.append(writer)
            writer.write(b"GET /metrics HTTP/1.1\r\n")  # and never the rest
            await writer.drain()
        except ConnectionError:
            return None
        return reader

    async def whole(source: str) -> None:
        """A request sent whole before the server has even accepted its connection."""
        with socket.socket() as sock:
            sock.bind((source, 0))
            sock.connect((host, port))  # the kernel's handshake; not accepted yet
            sock.sendall(b"GET /metrics HTTP/1.1\r\n\r\n")
            sock.setblocking(False)
            answer = b""
            while chunk := await asyncio.wait_for(
                    asyncio.get_running_loop().sock_recv(sock, 65536), 30):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 200 OK") and answer.endswith(b"setui_up 1\n")

    try:
        first = await connect("127.0.0.2")
        second = await connect("127.0.0.2")
        await until(lambda: server.open == 2, what="the greedy client's two connections")
        third = await connect("127.0.0.2")
        assert third is None or await _dropped(third)
        assert server.refused == 1 and server.open == 2
        # A whole request from the greedy client's own address: answered at once.
        await whole("127.0.0.2")
        assert server.at_once == 1 and server.open == 2
        other = await connect("127.0.0.3")
        await until(lambda: server.open == 3, what="another client's connection")
        # Full: a new client makes room, at the greediest client's oldest.
        newer = await connect("127.0.0.4")
        assert first is not None and await _dropped(first) and server.evicted == 1
        await until(lambda: server.open == 3, what="the new client's connection")
        # Full still: a whole request is answered at once, and drops no one.
        await whole("127.0.0.1")
        assert server.at_once == 2 and server.evicted == 1 and server.open == 3
        assert second is not None and other is not None and newer is not None
        assert not (second.at_eof() or other.at_eof() or newer.at_eof())
        for writer in held:
            writer.close()
        await until(lambda: server.open == 0, what="the slow clients' connections to go")
        # Clients that ask for a large answer and never read it: one whose request came
        # whole (the rest of its answer is left to a slot), one whose request came later.
        with socket.socket() as early:
            early.connect((host, port))
            early.sendall(b"GET /metrics HTTP/1.1\r\nAccept: big\r\n\r\n")
            await until(lambda: server.open == 1, what="the early hog's connection")
            assert server.at_once == 3
            await until(lambda: server.open == 0, what="the early hog to be dropped")
        _, hog = await asyncio.open_connection(host, port)
        hog.write(b"GET /metrics HTTP/1.1\r\nAccept: big\r\n\r\n")
        await hog.drain()
        await until(lambda: server.open == 1, what="the hog's connection")
        await until(lambda: server.open == 0, what="the unread answer's connection to drop")
        hog.close()
    finally:
        await server.aclose()


async def test_a_client_on_this_host_is_its_address_and_its_user() -> None:
    """Across addresses, clients differ by address (an IPv6 one by its /64, an IPv4 one
    mapped in IPv6 as IPv4); on this host the kernel names the user owning the other end
    (this test's: root), where netlink is allowed."""
    import os

    from setui.agent.peers import client_of

    cases = [(socket.AF_INET, "127.0.0.1", socket.AF_INET, "127.0.0.1", "127.0.0.1"),
             (socket.AF_INET, "127.0.0.1", socket.AF_INET, "127.0.0.2", "127.0.0.2"),
             (socket.AF_INET6, "::", socket.AF_INET, "127.0.0.3", "127.0.0.3"),
             (socket.AF_INET6, "::1", socket.AF_INET6, "::1", "::")]
    for family, host, client_family, source, client in cases:
        with socket.socket(family) as listener, socket.socket(client_family) as sock:
            try:
                listener.bind((host, 0))
            except OSError:
                continue  # no IPv6 here
            listener.listen()
            sock.bind((source, 0))
            sock.connect((source if host == "::" else host, listener.getsockname()[1]))
            accepted, _ = listener.accept()
            with accepted:
                assert client_of(accepted) == (client, os.geteuid()), (host, source)
