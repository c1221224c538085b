"""`setui agent` at 1 poll/s for 60 s beside `setui watch` and the documents' sample: CPU
seconds and peak RSS.

The target (at most 1.1x watch's CPU) is on the steady state, polling at 1/s from 5 s
after the start to the end, measured in nanoseconds from /proc/PID/task/*/schedstat
(every thread: the metrics server's too). The whole-process figure, start-up included,
is shown beside it: the agent's start-up imports more (prometheus_client, its policy),
about 40 ms of CPU once, which is most of the difference over a minute.

Both run at the same time against the same emulator and the same events, each with a
data directory of its own, so the figure is what acting costs on top of watching: the
policy's matching (every event falls under a notify-only rule, decided once and kept in
the store) and the metrics endpoint (scraped every 15 s, a common Prometheus
scrape_interval; the default is 1 min). Whole processes, start-up included. (A
node_exporter textfile instead costs about 1 ms per write: every 15 s and at each change.)

The agent now runs all day as the VM's service, so what it costs per poll is what a VM
pays: the agent's CPU per poll after start-up (schedstat, every thread: its heartbeat and
its API's socket served too) is set beside the documents' sample's per poll, the three
run at the same time against the same emulator (target: at most 0.6x).

The heartbeat's thread (ten wakes a second, by issue 23) costs what any 10 Hz tick costs,
the kernel's wake: a bare Python sleep loop runs beside the three, and the per-poll figure
is given with every thread and with every thread but the heartbeat's (found as the one
thread run about ten times a second: schedstat's count of timeslices).
"""

from __future__ import annotations

import subprocess
import time
import urllib.request

from common import (
    BARE_TICK,
    EVENTS_PATH,
    FLOOR_AGENT,
    SETUI,
    Row,
    env_for,
    floor_poll,
    interrupt,
    ratio,
    sched_cpu,
    sched_threads,
    scratch,
    start_sample,
    wait_for_match,
    write_scenario,
)
from watch_cost import _polls, scenario

from setui.emulator.scenario import load_scenario
from setui.emulator.server import Emulator

TARGET = 1.1  # the agent's CPU at most this times watch's
PER_POLL_TARGET = 0.6  # the agent's CPU per poll at most this times the sample's
SCRAPE_EVERY = 15.0
POLICY = """
[[rule]]
name = "tell"
this_vm = true
notify = true

[[rule]]
name = "others"
this_vm = false
"""


def run(quick: bool = False) -> list[Row]:
    duration = 10.0 if quick else 60.0
    work = scratch("agent-cost")
    path = write_scenario(work / "scenario.json", scenario(duration))
    policy = work / "policy.toml"
    policy.write_text(POLICY)
    with Emulator(load_scenario(str(path)), speed=1) as emulator:
        watch_dir, agent_dir = work / "watch-data", work / "agent-data"
        watch_out = (work / "watch.out").open("w")
        agent_out, agent_err = (work / "agent.out").open("w"), work / "agent.err"
        started = time.time()
        watch = subprocess.Popen(
            [*SETUI, "watch", "--endpoint", emulator.url, "--interval", "1",
             "--data-dir", str(watch_dir)],
            env=env_for(watch_dir), stdout=watch_out, stderr=subprocess.STDOUT)
        agent_env = env_for(agent_dir)
        agent_env["SETUI_SOCKET"] = str(work / "api.sock")  # its API served, as installed
        with agent_err.open("w") as err:
            agent = subprocess.Popen(
                [*SETUI, "agent", "--endpoint", emulator.url, "--interval", "1",
                 "--data-dir", str(agent_dir), "--policy", str(policy),
                 "--metrics", "127.0.0.1:0"],
                env=agent_env, stdout=agent_out, stderr=err)
        sample, sample_out = start_sample(emulator.url, work)
        bare = subprocess.Popen(BARE_TICK, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        floor_url = f"{emulator.url}{EVENTS_PATH}?api-version=2020-07-01"
        poller = subprocess.Popen(floor_poll(floor_url), stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        said = wait_for_match(agent_err, r"metrics at (http://\S+/metrics)",
                              time.monotonic() + 30)
        url = said.group(1) if said else None
        scrapes, scraped_at = 0, 0.0
        warmup = 5.0
        steady0: tuple[float | None, float | None] | None = None
        sample0: tuple[float | None, float | None, float] | None = None
        while time.time() < started + duration:
            if steady0 is None and time.time() >= started + warmup:
                steady0 = (sched_cpu(watch.pid), sched_cpu(agent.pid))
                sample0 = (sched_cpu(agent.pid), sched_cpu(sample.pid), time.time())
                threads0, bare0 = sched_threads(agent.pid), sched_cpu(bare.pid)
                floor0 = sched_cpu(poller.pid)
            if url is not None and time.time() - scraped_at >= SCRAPE_EVERY:
                scraped_at = time.time()
                try:
                    with urllib.request.urlopen(url, timeout=5) as answer:
                        answer.read()
                    scrapes += 1
                except OSError:
                    pass
            time.sleep(0.5)
        steady1 = (sched_cpu(watch.pid), sched_cpu(agent.pid))
        sample1 = (steady1[1], sched_cpu(sample.pid), time.time())
        threads1, bare1 = sched_threads(agent.pid), sched_cpu(bare.pid)
        floor1 = sched_cpu(poller.pid)
        interrupt(bare)
        interrupt(poller)
        watch_cpu, watch_rss = interrupt(watch)
        agent_cpu, agent_rss = interrupt(agent)
        interrupt(sample)
        stopped = time.time()
        watch_out.close()
        agent_out.close()
        sample_out.close()
        polls = _polls(emulator, "setui/", started - 1, stopped + 1)
        if sample0 is not None:
            # The agent's own polls: watch's share the user agent, so the agent's are its
            # request log's polls less watch's (one each a second), counted apart below.
            sample_polls = _polls(emulator, "python-requests/", sample0[2], sample1[2])
            setui_polls = _polls(emulator, "setui/", sample0[2], sample1[2])
            floor_polls = _polls(emulator, FLOOR_AGENT, sample0[2], sample1[2])
    per = f"{duration:.0f} s"
    rows = [
        Row(f"`setui agent` 1 poll/s, {per}, notify-only policy, metrics scraped "
            f"{scrapes} times: CPU, start-up included (info)", f"{agent_cpu:.2f} s",
            f"`setui watch` {watch_cpu:.2f} s", ratio(agent_cpu, watch_cpu), "-", None),
        Row(f"`setui agent` 1 poll/s, {per}: peak RSS (info)", f"{agent_rss:.1f} MB",
            f"`setui watch` {watch_rss:.1f} MB", ratio(agent_rss, watch_rss), "-", None),
    ]
    if steady0 is not None and None not in steady0 + steady1:
        watch_steady = steady1[0] - steady0[0]  # type: ignore[operator]
        agent_steady = steady1[1] - steady0[1]  # type: ignore[operator]
        rows.insert(0, Row(
            f"`setui agent` 1 poll/s, steady state ({warmup:.0f} s on to the end, "
            "schedstat): CPU", f"{agent_steady:.3f} s", f"`setui watch` {watch_steady:.3f} s",
            ratio(agent_steady, watch_steady), f"<= {TARGET}x watch's",
            agent_steady <= TARGET * watch_steady))
    else:
        rows.append(Row("agent_cost: no steady-state CPU (/proc/PID/task/*/schedstat)", "-",
                        "-", "-", "-", False))
    if sample0 is not None and None not in sample0[:2] + sample1[:2] and sample_polls:
        # watch and the agent both poll once a second: half of setui's polls are the agent's.
        agent_polls = setui_polls / 2
        per_agent = (sample1[0] - sample0[0]) / agent_polls  # type: ignore[operator]
        per_sample = (sample1[1] - sample0[1]) / sample_polls  # type: ignore[operator]
        seconds = sample1[2] - sample0[2]
        beat = _heartbeat(threads0, threads1, seconds)
        floor = (f"; a bare 10 Hz sleep loop {(bare1 - bare0) / seconds * 1000:.2f} ms/s"
                 if bare0 is not None and bare1 is not None else "")
        rows.insert(1, Row(
            f"`setui agent` (API served, heartbeat): CPU per poll after start-up "
            f"({warmup:.0f} s on; schedstat, every thread)",
            f"{per_agent * 1000:.2f} ms ({agent_polls:.0f} polls"
            + (f"; the heartbeat's thread {beat / agent_polls * 1000:.2f} ms"
               if beat is not None else "") + ")",
            f"docs' sample {per_sample * 1000:.2f} ms ({sample_polls} polls){floor}",
            ratio(per_agent, per_sample), f"<= {PER_POLL_TARGET}x the sample's",
            per_agent <= PER_POLL_TARGET * per_sample))
        if beat is not None:
            rest = per_agent - beat / agent_polls
            rows.insert(2, Row(
                "`setui agent` (API served): CPU per poll after start-up, every thread but "
                f"the heartbeat's ({warmup:.0f} s on; schedstat)",
                f"{rest * 1000:.2f} ms", f"docs' sample {per_sample * 1000:.2f} ms",
                ratio(rest, per_sample), f"<= {PER_POLL_TARGET}x the sample's",
                rest <= PER_POLL_TARGET * per_sample))
        if floor0 is not None and floor1 is not None and floor_polls:
            per_floor = (floor1 - floor0) / floor_polls
            rows.insert(3, Row(
                "the floor of a poll (info): an asyncio loop that wakes once a second, "
                "writes a GET on a kept-alive connection and reads the answer, nothing "
                "parsed (schedstat, the same window)",
                f"{per_floor * 1000:.2f} ms ({floor_polls} polls)",
                f"docs' sample {per_sample * 1000:.2f} ms", ratio(per_floor, per_sample),
                "-", None))
        if beat is None:
            rows.append(Row("agent_cost: no thread ran ten times a second (the heartbeat)",
                            "-", "-", "-", "-", False))
    low = int(duration * 0.8) * 2
    if polls < low or url is None:
        rows.append(Row("agent_cost: too few polls or no metrics to compare",
                        f"{polls} polls", f"metrics {url}", "-", f">= {low} polls", False))
    return rows


def _heartbeat(before: dict[int, tuple[float, int]], after: dict[int, tuple[float, int]],
               seconds: float) -> float | None:
    """CPU seconds of the heartbeat's thread between two looks: the one thread run at
    least eight times a second (it wakes ten times; the others a few times at most)."""
    busy = [cpu - before[tid][0] for tid, (cpu, runs) in after.items()
            if tid in before and (runs - before[tid][1]) >= 8 * seconds]
    return busy[0] if len(busy) == 1 else None
