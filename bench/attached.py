"""Three people watching one VM: the agent and three dashboards attached to it, beside the
agent and three standalone dashboards, for 60 s at 1 poll/s, in the same run.

Two emulators play the same ten events, NotBefore 7-16 min away (a maintenance window:
every countdown ticks each second). On one, `setui agent` serves its socket and three
real `setui` processes in pseudo-terminals attach to it (80x24, 200x60, 80x24); on the
other, an agent and three `setui --standalone` (each its own poller and store). Figures:

- requests per second at IMDS, from each emulator's own request log (GETs of the events
  document, from 5 s on to the end): one poller per VM, not one per person;
- an attached dashboard idle at 80x24 and 200x60, the agent acting on every event by
  a policy (a prepare hook that ends at once, an approval 60 s before NotBefore: never
  due in the run), so the pane under the timeline shows its plan and the change log
  where there is room for it (200x60; at 80x24 the ten rows leave it none): its CPU
  share of a core (from /proc)
  and the bytes it writes to its terminal per second, beside the standalone dashboard of
  the same size in the same run (which polls, parses and records itself); and the share
  of each of their threads (the main thread's first: the event loop, the repaint).

All eight processes run at once on the machine's cores: each figure beside its reference
shares the same neighbours.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from common import (
    EVENTS_PATH,
    SETUI,
    Row,
    env_for,
    interrupt,
    ratio,
    sched_cpu_by_thread,
    scratch,
    write_scenario,
)
from dashboard import CASES, _start_pty, _stop_pty, _Terminal, scenario

from setui.emulator.scenario import load_scenario
from setui.emulator.server import Emulator

CPU_TARGET = 0.005  # an attached dashboard, idle: of one core
BYTES_TARGET = 1024.0  # per second
SIZES = ((80, 24), (200, 60), (80, 24))
WARMUP = 5.0


@dataclass
class _Seat:
    """One dashboard of a run."""

    size: tuple[int, int]
    proc: subprocess.Popen[bytes]
    term: _Terminal
    share: float = 0.0
    rate: float = 0.0
    threads: list[float] = field(default_factory=list)  # shares: the main thread's first

    def measure(self, before: dict[int, float] | None, after: dict[int, float] | None,
                seconds: float) -> None:
        """The share of a core of the whole process and of each thread (a thread started
        in between counts from its start; one that ended in between is left out)."""
        if before is None or after is None:
            return
        shares = {tid: (cpu - before.get(tid, 0.0)) / seconds for tid, cpu in after.items()}
        self.share = sum(shares.values())
        main = shares.pop(self.proc.pid, 0.0)
        self.threads = [main, *sorted(shares.values(), reverse=True)]

    def per_thread(self) -> str:
        if not self.threads:
            return "unknown"
        others = ", ".join(f"{share * 100:.3f}" for share in self.threads[1:])
        return f"main thread {self.threads[0] * 100:.3f} %; the others {others} %"

    @property
    def label(self) -> str:
        return f"{self.size[0]}x{self.size[1]}"


# Every event: prepared at once, approved 60 s before NotBefore (never, in the run).
POLICY = """
[[rule]]
name = "window"
prepare = "/bin/true"
approve = "before-not-before"
approve_before = 60
other_vms = true
"""


def _agent(url: str, data: Path, sock: Path, out: Path) -> subprocess.Popen[bytes]:
    env = env_for(data)
    env["SETUI_SOCKET"] = str(sock)
    policy = out.with_suffix(".policy.toml")
    policy.write_text(POLICY)
    with out.open("w") as log:
        return subprocess.Popen([*SETUI, "agent", "--endpoint", url, "--interval", "1",
                                 "--data-dir", str(data), "--policy", str(policy)],
                                env=env, stdout=log, stderr=log)


def _answering(sock: Path, deadline: float) -> bool:
    from setui.api.client import AgentClient, ApiError

    while time.monotonic() < deadline:
        try:
            AgentClient.connect(sock, timeout=2).close()
            return True
        except ApiError:
            time.sleep(0.1)
    return False


def _gets(emulator: Emulator, since: float, until: float) -> int:
    return sum(1 for r in list(emulator.requests)
               if r.method == "GET" and r.path == EVENTS_PATH and since <= r.time <= until)


def _seats(url: str, work: Path, name: str, *extra: str) -> list[_Seat]:
    seats = []
    for index, size in enumerate(SIZES):
        data = work / f"{name}-{index}"
        proc, term = _start_pty(url, data, size, *extra)
        seats.append(_Seat(size, proc, term))
    return seats


def run(quick: bool = False, *, events: int = 10) -> list[Row]:
    """``events``: the first of the ten (bench/attached_pane.py: three, so that the pane
    under the timeline has room at 80x24 too)."""
    duration = 10.0 if quick else 60.0
    ten = CASES[0]  # minutes away: every countdown ticks
    case = replace(ten, notices=ten.notices[:events])
    work = scratch("attached")
    path = write_scenario(work / "scenario.json", scenario(case))
    with Emulator(load_scenario(str(path)), speed=1) as one, \
            Emulator(load_scenario(str(path)), speed=1) as other:
        sock = work / "api.sock"
        agent = _agent(one.url, work / "agent-data", sock, work / "agent.out")
        reference = _agent(other.url, work / "other-agent-data", work / "other.sock",
                           work / "other-agent.out")
        if not _answering(sock, time.monotonic() + 30):
            raise RuntimeError("the agent's socket never answered")
        os.environ["SETUI_SOCKET"] = str(sock)  # what the attached dashboards find
        try:
            attached = _seats(one.url, work, "attached")
        finally:
            del os.environ["SETUI_SOCKET"]
        standalone = _seats(other.url, work, "standalone", "--standalone")
        seats = attached + standalone
        time.sleep(WARMUP)
        t0, w0 = time.monotonic(), time.time()
        cpu0 = {s.proc.pid: sched_cpu_by_thread(s.proc.pid) for s in seats}
        time.sleep(duration)
        t1, w1 = time.monotonic(), time.time()
        cpu1 = {s.proc.pid: sched_cpu_by_thread(s.proc.pid) for s in seats}
        for seat in seats:
            _stop_pty(seat.proc, seat.term)
            (work / f"terminal-{seat.label}-{seat.proc.pid}.out").write_bytes(
                bytes(seat.term.data))
            seat.measure(cpu0[seat.proc.pid], cpu1[seat.proc.pid], t1 - t0)
            seat.rate = seat.term.bytes_between(t0, t1) / (t1 - t0)
        interrupt(agent)
        interrupt(reference)
        ours, theirs = _gets(one, w0, w1) / (w1 - w0), _gets(other, w0, w1) / (w1 - w0)
    said = f"{events} events, NotBefore 7-{int(case.notices[-1] // 60)} min away"
    rows = [Row(f"requests at IMDS per second, the agent and 3 dashboards attached to it, "
                f"{duration:.0f} s ({said}; the emulator's request log)",
                f"{ours:.2f}/s ({ours * duration:.0f} GETs)",
                f"the agent and 3 standalone dashboards {theirs:.2f}/s "
                f"({theirs * duration:.0f} GETs)", ratio(ours, theirs),
                "one poller: about 1/s", ours <= 1.2)]
    for mine, theirs_seat in zip(attached[:2], standalone[:2], strict=True):
        rows.append(Row(
            f"attached dashboard idle, {said}, 1 poll/s by the agent, {duration:.0f} s (pty "
            f"{mine.label}): CPU share of a core", f"{mine.share * 100:.2f} %",
            f"standalone {theirs_seat.label} {theirs_seat.share * 100:.2f} % (same run)",
            ratio(mine.share, theirs_seat.share), f"<= {CPU_TARGET * 100:.1f} %",
            mine.share <= CPU_TARGET))
        rows.append(Row(
            f"attached dashboard idle, {said}, {duration:.0f} s (pty {mine.label}): CPU share "
            "of a core per thread (schedstat; info)", mine.per_thread(),
            f"standalone {theirs_seat.label}: {theirs_seat.per_thread()}", "-", "-", None))
        rows.append(Row(
            f"attached dashboard idle, {said}, {duration:.0f} s (pty {mine.label}): bytes "
            "written to the terminal per second", f"{mine.rate:,.0f} B/s",
            f"standalone {theirs_seat.label} {theirs_seat.rate:,.0f} B/s (same run)",
            ratio(mine.rate, theirs_seat.rate), f"<= {BYTES_TARGET / 1024:.0f} KB/s",
            mine.rate <= BYTES_TARGET))
    return rows
