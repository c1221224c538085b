"""Metrics: the names and labels of the contract, bounded series, the textfile; the
shipped rules under `promtool test rules`; a real Prometheus scraping a running agent."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from agent_helpers import EVENT_ID, agent_env, start_agent, stop

from children import wait_until
from setui.emulator.scenario import parse_scenario
from setui.emulator.server import Emulator
from setui.store import Store

pytestmark = pytest.mark.slow  # starts processes: the slow tier (docs/testing.md)

CONTRIB = Path(__file__).parents[2] / "contrib" / "prometheus"
METRICS_LINE = re.compile(r"setui agent: metrics at (http://127\.0\.0\.1:\d+/metrics)")
SHORT_FREEZE = """
name = "short-freeze"
vm_name = "vm-a"
tail = 1

[[events]]
id = "E-FREEZE"
type = "Freeze"
at = 2
notice = "20s"
duration = 2
resources = ["vm-a", "vm-b"]
"""


def _metrics_url(proc: subprocess.Popen[str]) -> str:
    assert proc.stderr is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        found = METRICS_LINE.search(line)
        if found:
            return found.group(1)
        if not line and proc.poll() is not None:
            break
    pytest.fail("the agent never said where its metrics are")


def _series(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(name + "{")]


def test_event_series_carry_the_contract_labels_and_leave_with_the_event(
        tmp_path: Path) -> None:
    emu = Emulator(parse_scenario(SHORT_FREEZE), speed=4.0,
                   identity={"vmScaleSetName": "ss", "zone": "3", "location": "westeurope"})
    emu.start()
    textfile = tmp_path / "setui.prom"
    proc, lines = start_agent(emu.url, tmp_path, "--metrics", "127.0.0.1:0",
                              "--metrics-file", str(textfile))
    try:
        url = _metrics_url(proc)
        wait_until(lambda: len(_series(httpx.get(url).text, "azure_scheduledevent_event"))
                   == 2, 30, "one series per resource of the event")
        text = httpx.get(url).text
        mine, other = sorted(_series(text, "azure_scheduledevent_event"),
                             key=lambda s: 'resource="vm-b"' in s)
        for label in ('vm_name="vm-a"', 'vm_scale_set="ss"', 'placement_group=""',
                      'resource_group=""', 'subscription_id=""', 'zone="3"',
                      'eventID="E-FREEZE"', 'eventType="Freeze"', 'eventStatus="Scheduled"',
                      'eventSource="Platform"', 'resourceType="virtualMachine"',
                      'resource="vm-a"', 'this_vm="true"', 'approved_by=""', 'notBefore="'):
            assert label in mine, (label, mine)
        assert 'this_vm="false"' in other and 'resource="vm-b"' in other
        assert float(mine.rsplit(" ", 1)[1]) > 1e9  # NotBefore as Unix seconds
        assert _series(text, "azure_scheduledevent_document_incarnation")
        assert 'location="westeurope"' in _series(text, "setui_vm_info")[0]
        assert _series(text, "setui_build_info")
        assert 'setui_polls_total{outcome="ok"}' in text
        last = _series(text, "setui_last_success_timestamp_seconds")[0]
        assert float(last.rsplit(" ", 1)[1]) > 1e9
        # Gone from the document, gone from the metrics.
        lines.until(lambda line: '"change": "completed"' in line
                    or '"change": "gone"' in line, 60, "the event to leave")
        wait_until(lambda: not _series(httpx.get(url).text, "azure_scheduledevent_event"),
                   30, "its series to go")
        wait_until(textfile.exists, 30, "the textfile")
    finally:
        assert stop(proc) == 0
        emu.stop()
    content = textfile.read_text()
    assert "setui_polls_total" in content
    for line in content.splitlines():
        if line and not line.startswith("#"):
            assert len(line.rsplit("} ", 1)[-1].split()) == 1, f"a timestamp in {line!r}"
    assert oct(textfile.stat().st_mode & 0o777) == "0o644"
    assert not list(tmp_path.glob(".setui.prom.*"))  # no temporary left


def test_a_persons_approval_shows_in_approved_by(tmp_path: Path, emulator: Emulator) -> None:
    """The agent reads who approved the current events from the audit log when the
    document changes: an approval made by a person with `setui approve` (another process,
    the same store) is in the event's series once the event has started."""
    proc, lines = start_agent(emulator.url, tmp_path, "--metrics", "127.0.0.1:0")
    try:
        url = _metrics_url(proc)
        lines.until(lambda line: '"change": "appeared"' in line, 30, "the event")
        assert 'approved_by=""' in _series(httpx.get(url).text,
                                           "azure_scheduledevent_event")[0]
        done = subprocess.run(
            [sys.executable, "-m", "setui.cli", "approve", "--endpoint", emulator.url,
             EVENT_ID, "--yes"], capture_output=True, text=True, timeout=60,
            env=dict(os.environ, SETUI_DATA_DIR=str(tmp_path / "data")),
            stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr
        with Store.open_dir(tmp_path / "data", readonly=True) as store:
            who = store.approvals([EVENT_ID])[EVENT_ID].user
        lines.until(lambda line: '"change": "started"' in line, 30, "the event to start")
        wait_until(lambda: any(f'approved_by="{who}"' in series and 'eventStatus="Started"'
                               in series for series in _series(
                                   httpx.get(url).text, "azure_scheduledevent_event")),
                   10, "the approver in the event's series")
    finally:
        assert stop(proc) == 0


@pytest.mark.skipif(shutil.which("promtool") is None,
                    reason="promtool is not on PATH (Debian: apt-get install prometheus)")
def test_the_shipped_rules_pass_promtool_test_rules() -> None:
    done = subprocess.run(["promtool", "test", "rules", "setui-rules.test.yml"], cwd=CONTRIB,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout
    check = subprocess.run(["promtool", "check", "rules", "setui-rules.yml"], cwd=CONTRIB,
                           capture_output=True, text=True, timeout=120, check=False)
    assert check.returncode == 0, check.stdout + check.stderr


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def prometheus_binary() -> str:
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("prometheus is not on PATH (Debian: apt-get install prometheus)")
    return binary


@contextlib.contextmanager
def _prometheus(binary: str, target: str, tmp_path: Path) -> Iterator[str]:
    port = _free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"rule_files:\n  - {CONTRIB / 'setui-rules.yml'}\n"
        "scrape_configs:\n  - job_name: setui\n    static_configs:\n"
        f"      - targets: ['{target}']\n")
    log = tmp_path / "prometheus.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=sink)
    base = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            return httpx.get(f"{base}/-/ready", timeout=2).status_code == 200
        except httpx.HTTPError:
            return proc.poll() is not None
    try:
        wait_until(ready, 60, "Prometheus to be ready")
        assert proc.poll() is None, log.read_text()[-2000:]
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_a_real_prometheus_scrapes_the_agent(tmp_path: Path, emulator: Emulator,
                                             prometheus_binary: str) -> None:
    proc, _lines = start_agent(emulator.url, tmp_path, "--metrics", "127.0.0.1:0",
                               env=agent_env(tmp_path))
    try:
        url = _metrics_url(proc)
        target = url.removeprefix("http://").removesuffix("/metrics")
        with _prometheus(prometheus_binary, target, tmp_path) as base:
            query = '{__name__=~"azure_scheduledevent_event|setui_last_success_timestamp_seconds"}'
            found: list[dict[str, Any]] = []

            def scraped() -> bool:
                answer = httpx.get(f"{base}/api/v1/query", params={"query": query}, timeout=5)
                found[:] = answer.json()["data"]["result"]
                return any(r["metric"]["__name__"] == "azure_scheduledevent_event"
                           for r in found)

            wait_until(scraped, 60, "Prometheus to have the agent's event series")
            rules = httpx.get(f"{base}/api/v1/rules", timeout=5).json()
    finally:
        assert stop(proc) == 0
    event = next(r["metric"] for r in found
                 if r["metric"]["__name__"] == "azure_scheduledevent_event")
    assert event["eventID"] == EVENT_ID and event["job"] == "setui"
    assert event["vm_scale_set"] == "web-ss" and event["this_vm"] == "true"
    assert event["eventSource"] == "User" and event["instance"] == target
    names = {rule["name"] for group in rules["data"]["groups"] for rule in group["rules"]}
    assert "AzureScheduledEventSoon" in names, json.dumps(rules)[:500]


