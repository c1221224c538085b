"""The login line: what it adds to an SSH login (docs/operating.md, "The login line").

A real agent on the emulator with an event of this VM; the hook as `setui service
install` writes it, sourced by an interactive `sh` as a login's /etc/profile would. Runs
interleaved, so every figure and its reference see the same neighbours:

- the hook sourced, the agent answering with the event (the lines printed), beside
  `sh -i -c :` (a login without it): the difference is what a login pays;
- the same beside `python -c pass` with the same interpreter, the task's reference;
- the hook with no agent at all (no socket), and with a socket that listens and never
  answers (the budget's bound: the worst a login pays).
"""

from __future__ import annotations

import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import ROOT, SETUI, Row, env_for, ms, ratio, scratch, write_scenario

VM = "bench-vm-0"
EVENT = "00000000-0000-4000-8000-000000000001"


def _wall(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True,
                          stdin=subprocess.DEVNULL)
    return time.perf_counter() - start, done.stdout


def _p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[98]


def _agent(work: Path) -> tuple[subprocess.Popen[str], Path, object]:
    from setui.api.client import AgentClient, ApiError
    from setui.emulator.scenario import load_scenario
    from setui.emulator.server import Emulator

    scenario = write_scenario(work / "scenario.json", {
        "name": "login-line", "vm_name": VM, "tail": 3600,
        "events": [{"id": EVENT, "type": "Reboot", "at": 0, "notice": "15m"}]})
    emu = Emulator(load_scenario(str(scenario)), speed=1.0)
    emu.start()
    sock = work / "api.sock"
    env = env_for(work / "data")
    env["SETUI_SOCKET"] = str(sock)
    proc = subprocess.Popen([*SETUI, "agent", "--endpoint", emu.url, "--interval", "1"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with AgentClient.connect(sock, timeout=2) as client:
                if client.hello.agent.vm_name == VM and \
                        client.state()[0].state.document is not None:
                    return proc, sock, emu
        except ApiError:
            pass
        time.sleep(0.1)
    proc.kill()
    emu.stop()
    raise RuntimeError("the agent did not answer with its first document in 60 s")


def run(quick: bool = False) -> list[Row]:
    from setui.install.loginhook import render_hook

    runs = 60 if quick else 300
    work = scratch("login-line")
    hook = work / "setui-login.sh"
    hook.write_text(render_hook(sys.executable, ROOT / "src"))
    proc, sock, emu = _agent(work)
    silent = work / "silent.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(silent))
    listener.listen(1024)
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(work)}
    cases = {
        "agent": (["sh", "-i", "-c", f". {hook}"], {**base, "SETUI_SOCKET": str(sock)}),
        "login": (["sh", "-i", "-c", ":"], base),
        "python": ([sys.executable, "-c", "pass"], base),
        "absent": (["sh", "-i", "-c", f". {hook}"],
                   {**base, "SETUI_SOCKET": str(work / "absent.sock")}),
        "silent": (["sh", "-i", "-c", f". {hook}"], {**base, "SETUI_SOCKET": str(silent)}),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    said = 0
    try:
        for number in range(runs):
            for name, (argv, env) in cases.items():
                if name == "silent" and number >= runs // 5:
                    continue  # bounded by the budget: fewer runs tell as much
                took, out = _wall(argv, env)
                times[name].append(took)
                said += name == "agent" and "setui: Reboot Scheduled" in out
    finally:
        listener.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        emu.stop()  # type: ignore[attr-defined]
    med = {name: statistics.median(values) for name, values in times.items()}
    p99 = {name: _p99(values) for name, values in times.items()}
    added, added_p99 = med["agent"] - med["login"], p99["agent"] - med["login"]
    shared = "machine shared with other work"
    return [
        Row(f"login line, agent answering with 1 event ({said} of {runs} runs printed it): "
            f"hook sourced by `sh -i`, median of {runs} ({shared})", ms(med["agent"]),
            f"python -c pass {ms(med['python'])}", ratio(med["agent"], med["python"]),
            "-", None),
        Row(f"login line, agent answering: p99 of {runs}", ms(p99["agent"]),
            f"python -c pass p99 {ms(p99['python'])}", ratio(p99["agent"], p99["python"]),
            "-", None),
        Row("login line: added to a login, median (hook sourced minus `sh -i -c :`)",
            ms(added), f"`sh -i -c :` {ms(med['login'])}; python -c pass "
            f"{ms(med['python'])}", ratio(added, med["python"]), "<= 100 ms",
            added <= 0.1),
        Row("login line: added to a login, p99 (hook's p99 minus `sh -i -c :` median)",
            ms(added_p99), f"python -c pass p99 {ms(p99['python'])}",
            ratio(added_p99, p99["python"]), "-", None),
        Row(f"login line, no socket: hook sourced, median of {runs} (p99)",
            f"{ms(med['absent'])} ({ms(p99['absent'])})",
            f"python -c pass {ms(med['python'])}", ratio(med["absent"], med["python"]),
            "-", None),
        Row(f"login line, a socket that never answers: median of {len(times['silent'])} "
            "(p99): the budget's bound", f"{ms(med['silent'])} ({ms(p99['silent'])})",
            f"python -c pass {ms(med['python'])}", ratio(med["silent"], med["python"]),
            "-", None),
    ]


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from run import table

    print(table(run(quick="--quick" in sys.argv)))
