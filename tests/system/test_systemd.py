"""sd_notify against real AF_UNIX datagram sockets, the watchdog variables, and the
journal detection against real files' device and inode numbers."""

from __future__ import annotations

import asyncio
import io
import os
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from setui.system.systemd import (
    DEBUG,
    ERR,
    INFO,
    WARNING,
    Notifier,
    for_journal,
    journal_prefix,
    under_journal,
)

needs_unix = pytest.mark.skipif(not hasattr(socket, "AF_UNIX") or os.name != "posix",
                                reason="AF_UNIX datagram sockets (POSIX)")


@pytest.fixture
def listener() -> Iterator[tuple[socket.socket, str]]:
    """A bound datagram socket, like PID 1's, and its NOTIFY_SOCKET value.

    In a short directory of its own: a socket path has a limit of about 108 bytes, which
    pytest's per-test directories can exceed."""
    if not hasattr(socket, "AF_UNIX") or os.name != "posix":
        pytest.skip("AF_UNIX datagram sockets (POSIX)")
    with tempfile.TemporaryDirectory(prefix="sd") as directory:
        path = os.path.join(directory, "notify")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        server.bind(path)
        server.settimeout(10)  # a bound on a failure, never waited for when all is well
        try:
            yield server, path
        finally:
            server.close()


def received(server: socket.socket) -> str:
    return server.recv(4096).decode("utf-8")


def nothing_waiting(server: socket.socket) -> bool:
    server.setblocking(False)
    try:
        server.recv(4096)
    except BlockingIOError:
        return True
    finally:
        server.settimeout(10)
    return False


# -- NOTIFY_SOCKET ----------------------------------------------------------------------------
def test_without_notify_socket_every_call_is_a_silent_no_op() -> None:
    notifier = Notifier.from_env({})
    assert not notifier.enabled
    assert not notifier.watchdog_enabled
    assert notifier.ready("x") is False
    assert notifier.status("x") is False
    assert notifier.watchdog() is False
    assert notifier.stopping() is False
    assert notifier.watchdog_due(0.0) is False
    assert notifier.last_error is None


def test_messages_reach_a_socket_bound_at_a_path(listener: tuple[socket.socket, str]) -> None:
    server, path = listener
    notifier = Notifier.from_env({"NOTIFY_SOCKET": path})
    assert notifier.enabled
    assert notifier.ready("polling every 1 s") is True
    assert received(server) == "READY=1\nSTATUS=polling every 1 s"
    assert notifier.status("connection live")
    assert received(server) == "STATUS=connection live"
    assert notifier.stopping()
    assert received(server) == "STOPPING=1"
    assert notifier.ready()
    assert received(server) == "READY=1"
    notifier.close()
    assert notifier.status("after close, a new socket")
    assert received(server) == "STATUS=after close, a new socket"
    assert notifier.last_error is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="abstract sockets are Linux")
def test_messages_reach_an_abstract_socket() -> None:
    name = f"setui-test-{uuid.uuid4().hex}"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind("\0" + name)
    server.settimeout(10)
    try:
        notifier = Notifier.from_env({"NOTIFY_SOCKET": "@" + name})
        assert notifier.ready("up")
        assert received(server) == "READY=1\nSTATUS=up"
        # The same name as a path is a different (missing) socket: the '@' matters.
        assert Notifier.from_env({"NOTIFY_SOCKET": "/" + name}).ready() is False
    finally:
        server.close()


def test_status_is_one_printable_short_line(listener: tuple[socket.socket, str]) -> None:
    server, path = listener
    notifier = Notifier.from_env({"NOTIFY_SOCKET": path})
    # A second line would be read as another assignment: READY=1 from an error text.
    notifier.status("cannot reach service\nREADY=1\x1b[31m")
    message = received(server)
    assert message.count("\n") == 0
    assert message.startswith("STATUS=cannot reach service")
    assert "\x1b" not in message
    notifier.status("x" * 1000)
    assert len(received(server)) <= len("STATUS=") + 200


def test_a_socket_nobody_listens_on_is_kept_as_an_error_not_raised(tmp_path: Path) -> None:
    if os.name != "posix":
        pytest.skip("AF_UNIX datagram sockets (POSIX)")
    missing = str(tmp_path / "gone")
    notifier = Notifier.from_env({"NOTIFY_SOCKET": missing})
    assert notifier.enabled
    assert notifier.ready() is False
    assert notifier.last_error is not None and missing in notifier.last_error


@pytest.mark.parametrize("value", ["vsock:2:1234", "@", "relative/path"])
def test_an_address_it_cannot_use_disables_it_with_a_reason(value: str) -> None:
    notifier = Notifier.from_env({"NOTIFY_SOCKET": value})
    if os.name == "posix":
        assert notifier.last_error is not None
    assert not notifier.enabled
    assert notifier.ready() is False


def test_without_af_unix_it_is_silent(monkeypatch: pytest.MonkeyPatch,
                                      listener: tuple[socket.socket, str]) -> None:
    server, path = listener
    monkeypatch.delattr(socket, "AF_UNIX")
    notifier = Notifier.from_env({"NOTIFY_SOCKET": path})
    assert not notifier.enabled
    assert notifier.ready() is False
    assert notifier.last_error is None
    assert nothing_waiting(server)


def test_on_windows_it_is_silent(monkeypatch: pytest.MonkeyPatch,
                                 listener: tuple[socket.socket, str]) -> None:
    server, path = listener
    monkeypatch.setattr(os, "name", "nt")  # the os module systemd reads
    notifier = Notifier.from_env({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "1000000"})
    assert not notifier.enabled and not notifier.watchdog_enabled
    assert notifier.ready() is False
    assert nothing_waiting(server)


# -- the watchdog -----------------------------------------------------------------------------
@pytest.mark.parametrize(("usec", "pid", "expected"), [
    ("120000000", None, 120_000_000),
    ("120000000", "ours", 120_000_000),
    ("120000000", "1", None),        # a parent's watchdog, not ours
    ("120000000", "x", None),
    ("0", None, None),
    ("-5", None, None),
    ("2e6", None, None),
    ("", None, None),
    (None, None, None),
])
def test_watchdog_usec_and_pid(usec: str | None, pid: str | None, expected: int | None,
                               listener: tuple[socket.socket, str]) -> None:
    _, path = listener
    env = {"NOTIFY_SOCKET": path}
    if usec is not None:
        env["WATCHDOG_USEC"] = usec
    if pid is not None:
        env["WATCHDOG_PID"] = str(os.getpid()) if pid == "ours" else pid
    notifier = Notifier.from_env(env, pid=os.getpid())
    assert notifier.watchdog_usec == expected
    assert notifier.watchdog_enabled is (expected is not None)


def test_the_watchdog_needs_a_socket_too() -> None:
    notifier = Notifier.from_env({"WATCHDOG_USEC": "1000000"})
    assert notifier.watchdog_usec == 1_000_000
    assert not notifier.watchdog_enabled
    assert notifier.watchdog_period is None
    assert notifier.watchdog() is False


def test_watchdog_due_every_quarter_of_the_timeout(listener: tuple[socket.socket, str]) -> None:
    server, path = listener
    notifier = Notifier.from_env({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "120000000"})
    assert notifier.watchdog_period == 30.0
    assert notifier.watchdog_due(1000.0)  # never pinged yet
    assert notifier.watchdog(1000.0)
    assert received(server) == "WATCHDOG=1"
    assert not notifier.watchdog_due(1029.9)
    assert notifier.watchdog_due(1030.0)


async def test_keep_alive_pings_on_its_period_until_cancelled(
        listener: tuple[socket.socket, str]) -> None:
    server, path = listener
    notifier = Notifier.from_env({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "8000000"})
    clock = [50.0]
    waits: list[float] = []

    class Done(Exception):
        pass

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 3:
            raise Done
        clock[0] += seconds

    with pytest.raises(Done):
        await notifier.keep_alive(sleep=sleep, mono=lambda: clock[0])
    assert waits == [2.0, 2.0, 2.0]
    assert [received(server) for _ in range(3)] == ["WATCHDOG=1"] * 3
    assert nothing_waiting(server)


async def test_keep_alive_counts_from_a_ping_sent_elsewhere(
        listener: tuple[socket.socket, str]) -> None:
    _, path = listener
    notifier = Notifier.from_env({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "8000000"})
    notifier.watchdog(99.5)
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await notifier.keep_alive(sleep=sleep, mono=lambda: 100.0)
    assert waits == [1.5]


async def test_keep_alive_without_a_watchdog_returns_at_once(
        listener: tuple[socket.socket, str]) -> None:
    server, path = listener
    notifier = Notifier.from_env({"NOTIFY_SOCKET": path})

    async def sleep(seconds: float) -> None:
        raise AssertionError("slept without a watchdog")

    await notifier.keep_alive(sleep=sleep)
    assert nothing_waiting(server)


@pytest.mark.slow
@needs_unix
def test_a_child_process_notifies_from_its_real_environment(
        listener: tuple[socket.socket, str]) -> None:
    server, path = listener
    code = ("from setui.system.systemd import Notifier; n = Notifier.from_env(); "
            "print(n.ready('child'), n.watchdog_enabled, n.watchdog())")
    env = {**os.environ, "NOTIFY_SOCKET": path, "WATCHDOG_USEC": "4000000"}
    env.pop("WATCHDOG_PID", None)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.stdout.split() == ["True", "True", "True"], done.stderr
    assert received(server) == "READY=1\nSTATUS=child"
    assert received(server) == "WATCHDOG=1"
    # A WATCHDOG_PID naming another process (the parent here) is not the child's watchdog.
    env["WATCHDOG_PID"] = str(os.getpid())
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.stdout.split() == ["True", "False", "False"], done.stderr
    assert received(server) == "READY=1\nSTATUS=child"
    assert nothing_waiting(server)


# -- the journal ------------------------------------------------------------------------------
def _stream_id(path: Path) -> str:
    stat = path.stat()
    return f"{stat.st_dev}:{stat.st_ino}"


def test_under_journal_matches_the_streams_device_and_inode(tmp_path: Path) -> None:
    ours, other = tmp_path / "journal-stream", tmp_path / "a-log-file"
    ours.touch()
    other.touch()
    env = {"JOURNAL_STREAM": _stream_id(ours)}
    with ours.open("w") as stream, other.open("w") as elsewhere:
        assert under_journal(stream, env)
        assert not under_journal(elsewhere, env)  # inherited, but redirected elsewhere
        assert not under_journal(stream, {})
        for garbage in ("", "12", ":", "a:b", f"{_stream_id(ours)}:1", "-1:-1"):
            assert not under_journal(stream, {"JOURNAL_STREAM": garbage}), garbage
    assert not under_journal(stream, env)  # closed
    assert not under_journal(io.StringIO(), env)


@pytest.mark.slow
@needs_unix
def test_a_child_knows_which_of_its_streams_is_the_journal(tmp_path: Path) -> None:
    log = tmp_path / "stderr"
    code = ("import sys; from setui.system.systemd import under_journal; "
            "print(under_journal(sys.stderr), under_journal(sys.stdout))")
    with log.open("w") as stderr:
        env = {**os.environ, "JOURNAL_STREAM": _stream_id(log)}
        done = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                              stderr=stderr, text=True, timeout=60)
    assert done.stdout.split() == ["True", "False"], log.read_text()


def test_priority_prefixes() -> None:
    assert [journal_prefix(p) for p in (ERR, WARNING, INFO, DEBUG)] == [
        "<3>", "<4>", "<6>", "<7>"]
    for wrong in (-1, 8):
        with pytest.raises(ValueError):
            journal_prefix(wrong)
    assert for_journal("first\nsecond", WARNING) == "<4>first\n<4>second"
    assert for_journal("one", INFO) == "<6>one"


@pytest.mark.slow
def test_the_module_loads_neither_the_dashboard_nor_httpx() -> None:
    code = ("import sys, setui.system.systemd; "
            "print(sorted(m for m in ('textual', 'rich', 'httpx', 'setui.ui') "
            "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "[]"
