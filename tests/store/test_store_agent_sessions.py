"""When an agent's session ended: at once, when its process no longer holds the store's
lock (store.sessions, store.flocks), told by the kernel's list of locks without taking
the lock. Real processes hold a real ``flock`` here; nothing of the kernel is faked."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest

from setui.store import Store
from setui.store.flocks import flock_holders
from setui.store.place import AGENT_LOCK
from setui.store.sessions import AGENT_COMMAND, RUNNING_WITHIN
from tests.support.store_helpers import ENDPOINT, T0

linux = pytest.mark.skipif(not sys.platform.startswith("linux"),
                           reason="the kernel's list of locks is Linux's")

# A process that takes an exclusive flock on argv[1], says so, and holds it until its
# stdin closes: the agent's lock as the agent holds it (setui.agent.lock).
HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("held", flush=True)
sys.stdin.read()
"""


@contextmanager
def holding(path: Path) -> Iterator[subprocess.Popen[str]]:
    """A real process holding ``path``'s lock until the block ends (then it exits)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "held\n"
        yield proc
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)


def seconds(n: float) -> timedelta:
    return timedelta(seconds=n)


def _agent(store: Store, pid: int, *, host: str | None = None,
           command: str = AGENT_COMMAND) -> int:
    """A session opened at T0 that beat last at T0 + 10 s and did not stop."""
    session = store.sessions.start(endpoint=ENDPOINT, pid=pid,
                                   host=host or socket.gethostname(), command=command, at=T0)
    store.sessions.beat(session, T0 + seconds(10))
    return session


def _holes(store: Store) -> list[tuple[timedelta, timedelta, bool]]:
    """The holes as seen 30 s after T0: well within the time a session counts as running
    by its beats alone."""
    assert seconds(30) < RUNNING_WITHIN
    return [(h.start - T0, h.end - T0, h.open)
            for h in store.sessions.holes(endpoint=ENDPOINT, now=T0 + seconds(30))]


# -- the kernel's list of locks -------------------------------------------------------------
def test_the_list_of_locks_is_read_for_granted_flocks_on_the_file_alone(
        tmp_path: Path) -> None:
    lock = tmp_path / AGENT_LOCK
    lock.write_text("")
    inode = lock.stat().st_ino
    listing = tmp_path / "locks"
    listing.write_text(
        f"1: FLOCK  ADVISORY  WRITE 4242 fe:00:{inode} 0 EOF\n"
        f"1: -> FLOCK  ADVISORY  WRITE 4343 fe:00:{inode} 0 EOF\n"  # waits: holds nothing
        f"2: POSIX  ADVISORY  WRITE 4444 fe:00:{inode} 0 EOF\n"  # not a flock
        f"3: FLOCK  ADVISORY  WRITE 4545 fe:00:{inode + 1} 0 EOF\n"  # another file
        "4: FLOCK  ADVISORY  WRITE garbage\n\n")
    assert flock_holders(lock, locks=listing) == frozenset({4242})
    # No file: nobody can hold it. No list (not Linux): not known.
    assert flock_holders(tmp_path / "none", locks=listing) == frozenset()
    assert flock_holders(lock, locks=tmp_path / "no-list") is None


@pytest.mark.slow
@linux
def test_the_kernel_names_the_process_that_holds_the_lock_until_it_ends(
        tmp_path: Path) -> None:
    lock = tmp_path / AGENT_LOCK
    with holding(lock) as proc:
        assert flock_holders(lock) == frozenset({proc.pid})
    assert flock_holders(lock) == frozenset()


# -- an agent's session ---------------------------------------------------------------------
@pytest.mark.slow
@linux
def test_an_agent_session_runs_while_its_process_holds_the_lock(store: Store) -> None:
    with holding(store.path.parent / AGENT_LOCK) as proc:
        _agent(store, proc.pid)
        assert _holes(store) == []
        assert [s.pid for s in store.sessions.running(endpoint=ENDPOINT,
                                                      at=T0 + seconds(30))] == [proc.pid]
    # Its process is gone, the lock free: over at its last beat, at once.
    assert _holes(store) == [(seconds(10), seconds(30), True)]
    assert store.sessions.running(endpoint=ENDPOINT, at=T0 + seconds(30)) == []


@pytest.mark.slow
@linux
def test_a_dead_agent_session_is_over_while_a_new_agent_holds_the_lock(
        store: Store) -> None:
    with holding(store.path.parent / AGENT_LOCK) as proc:
        dead = _agent(store, proc.pid + 100_000)  # no process has this pid
        new = store.sessions.start(endpoint=ENDPOINT, pid=proc.pid,
                                   host=socket.gethostname(), command=AGENT_COMMAND,
                                   at=T0 + seconds(20))
        store.sessions.beat(new, T0 + seconds(20), begins=True)
        assert _holes(store) == [(seconds(10), seconds(20), False)]
        assert store.sessions.ended(store.sessions.spans()) == {dead}
        assert [s.id for s in store.sessions.running(
            endpoint=ENDPOINT, at=T0 + seconds(30))] == [new]


def test_with_no_lock_file_no_agent_session_runs(store: Store) -> None:
    # No agent ever took this store's lock: none of its sessions can be running.
    assert not (store.path.parent / AGENT_LOCK).exists()
    _agent(store, 1)
    assert _holes(store) == [(seconds(10), seconds(30), True)]


@pytest.mark.slow
@linux
def test_sessions_the_lock_says_nothing_of_keep_the_rule_of_the_beats(
        store: Store) -> None:
    """Another host's agent (a store copied here), or a session that holds no lock (setui
    watch, the dashboard): counted as running while its last beat is recent."""
    with holding(store.path.parent / AGENT_LOCK) as proc:
        _agent(store, proc.pid + 100_000, host="another-host")
        _agent(store, proc.pid + 100_001, command="setui watch")
        assert _holes(store) == []
        assert store.sessions.ended(store.sessions.spans()) == set()


def test_a_session_that_stopped_is_not_judged_by_the_lock(store: Store) -> None:
    session = _agent(store, 1)
    store.sessions.beat(session, T0 + seconds(15), stopped=True)
    assert store.sessions.ended(store.sessions.spans()) == set()
    assert _holes(store) == [(seconds(15), seconds(30), True)]


async def test_a_recorder_names_no_dead_agent_as_recording_beside_it(store: Store) -> None:
    """What the dashboard says of another recorder on its store (monitor.recorder)."""
    from setui.monitor.recorder import Recorder

    _agent(store, 1)  # no process holds this store's lock: that agent is gone
    watch = _agent(store, 2, command="setui watch")
    recorder = Recorder(store, endpoint=ENDPOINT, command="setui")
    await recorder.start(T0 + seconds(30))
    try:
        assert recorder.problem is None
        assert [s.id for s in recorder.others] == [watch]
    finally:
        await recorder.stop(T0 + seconds(31))
