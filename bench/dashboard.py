"""The dashboard idle with 10 events at 1 poll/s: CPU share of one core, bytes written to
the terminal per second, peak RSS; at 80x24 and at 200x60.

Three schedules, because what ticks depends on how far NotBefore is:

- minutes: NotBefore 7-16 min away (a maintenance window): every countdown ticks each
  second and the timeline's marks move a cell every 20-70 s;
- hour: NotBefore 62-71 min away: the countdowns tick, and every lane's "in 1:02:03 →"
  note past the timeline's right edge (default zoom ends at +1h) ticks too;
- week: NotBefore 5-7 days away: countdowns read "6d 23h", nothing ticks but the clock.

Each dashboard runs as a real `setui` process in a pseudo-terminal (Textual's own terminal
driver included: escape sequences, the writer thread, input parsing); the output is
drained as a terminal would, and its byte rate is reported because on a slow SSH link
that is what a repaint costs. Both sizes run at the same time against one emulator. Should
a pty not be available, the app runs headless (`App.run_test`) in a child interpreter
instead, and the figure says so.

The CPU share is taken over the idle part of the run (from `warmup` seconds after start
to the end), from /proc. References, in the same run and at the same time: `setui watch`
polling the same emulator at the same rate, and the same interpreter doing nothing but
asyncio.sleep; for the bytes, what start-up and the first frame wrote.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from common import (
    SETUI,
    Row,
    env_for,
    guid,
    interrupt,
    peak_rss,
    proc_cpu,
    ratio,
    scratch,
    stop_with,
    write_scenario,
)

from setui.emulator.scenario import load_scenario
from setui.emulator.server import Emulator

CPU_TARGET = 0.02
BYTES_TARGET = 1024.0  # per second
RSS_TARGET_MB = 120.0
SIZES = ((80, 24), (200, 60))

IDLE = "import asyncio, sys; asyncio.run(asyncio.sleep(float(sys.argv[1])))"

# The fallback without a pty: the app as the first-frame benchmark runs it, left idle.
HEADLESS = """
import asyncio, sys
from setui.settings.config import Config
from setui.core.client import ImdsClient
from setui.store import Store
from setui.ui.app import SetuiApp

async def main():
    url, data, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    cols, rows = int(sys.argv[4]), int(sys.argv[5])
    app = SetuiApp(client=ImdsClient(url), config=Config(endpoint=url, data_dir=data),
                   store=Store.open_dir(data), poll=True)
    async with app.run_test(size=(cols, rows)) as pilot:
        await pilot.pause()
        await asyncio.sleep(seconds)

asyncio.run(main())
"""


@dataclass(frozen=True)
class Case:
    """One schedule of the ten events: ``notices[i]`` is event i's notice in seconds."""

    name: str
    says: str  # for the figure's name
    notices: tuple[float, ...]


CASES = (
    Case("minutes", "NotBefore 7-16 min away", tuple(420.0 + 60 * i for i in range(10))),
    Case("hour", "NotBefore 62-71 min away", tuple(3720.0 + 60 * i for i in range(10))),
    Case("week", "NotBefore 5-7 days away", tuple(86400.0 * (7 - i % 3) for i in range(10))),
)


def scenario(case: Case) -> dict[str, object]:
    """Ten events that neither appear, start nor end during the run, so every repaint is
    the dashboard's own (countdowns, the clock, the timeline), not news."""
    kinds = ["Freeze", "Reboot", "Redeploy", "Terminate", "Reboot"]
    return {"name": f"bench-dashboard-{case.name}", "vm_name": "vm-0", "events": [
        {"id": guid(i), "type": kinds[i % 5], "notice": notice,
         "resources": [f"vm-{i % 4}", f"vm-{i + 4}"], "duration": [5, -1, 0, 30][i % 4],
         "source": "User" if i % 3 == 0 else "Platform"}
        for i, notice in enumerate(case.notices)]}


class _Terminal:
    """The master side of a pty: drained on a thread, bytes counted with their times."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.chunks: list[tuple[float, int]] = []
        self.data = bytearray()  # kept for a look at what the terminal showed
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:  # EIO: every slave end is closed, the child is gone
                return
            if not data:
                return
            self.chunks.append((time.monotonic(), len(data)))
            self.data += data

    def bytes_between(self, start: float, end: float) -> int:
        return sum(n for when, n in list(self.chunks) if start <= when < end)

    def close(self) -> None:
        self._thread.join(2)
        os.close(self.fd)


def _start_pty(url: str, data: Path, size: tuple[int, int], *extra: str,
               ) -> tuple[subprocess.Popen[bytes], _Terminal]:
    import fcntl
    import struct
    import termios

    master, slave = os.openpty()
    cols, rows = size
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = env_for(data)
    env.update(TERM="xterm-256color", COLORTERM="truecolor")
    env.pop("NO_COLOR", None)
    for var in ("COLUMNS", "LINES", "TEXTUAL"):  # nothing may override the pty's own size
        env.pop(var, None)
    proc = subprocess.Popen([*SETUI, "--endpoint", url, "--interval", "1", "--data-dir",
                             str(data), "--no-bell", *extra],
                            stdin=slave, stdout=slave, stderr=slave, env=env,
                            start_new_session=True)
    os.close(slave)
    return proc, _Terminal(master)


def _stop_pty(proc: subprocess.Popen[bytes], term: _Terminal) -> tuple[float, float]:
    hwm = peak_rss(proc.pid)
    # "q" as a person would quit; then signals, should the app not exit.
    with contextlib.suppress(OSError):  # the child may already be gone
        os.write(term.fd, b"q")
    cpu, rss = stop_with(proc, 10.0, (0, signal.SIGINT, signal.SIGTERM, signal.SIGKILL))
    term.close()
    return cpu, hwm if hwm is not None else rss


@dataclass
class _Dash:
    """One dashboard of a run and what was measured of it."""

    size: tuple[int, int]
    proc: subprocess.Popen[bytes]
    term: _Terminal | None
    mode: str
    share: float = 0.0
    total: float = 0.0
    rss: float = 0.0
    rate: float | None = None  # bytes/s while idle
    first: int = 0  # bytes of start-up and the first frame

    @property
    def label(self) -> str:
        return f"{self.size[0]}x{self.size[1]}"


def _start_dash(url: str, data: Path, size: tuple[int, int], seconds: float) -> _Dash:
    try:
        # Standalone whatever answers at the agent's socket here: this one polls itself.
        proc, term = _start_pty(url, data, size, "--standalone")
        return _Dash(size, proc, term, f"pty {size[0]}x{size[1]}")
    except (ImportError, OSError):  # no pty on this platform
        proc = subprocess.Popen([sys.executable, "-c", HEADLESS, url, str(data), str(seconds),
                                 str(size[0]), str(size[1])], env=env_for(data),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return _Dash(size, proc, None, f"headless run_test {size[0]}x{size[1]}")


def _measure(case: Case, duration: float, warmup: float,
             ) -> tuple[list[_Dash], dict[str, float], dict[str, float], float]:
    """Run both sizes of dashboard with the references; (dashboards, watch, idle, whole)."""
    work = scratch(f"dashboard-{case.name}")
    path = write_scenario(work / "scenario.json", scenario(case))
    with Emulator(load_scenario(str(path)), speed=1) as emulator:
        url = emulator.url
        dashes = [_start_dash(url, work / f"dash-{w}x{h}", (w, h), duration + warmup)
                  for w, h in SIZES]
        watch_dir = work / "watch-data"
        watch = subprocess.Popen([*SETUI, "watch", "--endpoint", url, "--interval", "1",
                                  "--data-dir", str(watch_dir)], env=env_for(watch_dir),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        idle = subprocess.Popen([sys.executable, "-c", IDLE, str(duration + warmup + 30)],
                                env=env_for(work), stderr=subprocess.DEVNULL)
        procs = [d.proc for d in dashes] + [watch, idle]
        started = time.monotonic()
        time.sleep(warmup)
        t0 = time.monotonic()
        cpu0 = {p.pid: proc_cpu(p.pid) for p in procs}
        time.sleep(duration)
        t1 = time.monotonic()
        cpu1 = {p.pid: proc_cpu(p.pid) for p in procs}
        for dash in dashes:
            if dash.term is not None:
                dash.total, dash.rss = _stop_pty(dash.proc, dash.term)
                (work / f"terminal-{dash.label}.out").write_bytes(bytes(dash.term.data))
                dash.rate = dash.term.bytes_between(t0, t1) / (t1 - t0)
                dash.first = dash.term.bytes_between(started, t0)
            else:
                dash.total, dash.rss = interrupt(dash.proc)
        watch_total, watch_rss = interrupt(watch)
        idle_total, idle_rss = interrupt(idle)
        whole = time.monotonic() - started

    def share(pid: int, total: float) -> float:
        a, b = cpu0[pid], cpu1[pid]
        if a is None or b is None:  # no /proc: the whole run, start-up included
            return total / whole
        return (b - a) / (t1 - t0)

    for dash in dashes:
        dash.share = share(dash.proc.pid, dash.total)
    return (dashes, {"share": share(watch.pid, watch_total), "total": watch_total,
                     "rss": watch_rss},
            {"share": share(idle.pid, idle_total), "rss": idle_rss}, whole)


def run(quick: bool = False) -> list[Row]:
    duration = 10.0 if quick else 60.0
    warmup = 4.0  # start-up and first frame: not idle
    per = f"{duration:.0f} s"
    rows: list[Row] = []
    for case in CASES:
        dashes, watch, idle, whole = _measure(case, duration, warmup)
        refs = f"watch {watch['share'] * 100:.2f} %, idle python {idle['share'] * 100:.2f} %"
        for dash in dashes:
            rows.append(Row(
                f"dashboard idle, 10 events, {case.says}, 1 poll/s, {per} ({dash.mode}): "
                "CPU share of a core", f"{dash.share * 100:.2f} %", refs,
                ratio(dash.share, watch["share"]) + " of watch",
                f"<= {CPU_TARGET * 100:.0f} %", dash.share <= CPU_TARGET))
            if dash.rate is not None:
                rows.append(Row(
                    f"dashboard idle, {case.says}, {per} ({dash.mode}): bytes written to "
                    "the terminal per second (a repaint's cost over SSH)",
                    f"{dash.rate:,.0f} B/s", f"start-up and first frame {dash.first:,} B",
                    ratio(dash.rate, dash.first) + " of it",
                    f"<= {BYTES_TARGET / 1024:.0f} KB/s", dash.rate <= BYTES_TARGET))
        if case.name == "minutes":
            for dash in dashes:
                rows.append(Row(
                    f"dashboard idle, {case.says}, {per} ({dash.mode}): peak RSS",
                    f"{dash.rss:.1f} MB",
                    f"watch {watch['rss']:.1f} MB, idle python {idle['rss']:.1f} MB",
                    ratio(dash.rss, watch["rss"]) + " of watch", f"<= {RSS_TARGET_MB:.0f} MB",
                    dash.rss <= RSS_TARGET_MB))
            small = dashes[0]
            rows.append(Row(
                f"dashboard, {case.says}, {per} ({small.mode}): CPU of the whole run, "
                "start-up included (info)", f"{small.total:.2f} s in {whole:.0f} s",
                f"watch {watch['total']:.2f} s", ratio(small.total, watch["total"]), "-",
                None))
    return rows
