"""The agent's heartbeat beside `setui watch` alone: its CPU over 60 s, as a share of a core.

Two `setui watch` processes poll one emulator at 1 poll/s for 60 s at the same time; one
of them also runs the agent's heartbeat (agent.heartbeat: a thread that wakes every
100 ms, reads three clocks and compares them), started before the command as `setui
agent` starts it. The target (under 0.1 % of a core more) is on the heartbeat thread's own
CPU, in nanoseconds from /proc/PID/task/TID/schedstat, over the steady state (5 s on to
the end). The two whole processes' steady CPU is beside it (info): what the wake-ups cost
the rest of the process (the GIL handed over and back) is in that difference, and so is
the noise between two processes doing the same work.

The floor of any 10 Hz tick runs beside them over the same window: a bare Python loop
(``time.sleep(0.1); time.monotonic()``, the heartbeat's own loop with nothing else) and
the same in perl (``select`` with a 0.1 s timeout). What a tick costs is the kernel's
wake, whatever runs it: the heartbeat's CPU per tick is set beside the bare loop's.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

from common import (
    BARE_TICK,
    PERL_TICK,
    SETUI,
    Row,
    env_for,
    interrupt,
    ratio,
    sched_cpu,
    scratch,
    wait_for_match,
    write_scenario,
)
from watch_cost import _polls, scenario

from setui.emulator.scenario import load_scenario
from setui.emulator.server import Emulator

TARGET = 0.1  # % of a core, the heartbeat's thread
BARE_LOOPS = [("bare Python loop (`time.sleep(0.1); time.monotonic()`)", BARE_TICK),
              ("bare perl loop (`select` 0.1 s)", PERL_TICK)]
# `setui watch` with the heartbeat running beside it, its thread's id said on stderr.
ENTRY = """\
import sys, time
from setui.agent.heartbeat import Heartbeat
beat = Heartbeat(lambda stall: None)
beat.start()
while beat.native_id is None:
    time.sleep(0.001)
print(f"heartbeat thread {beat.native_id}", file=sys.stderr, flush=True)
from setui.cli import main
sys.exit(main(sys.argv[1:]))
"""


def thread_cpu(pid: int, tid: int) -> float | None:
    """CPU seconds of one thread (schedstat: nanoseconds), or None without /proc."""
    try:
        return int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def run(quick: bool = False) -> list[Row]:
    duration = 10.0 if quick else 60.0
    work = scratch("heartbeat")
    path = write_scenario(work / "scenario.json", scenario(duration))
    with Emulator(load_scenario(str(path)), speed=1) as emulator:
        plain_dir, beat_dir = work / "watch-data", work / "heartbeat-data"
        plain_out = (work / "watch.out").open("w")
        beat_out, beat_err = (work / "heartbeat.out").open("w"), work / "heartbeat.err"
        watch = ["watch", "--endpoint", emulator.url, "--interval", "1"]
        started = time.time()
        plain = subprocess.Popen([*SETUI, *watch, "--data-dir", str(plain_dir)],
                                 env=env_for(plain_dir), stdout=plain_out,
                                 stderr=subprocess.STDOUT)
        with beat_err.open("w") as err:
            beat = subprocess.Popen([sys.executable, "-c", ENTRY, *watch, "--data-dir",
                                     str(beat_dir)], env=env_for(beat_dir), stdout=beat_out,
                                    stderr=err)
        bare = [(name, subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL))
                for name, argv in BARE_LOOPS if shutil.which(argv[0])]
        said = wait_for_match(beat_err, r"^heartbeat thread (\d+)$", time.monotonic() + 30)
        tid = int(said.group(1)) if said else None
        warmup = 5.0
        time.sleep(max(0.0, started + warmup - time.time()))
        steady0 = (sched_cpu(plain.pid), sched_cpu(beat.pid),
                   thread_cpu(beat.pid, tid) if tid else None, time.monotonic())
        bare0 = [sched_cpu(p.pid) for _, p in bare]
        time.sleep(max(0.0, started + duration - time.time()))
        steady1 = (sched_cpu(plain.pid), sched_cpu(beat.pid),
                   thread_cpu(beat.pid, tid) if tid else None, time.monotonic())
        bare1 = [sched_cpu(p.pid) for _, p in bare]
        interrupt(plain)
        interrupt(beat)
        for _, proc in bare:
            interrupt(proc)
        stopped = time.time()
        plain_out.close()
        beat_out.close()
        polls = _polls(emulator, "setui/", started - 1, stopped + 1)
    if None in steady0 + steady1:
        return [Row("heartbeat: no CPU figures (/proc/PID/task/*/schedstat)", "-", "-", "-",
                    "-", False)]
    seconds = steady1[3] - steady0[3]
    plain_cpu, beat_cpu, thread = (steady1[i] - steady0[i] for i in range(3))  # type: ignore[operator]
    share = 100 * thread / seconds
    plain_share = 100 * plain_cpu / seconds
    rows = [
        Row(f"heartbeat thread (10 ticks/s) beside `setui watch` 1 poll/s, steady state "
            f"{seconds:.0f} s (schedstat): CPU share of a core", f"{share:.3f} %",
            f"`setui watch` alone {plain_share:.3f} %", ratio(share, plain_share),
            f"< {TARGET} % of a core", share < TARGET),
        Row("`setui watch` with the heartbeat, whole process, steady state: CPU share of a "
            "core (info: the difference is the heartbeat's cost to the process, and noise)",
            f"{100 * beat_cpu / seconds:.3f} % "
            f"({100 * (beat_cpu - plain_cpu) / seconds:+.3f} %)",
            f"`setui watch` alone {plain_share:.3f} %", ratio(beat_cpu, plain_cpu), "-", None),
    ]
    ticks = seconds / 0.1
    for (name, _), before, after in zip(bare, bare0, bare1, strict=True):
        if before is None or after is None:
            continue
        cpu = after - before
        rows.append(Row(
            f"the floor of a 10 Hz tick: {name}, the same {seconds:.0f} s (schedstat): CPU "
            "per tick and share of a core (info: the heartbeat thread's per tick is the "
            "reference)", f"{cpu / ticks * 1e6:.0f} us ({100 * cpu / seconds:.3f} %)",
            f"heartbeat thread {thread / ticks * 1e6:.0f} us ({share:.3f} %)",
            ratio(after - before, thread), "-", None))
    low = int(duration * 0.8) * 2
    if polls < low:
        rows.append(Row("heartbeat: too few polls to compare", f"{polls} polls", "-", "-",
                        f">= {low} polls", False))
    return rows
