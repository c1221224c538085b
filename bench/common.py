"""Small helpers shared by the benchmarks: timing, child processes, machine facts."""

from __future__ import annotations

import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SETUI = [sys.executable, "-m", "setui.cli"]


@dataclass
class Row:
    figure: str
    measured: str
    reference: str
    ratio: str
    target: str
    ok: bool | None  # None: no pass/fail (informational)


def best_of(fn: Callable[[], object], *, repeat: int = 7, number: int = 0) -> float:
    """Seconds per call: the best of `repeat` batches (the least disturbed by neighbours)."""
    if number <= 0:
        number = 1
        start = time.perf_counter()
        fn()
        once = time.perf_counter() - start
        number = max(1, int(0.05 / max(once, 1e-7)))
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return min(times)


def p95(values: list[float]) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=20, method="inclusive")[18]


def child_usage(proc: subprocess.Popen[bytes] | subprocess.Popen[str]) -> tuple[float, float]:
    """Wait for a child; its (CPU seconds, peak RSS in MB) from the kernel's accounting."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{platform.system()} {platform.release()}, {cpu}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()}")


def env_for(data_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["SETUI_DATA_DIR"] = str(data_dir)
    env["SETUI_CONFIG"] = str(data_dir / "none.toml")
    env["PYTHONUNBUFFERED"] = "1"
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        env.pop(var, None)
    return env


# -- scratch space, scenarios, child processes ---------------------------------------------
WORK = ROOT / "bench" / ".work"  # gitignored; on the real disk, so fsyncs cost what they do


def wait_for_match(path: Path, pattern: str, deadline: float) -> re.Match[str] | None:
    """The first match of ``pattern`` (multiline) in a child's output file, read again as
    the child writes it until ``deadline`` (time.monotonic); None when it never came."""
    while time.monotonic() < deadline:
        found = re.search(pattern, path.read_text(), re.MULTILINE)
        if found:
            return found
        time.sleep(0.05)
    return None


def scratch(prefix: str) -> Path:
    """A fresh directory under bench/.work. The previous run's is removed first and this
    one kept after the run, for a look at what happened, without piling up (the store
    benchmark's database is 100 MB)."""
    import shutil
    import tempfile

    WORK.mkdir(parents=True, exist_ok=True)
    for old in WORK.glob(f"{prefix}-*"):
        shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}-", dir=WORK))


def write_scenario(path: Path, data: dict[str, object]) -> Path:
    """A scenario file (JSON: the same structure as TOML, and exact for any string)."""
    import json

    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return path


def guid(n: int) -> str:
    """A GUID-shaped EventId that says which event of a benchmark it is."""
    return f"00000000-0000-4000-8000-{n:012d}"


def proc_cpu(pid: int) -> float | None:
    """CPU seconds a running process has used so far (Linux /proc), or None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # Fields 14 and 15 of stat(5) (utime, stime), counted after the ")" of the name.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sched_cpu(pid: int) -> float | None:
    """CPU seconds of every thread of a running process, in nanoseconds' precision
    (/proc/PID/task/*/schedstat), or None elsewhere: /proc/PID/stat counts in ticks of
    10 ms, too coarse for a figure a few milliseconds a poll."""
    threads = sched_cpu_by_thread(pid)
    return None if threads is None else sum(threads.values())


def sched_cpu_by_thread(pid: int) -> dict[int, float] | None:
    """CPU seconds of each thread of a running process, by thread id (the main thread's
    is the pid), as :func:`sched_cpu` reads them; None elsewhere."""
    try:
        return {int(task.name): int((task / "schedstat").read_text().split()[0]) / 1e9
                for task in Path(f"/proc/{pid}/task").iterdir()}
    except (OSError, ValueError, IndexError):
        return None


def sched_threads(pid: int) -> dict[int, tuple[float, int]]:
    """Every thread of a running process: its CPU seconds and how many times it was
    run (/proc/PID/task/TID/schedstat: nanoseconds, then the count of its timeslices,
    about one per wake for a thread that sleeps). Empty without /proc."""
    threads: dict[int, tuple[float, int]] = {}
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            fields = (task / "schedstat").read_text().split()
            threads[int(task.name)] = (int(fields[0]) / 1e9, int(fields[2]))
    except (OSError, ValueError, IndexError):
        return {}
    return threads


# The floor of a 10 Hz tick, whatever runs it: a wake of the kernel's ten times a second.
# The same loop as the heartbeat's (agent.heartbeat: sleep, then read the clocks), bare.
BARE_TICK = [sys.executable, "-c",
             "import time\nwhile True:\n    time.sleep(0.1)\n    time.monotonic()"]
PERL_TICK = ["perl", "-e", "select(undef, undef, undef, 0.1) while 1"]
# The floor of a poll: an event loop that wakes once a second, writes a GET on one
# kept-alive connection and reads the answer by its Content-Length, nothing parsed.
FLOOR_AGENT = "bench-floor/1"
_FLOOR_POLL = """\
import asyncio, sys
from urllib.parse import urlsplit
url, agent = urlsplit(sys.argv[1]), sys.argv[2]
ask = (f"GET {url.path}?{url.query} HTTP/1.1\\r\\nHost: {url.netloc}\\r\\n"
       f"Metadata: true\\r\\nUser-Agent: {agent}\\r\\n\\r\\n").encode()
async def main():
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    loop = asyncio.get_running_loop()
    start, k = loop.time(), 0
    while True:
        k += 1
        await asyncio.sleep(start + k - loop.time())
        writer.write(ask)
        head = await reader.readuntil(b"\\r\\n\\r\\n")
        size = [line for line in head.lower().split(b"\\r\\n")
                if line.startswith(b"content-length:")][0].split(b":")[1]
        await reader.readexactly(int(size))
asyncio.run(main())
"""


def floor_poll(url: str) -> list[str]:
    """argv of the floor of a poll, polling ``url`` (the events document's) until killed."""
    return [sys.executable, "-c", _FLOOR_POLL, url, FLOOR_AGENT]


def peak_rss(pid: int) -> float | None:
    """A running process's peak RSS in MB (VmHWM), or None without /proc.

    Preferred to wait4's ru_maxrss: Linux carries the high-water mark over exec, so a
    child forked from a big parent (this process after the 100,000-row store fill)
    reports at least the parent's size there. VmHWM belongs to the exec'd image alone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def interrupt(proc: subprocess.Popen[bytes] | subprocess.Popen[str],
              grace: float = 10.0) -> tuple[float, float]:
    """Stop a child like Ctrl-C does and return its (CPU seconds, peak RSS MB).

    SIGINT first; SIGTERM, then SIGKILL if it is still there after ``grace``: a child
    started from a shell that ignores SIGINT (a background job) inherits the ignoring.
    Reaped with wait4 so the kernel's accounting of the child is not lost to poll()."""
    import signal

    hwm = peak_rss(proc.pid)  # taken while it runs: stopping adds nothing worth counting
    cpu, rss = stop_with(proc, grace, (signal.SIGINT, signal.SIGTERM, signal.SIGKILL))
    return cpu, hwm if hwm is not None else rss


def stop_with(proc: subprocess.Popen[bytes] | subprocess.Popen[str], grace: float,
          signals: tuple[int, ...]) -> tuple[float, float]:
    for sig in signals:
        try:
            os.kill(proc.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                proc.returncode = os.waitstatus_to_exitcode(status)
                return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024
            time.sleep(0.05)
    return child_usage(proc)


class LineStamps:
    """Reads a child's text output on a thread; every line with time.time() when read."""

    def __init__(self, stream: object) -> None:
        import threading

        self.lines: list[tuple[float, str]] = []
        self._stream = stream
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self._stream:  # type: ignore[attr-defined]
            self.lines.append((time.time(), line.rstrip("\n")))

    def join(self, timeout: float = 5.0) -> list[tuple[float, str]]:
        self._thread.join(timeout)
        return list(self.lines)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def ratio(measured: float, reference: float) -> str:
    return f"{measured / reference:.2f}x" if reference > 0 else "-"


# -- the service documents' own Python sample ----------------------------------------------
SAMPLE = ROOT / "tests" / "emulator" / "samples" / "azure_sample.py"
SAMPLE_URL = '"http://169.254.169.254/metadata/scheduledevents"'
EVENTS_PATH = "/metadata/scheduledevents"


def sample_script(url: str, folder: Path) -> Path:
    """The documents' sample, unchanged but for its URL (as tests/emulator does it)."""
    text = SAMPLE.read_text(encoding="utf-8")
    if text.count(SAMPLE_URL) != 1:
        raise RuntimeError(f"{SAMPLE} no longer holds the URL {SAMPLE_URL} exactly once")
    script = folder / "azure_sample.py"
    script.write_text(text.replace(SAMPLE_URL, f'"{url}{EVENTS_PATH}"'), encoding="utf-8")
    return script


def sample_argv(script: Path) -> tuple[list[str], str]:
    """argv and stdin for the sample polling until stopped: every "1" it reads polls once a
    second until the incarnation changes, then it asks again; thousands are queued."""
    return [sys.executable, str(script)], "1\n" * 20_000


def start_sample(url: str, work: Path) -> tuple[subprocess.Popen[str], Any]:
    """The documents' sample polling ``url`` until stopped, its output in
    ``work/sample.out``: the process and that file (the caller closes it)."""
    argv, feed = sample_argv(sample_script(url, work))
    out = (work / "sample.out").open("w")
    proc = subprocess.Popen(argv, env=sample_env(work), stdin=subprocess.PIPE, stdout=out,
                            stderr=subprocess.STDOUT, text=True)
    assert proc.stdin is not None
    proc.stdin.write(feed)
    proc.stdin.close()
    return proc, out


def sample_env(data_dir: Path) -> dict[str, str]:
    env = env_for(data_dir)
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1"  # requests honours proxies from the env
    return env


# -- driving a Textual app in-process, without the Pilot's waits -----------------------------
# Pilot.press waits for the whole process to look idle (sleeps of 20 ms and more) after
# every key, which would be counted in any latency measured around it. A key is posted
# as the terminal driver's input thread does, and frames are noted as the app hands them
# to the driver (headless, they are composed and rendered all the same).
def post_key(app: Any, key: str) -> None:
    from textual import events

    char = {"question_mark": "?", "escape": None}.get(key, key if len(key) == 1 else None)
    app.post_message(events.Key(key, char))


class FrameLog:
    """(time.perf_counter(), screen) for every frame the app displays."""

    def __init__(self, app: Any) -> None:
        self.frames: list[tuple[float, Any]] = []
        original = app._display

        def display(screen: Any, renderable: Any) -> None:
            original(screen, renderable)
            if renderable is not None:
                self.frames.append((time.perf_counter(), screen))

        app._display = display

    def first_since(self, mark: int, predicate: Callable[[Any], bool]) -> float | None:
        return next((t for t, screen in self.frames[mark:] if predicate(screen)), None)


async def until(predicate: Callable[[], object], timeout: float = 20.0,
                step: float = 0.001) -> None:
    """Wait, in the app's loop, until ``predicate()`` is true."""
    import asyncio

    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the app did not get there in time")
        await asyncio.sleep(step)


def run_parts(suite: str, parts: Sequence[Callable[[bool], list[Row]]],
              quick: bool) -> list[Row]:
    """Every part's rows; a part that fails is a FAILED row, and never hides the others."""
    rows: list[Row] = []
    for part in parts:
        try:
            rows.extend(part(quick))
        except Exception as exc:
            rows.append(Row(f"{suite}/{part.__name__}: FAILED", repr(exc)[:80], "-", "-", "-",
                            False))
    return rows
