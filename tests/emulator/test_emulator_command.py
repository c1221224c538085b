"""`setui emulator` / `python -m setui.emulator`: URL first, logs on stderr, clean exits."""

from __future__ import annotations

import argparse
import io
import os
import signal
import subprocess
import threading
from pathlib import Path

import httpx
import pytest

from setui.emulator.command import add_arguments, run
from tests.support.children import PYTHON
from tests.support.emulator_helpers import EVENTS, HEADERS, PARAMS

POSIX = os.name == "posix"


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(_args(*argv), out=out, err=err, stop=threading.Event())
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(("argv", "needle"), [
    (["--speed", "0"], "--speed"),
    (["--speed", "nan"], "--speed"),
    (["--port", "70000"], "--port"),
    (["--faults", "500=2"], "--faults: 500"),
    (["--faults", "wat=1"], "unknown fault"),
    (["--scenario", "no-such-thing"], "no-such-thing"),
    (["--vm-name", " "], "--vm-name"),
])
def test_bad_arguments_exit_2_with_a_message(argv: list[str], needle: str) -> None:
    code, out, err = _run(*argv)
    assert code == 2
    assert out == ""
    assert needle in err and err.startswith("setui emulator: ")


def test_bad_scenario_file_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[[events]]\ntype = 'Nope'\n", encoding="utf-8")
    code, _, err = _run("--scenario", str(path))
    assert code == 2
    assert str(path) in err and "events[0].type" in err


def test_list_scenarios() -> None:
    code, out, _ = _run("--list-scenarios")
    assert code == 0
    names = [line.split()[0] for line in out.splitlines()]
    assert {"live-migration", "busy", "quiet"} <= set(names)


def test_run_prints_the_url_first_and_logs_requests_and_changes() -> None:
    out, err = io.StringIO(), io.StringIO()
    stop = threading.Event()
    result: list[int] = []
    args = _args("--scenario", "spot-eviction", "--speed", "50", "--vm-name", "spot-x",
                 "--etag", "--faults", "seed=1")
    thread = threading.Thread(target=lambda: result.append(run(args, out=out, err=err,
                                                               stop=stop)))
    thread.start()
    try:
        for _ in range(100):
            if out.getvalue().endswith("\n"):
                break
            threading.Event().wait(0.02)
        url = out.getvalue().splitlines()[0]
        assert url.startswith("http://127.0.0.1:")
        with httpx.Client(trust_env=False, timeout=5) as http:
            response = http.get(url + EVENTS, headers=HEADERS, params=PARAMS)
            assert response.status_code == 200 and "etag" in response.headers
        for _ in range(250):  # 20 scenario seconds after scenario second 0 (<= 1 s away)
            if "Preempt Scheduled" in err.getvalue():
                break
            threading.Event().wait(0.02)
    finally:
        stop.set()
        thread.join(10)
    assert result == [0]
    assert out.getvalue() == url + "\n"
    log = err.getvalue()
    assert "serving scenario 'spot-eviction'" in log and "vm 'spot-x'" in log
    assert f"GET {EVENTS}?api-version=2020-07-01 -> 200" in log
    assert "incarnation 1: no events" in log
    assert "Preempt Scheduled" in log
    assert log.rstrip().endswith("stopped")


@pytest.mark.slow
@pytest.mark.skipif(not POSIX, reason="signals to a child process are POSIX-only here")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_module_prints_its_url_and_exits_0_on_a_signal(signum: int) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with subprocess.Popen(
            [*PYTHON, "-m", "setui.emulator", "--port", "0", "--scenario", "quiet"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as proc:
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().strip()
            assert url.startswith("http://127.0.0.1:")
            with httpx.Client(trust_env=False, timeout=5) as http:
                response = http.get(url + EVENTS, headers=HEADERS, params=PARAMS)
            assert response.json() == {"DocumentIncarnation": 1, "Events": []}
            proc.send_signal(signum)
            rest, log = proc.communicate(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0
    assert rest == ""  # nothing but the URL on stdout
    assert "Traceback" not in log
    assert "GET /metadata/scheduledevents?api-version=2020-07-01 -> 200" in log


@pytest.mark.slow
def test_vm_name_renames_the_scenarios_vm_wherever_the_scenario_names_it() -> None:
    # busy's VM is web-0, in two events' Resources; a rehearsal under another name must
    # find that name in Resources, or a `this_vm = true` rule never matches.
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with subprocess.Popen(
            [*PYTHON, "-m", "setui.emulator", "--scenario", "busy", "--speed", "20",
             "--vm-name", "APP-7"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env) as proc:
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().strip()
            with httpx.Client(trust_env=False, timeout=5) as http:
                name = http.get(url + "/metadata/instance/compute/name", headers=HEADERS,
                                params={"api-version": "2021-02-01", "format": "text"})
                seen: set[tuple[str, ...]] = set()
                for _ in range(400):  # the first Freeze (web-0, web-1) is 10 s in: 0.5 s
                    document = http.get(url + EVENTS, headers=HEADERS, params=PARAMS).json()
                    seen |= {tuple(e["Resources"]) for e in document["Events"]}
                    if ("APP-7", "web-1") in seen:
                        break
                    threading.Event().wait(0.02)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    assert name.text == "APP-7"
    assert ("APP-7", "web-1") in seen, seen
    assert not any("web-0" in resources for resources in seen), seen
