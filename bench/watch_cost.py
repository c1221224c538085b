"""`setui watch` at 1 poll/s for 60 s: CPU seconds and peak RSS.

Reference: the service documents' own Python sample (tests/emulator/samples, only its
URL changed), which polls with `requests` and sleep(1), run at the same time against
the same emulator. Both processes are whole programs, start-up included, so the CPU
figure is what an operator's VM pays for the minute. The emulator's request log tells
how often each one really asked: the counts are printed beside the figures.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from common import (
    EVENTS_PATH,
    SETUI,
    Row,
    env_for,
    guid,
    interrupt,
    ratio,
    sched_cpu,
    scratch,
    start_sample,
    write_scenario,
)

from setui.emulator.scenario import load_scenario
from setui.emulator.server import Emulator

RSS_TARGET_MB = 60.0


def scenario(duration: float) -> dict[str, object]:
    """A few events from the start and one more every quarter of the run, all of a kind
    the sample only logs (Platform, not a short Freeze): it never approves, so the
    document both see is the same and nothing but polling and change handling is timed."""
    base = [
        {"id": guid(1), "type": "Reboot", "notice": "7d", "resources": ["vm-0"]},
        {"id": guid(2), "type": "Redeploy", "notice": "7d", "resources": ["vm-1", "vm-2"]},
        {"id": guid(3), "type": "Freeze", "notice": "7d", "duration": 30,
         "resources": ["vm-0", "vm-3"]},
    ]
    later = [{"id": guid(10 + k), "type": "Reboot", "at": round(duration * k / 4, 1) + 0.5,
              "notice": "7d", "resources": [f"vm-{k}"]} for k in (1, 2, 3)]
    return {"name": "bench-watch", "vm_name": "vm-0", "events": base + later}


def _polls(emulator: Emulator, agent: str, since: float, until: float) -> int:
    return sum(1 for r in list(emulator.requests)
               if r.method == "GET" and r.path == EVENTS_PATH
               and r.headers.get("user-agent", "").startswith(agent) and since <= r.time <= until)


def run(quick: bool = False) -> list[Row]:
    duration = 10.0 if quick else 60.0
    work = scratch("watch-cost")
    path = write_scenario(work / "scenario.json", scenario(duration))
    with Emulator(load_scenario(str(path)), speed=1) as emulator:
        watch_dir = work / "watch-data"
        watch_out = (work / "watch.out").open("w")
        started = time.time()
        # Started back to back and stopped together: the same minute, the same documents.
        watch = subprocess.Popen(
            [*SETUI, "watch", "--endpoint", emulator.url, "--interval", "1",
             "--data-dir", str(watch_dir)],
            env=env_for(watch_dir), stdout=watch_out, stderr=subprocess.STDOUT)
        sample, sample_out = start_sample(emulator.url, work)
        # CPU after start-up too, so the steady cost of one poll shows apart from imports.
        warmup = 5.0
        time.sleep(warmup)
        steady0 = (sched_cpu(watch.pid), sched_cpu(sample.pid), time.time())
        time.sleep(duration - warmup)
        steady1 = (sched_cpu(watch.pid), sched_cpu(sample.pid), time.time())
        watch_cpu, watch_rss = interrupt(watch)
        sample_cpu, sample_rss = interrupt(sample)
        stopped = time.time()
        watch_out.close()
        sample_out.close()
        # A second either side: the last poll may be answered while the child is stopped.
        watch_polls = _polls(emulator, "setui/", started - 1, stopped + 1)
        sample_polls = _polls(emulator, "python-requests/", started - 1, stopped + 1)
        steady_polls = (_polls(emulator, "setui/", steady0[2], steady1[2]),
                        _polls(emulator, "python-requests/", steady0[2], steady1[2]))
    changes = sum(1 for line in Path(work / "watch.out").read_text().splitlines()
                  if " appeared " in line)
    per = f"{duration:.0f} s"
    rows = [
        Row(f"`setui watch` 1 poll/s, {per}: CPU (polls seen by the emulator; "
            f"{changes} events reported)",
            f"{watch_cpu:.2f} s ({watch_polls} polls)",
            f"docs' sample {sample_cpu:.2f} s ({sample_polls} polls)",
            ratio(watch_cpu, sample_cpu), "<= the sample's", watch_cpu <= sample_cpu),
        Row(f"`setui watch` 1 poll/s, {per}: peak RSS", f"{watch_rss:.1f} MB",
            f"docs' sample {sample_rss:.1f} MB", ratio(watch_rss, sample_rss),
            f"<= {RSS_TARGET_MB:.0f} MB", watch_rss <= RSS_TARGET_MB),
    ]
    if None not in steady0[:2] + steady1[:2] and min(steady_polls) > 0:
        per_watch = (steady1[0] - steady0[0]) / steady_polls[0]  # type: ignore[operator]
        per_sample = (steady1[1] - steady0[1]) / steady_polls[1]  # type: ignore[operator]
        rows.append(Row(
            f"`setui watch`: CPU per poll after start-up ({warmup:.0f} s on; schedstat) "
            "(info)", f"{per_watch * 1000:.2f} ms ({steady_polls[0]} polls)",
            f"docs' sample {per_sample * 1000:.2f} ms ({steady_polls[1]} polls)",
            ratio(per_watch, per_sample), "-", None))
    # Both must really have polled about once a second, or the comparison means nothing.
    low = int(duration * 0.8)
    if min(watch_polls, sample_polls) < low:
        rows.append(Row("watch_cost: too few polls to compare", f"watch {watch_polls}",
                        f"sample {sample_polls}", "-", f">= {low} each", False))
    return rows
