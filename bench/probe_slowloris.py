"""The load balancer's probe under a slowloris: `/readyz` answer times, p99, with 200
half-sent requests held open by another user, beside the same with none.

One `setui agent` (`--health 127.0.0.1:0`, 1 poll/s) against the emulator. A probe is
what a load balancer does: a new connection, a whole `GET /readyz` at once, the answer
read to its end; one every 20 ms, each given 5 s (an unanswered one counts as 5 s, and is
counted). First 300 probes with nothing else; then user `nobody` (setpriv) runs
tests/agent/slowloris.py: 200 connections from 127.0.0.1, the probe's own address, each
sending the start of a request and a header line a second, and reopened as soon as the
agent drops them; once it holds 200, 300 probes again. The agent's CPU over each window
(schedstat) is beside the answer times (info): what the attack costs it.
"""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import ROOT, SETUI, Row, env_for, interrupt, ratio, sched_cpu, scratch, wait_for_match

from setui.emulator.scenario import parse_scenario
from setui.emulator.server import Emulator

SLOWLORIS = ROOT / "tests" / "agent" / "slowloris.py"
ATTACKERS = 200
PROBES = 300
EVERY = 0.02  # seconds between probes
GIVE = 5.0  # seconds a probe is given
TARGET_MS = 1000.0  # p99 under the slowloris (a load balancer gives a probe 5 s), none lost
NOBODY = 65534
SCENARIO = 'name = "probe-bench"\nvm_name = "bench-vm"\n'


def _probe(host: str, port: int) -> float | None:
    """Seconds from connect to the end of a /readyz answer; None if not within GIVE."""
    start = time.perf_counter()
    try:
        with socket.create_connection((host, port), timeout=GIVE) as sock:
            sock.sendall(b"GET /readyz HTTP/1.1\r\nHost: bench\r\n\r\n")
            answer = b""
            while chunk := sock.recv(4096):
                answer += chunk
                if time.perf_counter() - start > GIVE:
                    return None
    except OSError:
        return None
    return time.perf_counter() - start if answer.startswith(b"HTTP/1.1 ") else None


def _window(host: str, port: int, agent: int) -> tuple[list[float], int, float | None]:
    """PROBES probes: the answer times, how many went unanswered, the agent's CPU."""
    cpu0 = sched_cpu(agent)
    times, missed = [], 0
    for _ in range(PROBES):
        took = _probe(host, port)
        if took is None:
            missed += 1
            took = GIVE
        times.append(took)
        time.sleep(EVERY)
    cpu1 = sched_cpu(agent)
    return times, missed, (cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None)


def _p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[98]


def run() -> list[Row]:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return [Row("probe_slowloris: needs root and setpriv (the attacker is `nobody`)",
                    "-", "-", "-", "-", None)]
    work = scratch("probe-slowloris")
    with Emulator(parse_scenario(SCENARIO), speed=1) as emulator:
        err = work / "agent.err"
        with err.open("w") as err_file, (work / "agent.out").open("w") as out:
            agent = subprocess.Popen(
                [*SETUI, "agent", "--endpoint", emulator.url, "--interval", "1",
                 "--health", "127.0.0.1:0"],
                env=env_for(work / "data"), stdout=out, stderr=err_file)
        attacker: subprocess.Popen[str] | None = None
        opened: int | None = None
        try:
            said = wait_for_match(err, r"health probe at http://127\.0\.0\.1:(\d+)/",
                                  time.monotonic() + 30)
            if said is None:
                return [Row("probe_slowloris: the agent never said where its probe is",
                            "-", "-", "-", "-", False)]
            port = int(said.group(1))
            quiet, quiet_missed, quiet_cpu = _window("127.0.0.1", port, agent.pid)
            attacker = subprocess.Popen(
                ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                 sys.executable, "-I", "-c", SLOWLORIS.read_text(), "127.0.0.1", str(port),
                 "/readyz", str(ATTACKERS), "600", "127.0.0.1"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd="/",
                env={"PATH": "/usr/bin:/bin"})
            assert attacker.stdout is not None
            if not attacker.stdout.readline().startswith("holding "):
                return [Row("probe_slowloris: the slowloris never held its connections",
                            "-", "-", "-", "-", False)]
            held, held_missed, held_cpu = _window("127.0.0.1", port, agent.pid)
            attacker.terminate()
            said_last = attacker.stdout.read().split()
            opened = int(said_last[-1]) if said_last and said_last[-1].isdigit() else None
        finally:
            if attacker is not None:
                attacker.kill()
                attacker.wait()
            interrupt(agent)
    ms = 1000.0
    under, alone = _p99(held), _p99(quiet)
    seconds = PROBES * EVERY + sum(held)

    def cpu(value: float | None, took: list[float]) -> str:
        if value is None:
            return "-"
        return f"{value:.2f} s over {PROBES * EVERY + sum(took):.1f} s"

    return [
        Row(f"`/readyz` p99 of {PROBES} probes, {ATTACKERS} slowloris connections from "
            f"another uid on the probe's address (median {statistics.median(held) * ms:.1f} "
            f"ms; unanswered within {GIVE:g} s: {held_missed})", f"{under * ms:.1f} ms",
            f"none: p99 {alone * ms:.1f} ms (median {statistics.median(quiet) * ms:.1f} ms; "
            f"unanswered {quiet_missed})", ratio(under, alone),
            f"<= {TARGET_MS:g} ms, none unanswered",
            under * ms <= TARGET_MS and held_missed == 0),
        Row("the agent's CPU while probed (info; schedstat, every thread)",
            f"slowloris: {cpu(held_cpu, held)}"
            + (f", {opened} connections opened, {held_cpu / opened * 1e6:.0f} µs each"
               if opened and held_cpu is not None else ""), f"none: {cpu(quiet_cpu, quiet)}",
            ratio(held_cpu / seconds, quiet_cpu / (PROBES * EVERY + sum(quiet)))
            if held_cpu is not None and quiet_cpu is not None else "-", "-", None),
    ]


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    for row in run():
        print(row)
