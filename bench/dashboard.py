"""The dashboard idle with 10 events at 1 poll/s for 60 s: CPU share of one core, peak RSS.

The dashboard runs as a real `setui` process in a pseudo-terminal of 80x24, so Textual's
own terminal driver (escape sequences, the writer thread, input parsing) is counted; the
output is drained as a terminal would, and its byte rate is reported because on a slow
SSH link that is what a repaint costs. Should a pty not be available, the app runs
headless (`App.run_test`) in a child interpreter instead, and the figure says so.

The CPU share is taken over the idle part of the run (from `warmup` seconds after start
to the end), from /proc; the whole run, start-up included, is reported beside it.
References, in the same run and at the same time: `setui watch` polling the same
emulator at the same rate, and the same interpreter doing nothing but asyncio.sleep.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
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
RSS_TARGET_MB = 120.0
SIZE = (80, 24)

IDLE = "import asyncio, sys; asyncio.run(asyncio.sleep(float(sys.argv[1])))"

# The fallback without a pty: the app as the first-frame benchmark runs it, left idle.
HEADLESS = """
import asyncio, sys
from setui.config import Config
from setui.core.client import ImdsClient
from setui.store import Store
from setui.ui.app import SetuiApp

async def main():
    url, data, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    app = SetuiApp(client=ImdsClient(url), config=Config(endpoint=url, data_dir=data),
                   store=Store.open_dir(data), poll=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await asyncio.sleep(seconds)

asyncio.run(main())
"""


def scenario() -> dict[str, object]:
    """Ten events with a week's notice: nothing appears, starts or ends during the run,
    so every repaint is the dashboard's own (countdowns, the clock), not news."""
    kinds = ["Freeze", "Reboot", "Redeploy", "Terminate", "Reboot"]
    return {"name": "bench-dashboard", "vm_name": "vm-0", "events": [
        {"id": guid(i), "type": kinds[i % 5], "notice": f"{7 - i % 3}d",
         "resources": [f"vm-{i % 4}", f"vm-{i + 4}"], "duration": [5, -1, 0, 30][i % 4],
         "source": "User" if i % 3 == 0 else "Platform"}
        for i in range(10)]}


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


def _start_pty(url: str, data: Path) -> tuple[subprocess.Popen[bytes], _Terminal]:
    import fcntl
    import struct
    import termios

    master, slave = os.openpty()
    cols, rows = SIZE
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = env_for(data)
    env.update(TERM="xterm-256color", COLORTERM="truecolor")
    env.pop("NO_COLOR", None)
    for var in ("COLUMNS", "LINES", "TEXTUAL"):  # nothing may override the pty's own size
        env.pop(var, None)
    proc = subprocess.Popen([*SETUI, "--endpoint", url, "--interval", "1", "--data-dir",
                             str(data), "--no-bell"],
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


def run(quick: bool = False) -> list[Row]:
    duration = 10.0 if quick else 60.0
    warmup = 4.0  # start-up and first frame: not idle
    work = scratch("dashboard")
    path = write_scenario(work / "scenario.json", scenario())
    with Emulator(load_scenario(str(path)), speed=1) as emulator:
        url = emulator.url
        term: _Terminal | None = None
        try:
            dash, term = _start_pty(url, work / "dash-data")
            mode = "pty 80x24"
        except (ImportError, OSError):  # no pty on this platform
            dash = subprocess.Popen([sys.executable, "-c", HEADLESS, url, str(work / "dash-data"),
                                     str(duration + warmup)], env=env_for(work / "dash-data"),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            mode = "headless run_test"
        watch_dir = work / "watch-data"
        watch = subprocess.Popen([*SETUI, "watch", "--endpoint", url, "--interval", "1",
                                  "--data-dir", str(watch_dir)], env=env_for(watch_dir),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        idle = subprocess.Popen([sys.executable, "-c", IDLE, str(duration + warmup + 30)],
                                env=env_for(work), stderr=subprocess.DEVNULL)
        started = time.monotonic()
        time.sleep(warmup)
        t0 = time.monotonic()
        cpu0 = {p.pid: proc_cpu(p.pid) for p in (dash, watch, idle)}
        time.sleep(duration)
        t1 = time.monotonic()
        cpu1 = {p.pid: proc_cpu(p.pid) for p in (dash, watch, idle)}
        if term is not None:
            dash_total, dash_rss = _stop_pty(dash, term)
            (work / "terminal.out").write_bytes(bytes(term.data))
        else:
            dash_total, dash_rss = interrupt(dash)
        watch_total, watch_rss = interrupt(watch)
        idle_total, idle_rss = interrupt(idle)
        ended = time.monotonic()

    def share(pid: int, total: float, whole: float) -> float:
        a, b = cpu0[pid], cpu1[pid]
        if a is None or b is None:  # no /proc: the whole run, start-up included
            return total / whole
        return (b - a) / (t1 - t0)

    whole = ended - started
    dash_share = share(dash.pid, dash_total, whole)
    watch_share = share(watch.pid, watch_total, whole)
    idle_share = share(idle.pid, idle_total, whole)
    per = f"{duration:.0f} s"
    rows = [
        Row(f"dashboard idle, 10 events, 1 poll/s, {per} ({mode}): CPU share of a core",
            f"{dash_share * 100:.2f} %",
            f"watch {watch_share * 100:.2f} %, idle python {idle_share * 100:.2f} %",
            ratio(dash_share, watch_share) + " of watch", f"<= {CPU_TARGET * 100:.0f} %",
            dash_share <= CPU_TARGET),
        Row(f"dashboard idle, {per} ({mode}): peak RSS", f"{dash_rss:.1f} MB",
            f"watch {watch_rss:.1f} MB, idle python {idle_rss:.1f} MB",
            ratio(dash_rss, watch_rss) + " of watch", f"<= {RSS_TARGET_MB:.0f} MB",
            dash_rss <= RSS_TARGET_MB),
        Row(f"dashboard, {per} ({mode}): CPU of the whole run, start-up included (info)",
            f"{dash_total:.2f} s in {whole:.0f} s", f"watch {watch_total:.2f} s",
            ratio(dash_total, watch_total), "-", None),
    ]
    if term is not None:
        rate = term.bytes_between(t0, t1) / (t1 - t0)
        first = term.bytes_between(started, t0)
        rows.append(Row(f"dashboard idle, {per}: bytes written to the terminal per second "
                        "(info: repaint cost over SSH)", f"{rate:,.0f} B/s",
                        f"start-up and first frame {first:,} B", "-", "-", None))
    return rows
