"""Small helpers shared by the benchmarks: timing, child processes, machine facts."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

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
