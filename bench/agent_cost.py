"""`setui agent` at 1 poll/s for 60 s beside `setui watch`: CPU seconds and peak RSS.

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
"""

from __future__ import annotations

import re
import subprocess
import time
import urllib.request

from common import SETUI, Row, env_for, interrupt, ratio, sched_cpu, scratch, write_scenario
from watch_cost import _polls, scenario

from setui.emulator.scenario import load_scenario
from setui.emulator.server import Emulator

TARGET = 1.1  # the agent's CPU at most this times watch's
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


def _metrics_url(path: object, deadline: float) -> str | None:
    while time.monotonic() < deadline:
        found = re.search(r"metrics at (http://\S+/metrics)", path.read_text())  # type: ignore[attr-defined]
        if found:
            return found.group(1)
        time.sleep(0.1)
    return None


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
        with agent_err.open("w") as err:
            agent = subprocess.Popen(
                [*SETUI, "agent", "--endpoint", emulator.url, "--interval", "1",
                 "--data-dir", str(agent_dir), "--policy", str(policy),
                 "--metrics", "127.0.0.1:0"],
                env=env_for(agent_dir), stdout=agent_out, stderr=err)
        url = _metrics_url(agent_err, time.monotonic() + 30)
        scrapes, scraped_at = 0, 0.0
        warmup = 5.0
        steady0: tuple[float | None, float | None] | None = None
        while time.time() < started + duration:
            if steady0 is None and time.time() >= started + warmup:
                steady0 = (sched_cpu(watch.pid), sched_cpu(agent.pid))
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
        watch_cpu, watch_rss = interrupt(watch)
        agent_cpu, agent_rss = interrupt(agent)
        stopped = time.time()
        watch_out.close()
        agent_out.close()
        polls = _polls(emulator, "setui/", started - 1, stopped + 1)
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
    low = int(duration * 0.8) * 2
    if polls < low or url is None:
        rows.append(Row("agent_cost: too few polls or no metrics to compare",
                        f"{polls} polls", f"metrics {url}", "-", f">= {low} polls", False))
    return rows
