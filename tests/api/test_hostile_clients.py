"""Hostile local clients change nothing for polling, hooks or other clients.

A real agent polls a loopback emulator (a document of 150 events, so a state answer is
about 100 KB) and runs a prepare hook, while three other users attack its socket from
processes of their own: sapi-mallory opens 1,000 connections, then subscribes and asks
without ever reading; sapi-eve sends garbage, a 10 MiB frame and nested brackets;
sapi-carol floods requests, reconnecting each time she is closed. Meanwhile: the polls
go on, the hook is let go and finishes, root's subscription keeps receiving, sapi-alice
connects and reads, and the agent's memory and open files stay bounded. Afterwards the
attackers' own reports say how they were turned away.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import threading
import time
from pathlib import Path

import pytest

from setui.api.client import PlanPush, StatePush, Subscription, Tick
from setui.api.connection import BURST
from setui.api.server import CONNECT_BURST, CONNECT_RATE
from setui.emulator.scenario import parse_scenario
from setui.emulator.server import Emulator
from tests.support.api_helpers import (
    Account,
    agent_env,
    needs_root,
    run_as,
    run_script_as,
    start_agent,
    stop,
)
from tests.support.children import wait_until

pytestmark = [needs_root, pytest.mark.slow]

HOOKED = "00000000-0000-4000-8000-000000000001"
EVENTS = "\n".join(f"""
[[events]]
id = "{HOOKED if i == 0 else f'00000000-0000-4000-9000-{i:012d}'}"
type = "{'Reboot' if i == 0 else 'Freeze'}"
at = 0
notice = "15m"
resources = ["app-vm-1", "web-{i}"]
description = "{'x' * 400}"
""" for i in range(150))
BIG = f'name = "api-hostile"\nvm_name = "app-vm-1"\ntail = 5\n{EVENTS}'
HOOK = """#!/bin/sh
touch "$HOOK_DIR/prepare-running"
while [ ! -e "$HOOK_DIR/go" ]; do sleep 0.05; done
echo done > "$HOOK_DIR/prepare-finished"
"""
POLICY = """
[[rule]]
name = "drain"
event_type = "Reboot"
prepare = "{hook}"
approve = "never"
"""
ATTACK_SECONDS = 20.0
INTERVAL = 0.2

# Each attacker reports what it saw as one JSON line.
ATTACK = r'''
import json, os, random, resource, socket, sys, threading, time
path, mode, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
end = time.monotonic() + seconds
report = {}

def connect():
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(path)
    return s

def first_line(s, limit=1 << 20):
    data = b""
    while b"\n" not in data and len(data) < limit:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    return data.split(b"\n", 1)[0]

def admitted():
    """A connection past the agent's per-uid limits (they refuse with busy first)."""
    while True:
        s = connect()
        line = first_line(s)
        if line.startswith(b'{"hello"'):
            return s
        s.close()
        time.sleep(0.1)

def drain(s, limit=64 << 20):
    got = 0
    try:
        while got < limit:
            chunk = s.recv(1 << 20)
            if not chunk:
                return got, "eof"
            got += len(chunk)
    except (ConnectionResetError, BrokenPipeError):
        return got, "reset"
    except socket.timeout:
        return got, "timeout"
    return got, "more"

if mode == "connections":
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    held, outcomes = [], {}
    for _ in range(1000):
        try:
            s = connect()
            line = first_line(s)
            kind = next(iter(json.loads(line))) if line else "nothing"
            if kind == "error":
                kind += ":" + json.loads(line)["error"]["code"]
        except OSError as exc:
            kind = type(exc).__name__
            s = None
        outcomes[kind] = outcomes.get(kind, 0) + 1
        if s is not None:
            held.append(s)
    report["connections"] = outcomes
    for s in held:
        s.close()
    # Now subscribe on every connection allowed and ask for state answers without ever
    # reading them (20 a second, under the rate limit), until the agent drops them.
    readers = []
    for _ in range(8):
        s = admitted()
        s.sendall(b'{"id": 1, "op": "subscribe"}\n')
        readers.append(s)
    sent = 0
    while time.monotonic() < end:
        for s in readers:
            try:
                s.sendall(b'{"id": 2, "op": "state"}\n')
                sent += 1
            except OSError:
                pass
        time.sleep(0.05)
    report["unread_sent"] = sent
    report["unread_then"] = [drain(s) for s in readers]

elif mode == "garbage":
    bad = [b"\xff\xfe\xfd\n", b"not json\n", b"[1, 2, 3]\n", b"[" * 50000 + b"\n",
           b'{"id": 1, "op": "state", "x": NaN}\n', b'{"id": ' + b"9" * 5000 + b'}\n',
           b'{"id": 1, "op": "approve", "event_ids": ' + b"[" * 60 + b"]" * 60 + b"}\n",
           bytes(random.getrandbits(8) for _ in range(3000)) + b"\n",
           b"A" * (10 << 20)]
    seen = {}
    rounds = 0
    while time.monotonic() < end:
        for frame in bad:
            try:
                s = admitted()
                try:
                    s.sendall(frame)
                except OSError:
                    pass  # the agent closed on us mid-frame (the 10 MiB one)
                s.settimeout(5)
                line = first_line(s)
                code = json.loads(line)["error"]["code"] if line else "closed"
                rest, how = drain(s, 1 << 20)
                key = f"{code}/{how}"
            except OSError as exc:
                key = type(exc).__name__
            seen[key] = seen.get(key, 0) + 1
            try:
                s.close()
            except Exception:
                pass
        rounds += 1
    report["garbage"] = seen
    report["rounds"] = rounds

elif mode == "flood":
    closed_with, answers = {}, {}
    while time.monotonic() < end:
        s = connect()
        first_line(s)
        stop = threading.Event()
        def read(s=s):
            buf = b""
            try:
                while True:
                    chunk = s.recv(1 << 20)
                    if not chunk:
                        break
                    buf += chunk
                    *lines, buf = buf.split(b"\n")
                    for line in lines:
                        frame = json.loads(line)
                        key = "ok" if "ok" in frame else frame["error"]["code"] + (
                            "" if "id" in frame else ":last")
                        answers[key] = answers.get(key, 0) + 1
            except OSError:
                pass
            stop.set()
        t = threading.Thread(target=read, daemon=True)
        t.start()
        try:
            while not stop.is_set() and time.monotonic() < end:
                s.sendall(b'{"id": 7, "op": "bye_not"}\n{"id": 8, "op": "holes"}\n' * 50)
        except OSError:
            pass
        t.join(10)
        s.close()
    report["flood"] = answers
print(json.dumps(report))
'''


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _api_fds(pid: int, path: Path) -> int:
    """The process's open ends of the API's socket: the listener and every connection it
    accepted (/proc/net/unix names them all by its path). Its other files come and go
    with its work (a quiet poll's connection, a hook's pipes) and are not counted."""
    ends = set()
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8 and fields[7] == str(path):
            ends.add(f"socket:[{fields[6]}]")
    opened = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):  # closed meanwhile
            opened += os.readlink(fd) in ends
    return opened


class _Subscriber:
    """Root's subscription on a thread of its own: every push, with when it came."""

    def __init__(self, path: Path) -> None:
        self.pushes: list[tuple[float, object]] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run(path)),
                                        daemon=True)
        self._thread.start()

    async def _run(self, path: Path) -> None:
        try:
            sub = await Subscription.open(path, timeout=10)
            while not self._stop.is_set():
                push = await sub.next()
                self.pushes.append((time.monotonic(), push))
            await sub.aclose()
        except BaseException as exc:  # reported by the test
            self.error = exc

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)


def test_hostile_clients_change_nothing_for_polling_hooks_or_other_clients(
        base: Path, accounts: dict[str, Account]) -> None:
    hook = base / "hook.sh"
    hook.write_text(HOOK)
    hook.chmod(0o755)
    (base / "policy.toml").write_text(POLICY.format(hook=hook))
    (base / "attack.py").write_text(ATTACK)
    socket_path = base / "run" / "api.sock"
    emulator = Emulator(parse_scenario(BIG), speed=1.0)
    emulator.start()
    proc, _ = start_agent(emulator.url, base, "--policy", str(base / "policy.toml"),
                          env=agent_env(base), interval=str(INTERVAL))
    subscriber = None
    try:
        wait_until(lambda: (base / "sync" / "prepare-running").exists(), 30,
                   "the prepare hook to run")
        subscriber = _Subscriber(socket_path)
        wait_until(lambda: subscriber.pushes or subscriber.error, 30, "a first push")
        assert subscriber.error is None, subscriber.error
        rss_before, fds_before = _rss_kib(proc.pid), _api_fds(proc.pid, socket_path)
        assert fds_before >= 2  # the listener and root's subscription, at least

        attackers = {mode: run_script_as(accounts[who], [str(base / "attack.py"),
                                                         str(socket_path), mode,
                                                         str(ATTACK_SECONDS)])
                     for who, mode in (("mallory", "connections"), ("eve", "garbage"),
                                       ("carol", "flood"))}
        started, wall_started = time.monotonic(), time.time()
        peak = rss_before
        alice = None
        while any(p.poll() is None for p in attackers.values()):
            peak = max(peak, _rss_kib(proc.pid))
            elapsed = time.monotonic() - started
            if elapsed > ATTACK_SECONDS / 3 and not (base / "sync" / "go").exists():
                (base / "sync" / "go").touch()  # the hook may finish, mid-attack
            if elapsed > ATTACK_SECONDS / 2 and alice is None:
                alice = run_as(accounts["alice"], base, "history")
            time.sleep(0.2)
        ended, wall_ended = time.monotonic(), time.time()
        reports = {}
        for mode, attacker in attackers.items():
            out, err = attacker.communicate(timeout=60)
            assert attacker.returncode == 0, f"{mode}: {out}{err}"
            reports[mode] = json.loads(out.strip().splitlines()[-1])

        # The hook ran to completion, and root's subscription heard of it, and of the
        # agent all along.
        wait_until(lambda: (base / "sync" / "prepare-finished").exists(), 30,
                   "the hook to finish")
        wait_until(lambda: any(isinstance(p, PlanPush) and any(
            s.step == "prepare" and s.state == "done" for s in p.plan.steps)
            for _, p in subscriber.pushes), 30, "the plan push of the finished hook")
        assert subscriber.error is None, subscriber.error
        during = [t for t, p in subscriber.pushes if started <= t <= ended
                  and isinstance(p, (Tick, StatePush, PlanPush))]
        assert len(during) >= 2, subscriber.pushes
        # Another user was served in the middle of it.
        assert alice is not None and alice["incarnations"] == [1], alice

        # The polls went on at their pace: no gap the attack could have made (a generous
        # bound: fifteen intervals; the pace itself is the bench's to measure).
        polls = [wall_started] + [r.time for r in emulator.requests if r.method == "GET"
                                  and "scheduledevents" in r.path
                                  and wall_started <= r.time <= wall_ended] + [wall_ended]
        assert len(polls) >= 12
        assert max(b - a for a, b in itertools.pairwise(polls)) < 15 * INTERVAL, polls

        # Memory and files stayed bounded, and came back.
        assert peak - rss_before < 64 * 1024, (rss_before, peak)
        wait_until(lambda: _api_fds(proc.pid, socket_path) <= fds_before + 2, 60,
                   "the attackers' connections to be let go")

        # How the attackers were turned away.
        connections = reports["connections"]["connections"]
        assert connections.get("hello", 0) <= 8 and connections.get("error:busy", 0) >= 900, \
            connections
        for got, how in reports["connections"]["unread_then"]:
            assert how in ("eof", "reset") and got < 8 * 1024 * 1024, \
                reports["connections"]["unread_then"]
        garbage = reports["garbage"]["garbage"]
        assert set(garbage) <= {"bad-request/eof", "too-large/eof", "bad-request/reset",
                                "too-large/reset", "closed/eof", "closed/reset",
                                "BrokenPipeError", "ConnectionResetError", "busy/eof"}, garbage
        assert garbage.get("bad-request/eof", 0) + garbage.get("bad-request/reset", 0) > 0
        assert garbage.get("too-large/eof", 0) + garbage.get("too-large/reset", 0) \
            + garbage.get("BrokenPipeError", 0) > 0
        flood = reports["flood"]["flood"]
        assert flood.get("busy", 0) > 0 and flood.get("busy:last", 0) > 0, flood
        # Every frame counts against the rate, a wrong one too (a burst of 40 per
        # connection), and reconnecting does not buy a fresh budget faster than the
        # uid's connection rate.
        connections_made = flood["busy:last"] + 1
        assert flood.get("unknown-op", 0) + flood.get("bad-request", 0) \
            <= connections_made * (BURST + 20), flood
        assert connections_made <= CONNECT_BURST + CONNECT_RATE * (ATTACK_SECONDS + 2), flood
        # Thousands of bad frames, a few log lines: once a minute per kind.
        assert proc.poll() is None
    finally:
        if subscriber is not None:
            subscriber.close()
        code = stop(proc)
        emulator.stop()
    complaints = [line for line in proc.stderr.read().splitlines() if "api:" in line]
    assert code == 0
    assert len(complaints) <= 10, complaints
