"""Metrics: the names and labels of the contract, bounded series, the textfile; the
shipped rules under `promtool test rules`; a real Prometheus scraping a running agent."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest

from setui.emulator.scenario import parse_scenario
from setui.emulator.server import Emulator
from setui.store import Store
from tests.support.agent_helpers import EVENT_ID, agent_env, metrics_url, start_agent, stop
from tests.support.children import wait_until

pytestmark = pytest.mark.slow  # starts processes: the slow tier (docs/testing.md)

CONTRIB = Path(__file__).parents[2] / "contrib" / "prometheus"
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

[[events]]
id = "E-NEIGHBOURS"
type = "Freeze"
at = 2
notice = "20s"
duration = 2
resources = ["vm-b", "vm-c", "vm-d"]
"""


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
        url = metrics_url(proc)
        wait_until(lambda: len(_series(httpx.get(url).text, "azure_scheduledevent_event"))
                   == 2, 30, "one series per event")
        text = httpx.get(url).text
        mine, other = sorted(_series(text, "azure_scheduledevent_event"),
                             key=lambda s: "E-NEIGHBOURS" in s)
        for label in ('vm_name="vm-a"', 'vm_scale_set="ss"', 'placement_group=""',
                      'resource_group=""', 'subscription_id=""', 'zone="3"',
                      'eventID="E-FREEZE"', 'eventType="Freeze"', 'eventStatus="Scheduled"',
                      'eventSource="Platform"', 'resourceType="virtualMachine"',
                      'resource="vm-a"', 'this_vm="true"', 'approved_by=""', 'notBefore="',
                      'resources_listed="2"'):
            assert label in mine, (label, mine)
        # Neighbours' events: one series, no VM named, the VMs it lists counted.
        for label in ('eventID="E-NEIGHBOURS"', 'resource=""', 'this_vm="false"',
                      'resources_listed="3"'):
            assert label in other, (label, other)
        assert "vm-b" not in text and "vm-c" not in text
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


def test_a_group_of_vms_exports_one_series_per_event_not_one_per_listed_vm() -> None:
    """100 VMs of an availability set, 3 events each listing all of them: each agent
    exports 3 event series (it was 300: 30,000 for the group, 3 million for 10,000 VMs)."""
    from setui.agent.metrics import AgentMetrics
    from setui.core.model import parse_document

    names = [f"web-{i}" for i in range(100)]
    document = parse_document({"DocumentIncarnation": 7, "Events": [
        {"EventId": f"E{n}", "EventType": "Freeze", "ResourceType": "VirtualMachine",
         "Resources": names, "EventStatus": "Scheduled", "NotBefore": "",
         "Description": "", "EventSource": "Platform", "DurationInSeconds": 5}
        for n in range(3)]})
    metrics = AgentMetrics(vm_name="web-42", compute=None, version="0")
    metrics.observe(document, fresh=True, error_kind=None)
    series = _series(metrics.text().decode(), "azure_scheduledevent_event")
    assert len(series) == 3, len(series)
    assert all('resource="web-42"' in s and 'this_vm="true"' in s
               and 'resources_listed="100"' in s for s in series), series[0]


def test_a_persons_approval_shows_in_approved_by(tmp_path: Path, emulator: Emulator) -> None:
    """The agent reads who approved the current events from the audit log when the
    document changes: an approval made by a person with `setui approve` (another process,
    the same store) is in the event's series once the event has started."""
    proc, lines = start_agent(emulator.url, tmp_path, "--metrics", "127.0.0.1:0")
    try:
        url = metrics_url(proc)
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
            who = store.audit_log.approvals([EVENT_ID])[EVENT_ID].user
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
        url = metrics_url(proc)
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




def test_every_known_counter_series_is_exported_at_0_from_the_start() -> None:
    """A counter first seen at 1 has no increase(): each is made at 0 when the agent
    starts, so the shipped alerts see the first failure as an increase."""
    from setui.agent.metrics import AgentMetrics

    text = AgentMetrics(vm_name="vm-a", compute=None, version="0").text().decode()
    wanted = [f'setui_hook_runs_total{{hook="{hook}",outcome="{outcome}"}} 0.0'
              for hook in ("prepare", "recover")
              for outcome in ("ok", "failed", "timeout", "deadline", "error", "interrupted")]
    wanted += [f'setui_approvals_total{{actor_kind="policy",outcome="{outcome}"}} 0.0'
               for outcome in ("approved", "refused", "failed")]
    wanted += [f'setui_notifications_total{{outcome="{outcome}"}} 0.0'
               for outcome in ("sent", "failed")]
    wanted += [f'setui_stalls_total{{announced="{announced}"}} 0.0'
               for announced in ("true", "false")]
    types = ("Freeze", "Reboot", "Redeploy", "Preempt", "Terminate", "other")
    wanted += [f'setui_event_impact_seconds_count{{eventType="{kind}"}} 0.0'
               for kind in (*types, "none")]
    wanted += [f'setui_event_notice_seconds_count{{eventType="{kind}"}} 0.0' for kind in types]
    missing = [line for line in wanted if line not in text]
    assert not missing, missing
    assert "setui_last_impact_seconds{" not in text  # nothing measured yet: no series


def test_what_was_measured_is_counted_and_the_last_impact_shown() -> None:
    from setui.agent.metrics import AgentMetrics
    from setui.core.impact import BOOT, STALL, Impact

    metrics = AgentMetrics(vm_name="vm-a", compute=None, version="0")
    at = datetime(2026, 11, 25, 19, 22, 1, tzinfo=timezone.utc)
    metrics.observe_impact(Impact(STALL, at, 4.8, event_id="E", event_type="Freeze"))
    metrics.observe_impact(Impact(STALL, at + timedelta(minutes=1), 3.1))
    metrics.observe_impact(Impact(STALL, at - timedelta(minutes=5), 0.0, wall_seconds=2.0))
    metrics.observe_impact(Impact(BOOT, at - timedelta(hours=1), 133.0, event_id="R",
                                  event_type="Hibernate"))
    metrics.observe_notice("Freeze", 300.0)
    metrics.observe_notice("Reboot", -4.0)  # first seen after its NotBefore: none
    text = metrics.text().decode()
    for line in ('setui_event_impact_seconds_count{eventType="Freeze"} 1.0',
                 'setui_event_impact_seconds_sum{eventType="none"} 5.1',  # 3.1 + the wall's 2
                 'setui_event_impact_seconds_count{eventType="other"} 1.0',
                 'setui_stalls_total{announced="true"} 1.0',
                 'setui_stalls_total{announced="false"} 2.0',
                 'setui_event_notice_seconds_bucket{eventType="Freeze",le="300.0"} 1.0',
                 'setui_event_notice_seconds_bucket{eventType="Freeze",le="120.0"} 0.0',
                 'setui_event_notice_seconds_sum{eventType="Reboot"} 0.0'):
        assert line in text, line
    # The newest one, whichever order they were observed in; one series.
    last = [line for line in text.splitlines()
            if line.startswith("setui_last_impact_seconds{")]
    assert len(last) == 1 and 'at="2026-11-25T19:23:01Z"' in last[0]
    assert 'eventID=""' in last[0] and 'impact="stall"' in last[0]
    assert last[0].endswith(" 3.1")


# A User Reboot of this VM (its prepare is /bin/false) and a Freeze that also reaches
# another VM (approved by a rule that does not say other_vms = true: refused), both
# appearing 6 s in, once Prometheus has scraped the agent.
TWO_FAILURES = """
name = "two-failures"
vm_name = "app-vm-1"
tail = 5

[[events]]
id = "E-REBOOT"
type = "Reboot"
source = "User"
at = 6
notice = "15m"

[[events]]
id = "E-FREEZE"
type = "Freeze"
at = 6
notice = "15m"
resources = ["app-vm-1", "app-vm-2"]
"""

FAILING_POLICY = """
[[rule]]
name = "drain"
event_type = "Reboot"
this_vm = true
prepare = ["/bin/false"]
approve = "after-prepare"

[[rule]]
name = "freeze"
event_type = "Freeze"
approve = "now"
"""


def test_the_first_failure_fires_the_shipped_alerts(tmp_path: Path,
                                                    prometheus_binary: str) -> None:
    emu = Emulator(parse_scenario(TWO_FAILURES), speed=1.0)
    emu.start()
    policy = tmp_path / "policy.toml"
    policy.write_text(FAILING_POLICY)
    proc, _lines = start_agent(emu.url, tmp_path, "--metrics", "127.0.0.1:0",
                               "--policy", str(policy))
    firing: dict[str, dict[str, str]] = {}
    try:
        target = metrics_url(proc).removeprefix("http://").removesuffix("/metrics")
        with _prometheus(prometheus_binary, target, tmp_path) as base:
            def fired() -> bool:
                answer = httpx.get(f"{base}/api/v1/alerts", timeout=5).json()
                firing.update({a["labels"]["alertname"]: a["labels"]
                               for a in answer["data"]["alerts"] if a["state"] == "firing"})
                return {"SetuiHookFailed", "SetuiApprovalFailed"} <= set(firing)
            wait_until(fired, 90, "the hook and approval alerts to fire")
    finally:
        assert stop(proc) == 0
        emu.stop()
    assert firing["SetuiHookFailed"]["hook"] == "prepare"
    assert firing["SetuiHookFailed"]["outcome"] == "failed"
    assert firing["SetuiApprovalFailed"]["outcome"] == "refused"


def test_docs_metrics_md_names_every_metric_and_label_the_agent_exports() -> None:
    """docs/metrics.md is the contract's reference: every name and label the agent
    exports (counters with their _total) is in it, in backticks."""
    import re

    from setui.agent.metrics import AgentMetrics
    from setui.core.model import parse_document

    doc = (Path(__file__).parents[2] / "docs" / "metrics.md").read_text(encoding="utf-8")
    metrics = AgentMetrics(vm_name="vm-a", compute=None, version="0")
    metrics.observe(parse_document({"DocumentIncarnation": 1, "Events": [
        {"EventId": "E", "EventType": "Reboot", "ResourceType": "VirtualMachine",
         "Resources": ["vm-a"], "EventStatus": "Scheduled", "NotBefore": "",
         "Description": "", "EventSource": "Platform", "DurationInSeconds": -1}]}),
        fresh=False, error_kind="timeout")
    names: set[str] = set()
    labels: set[str] = set()
    for line in metrics.text().decode().splitlines():
        if line.startswith("#"):
            continue
        found = re.match(r"([a-zA-Z_:]+)(?:\{(.*)\})? ", line)
        assert found, line
        names.add(found.group(1))
        labels.update(re.findall(r'([a-zA-Z_]+)="', found.group(2) or ""))
    assert len(names) >= 10 and "resources_listed" in labels
    missing = [f"`{n}`" for n in sorted(names | labels) if f"`{n}`" not in doc]
    assert not missing, missing


def test_counted_families_are_rendered_once_per_change_and_a_change_is_never_missed() -> None:
    """A few hundred counter and histogram series: rendered again only when one of them
    changed (a scrape every 15 s of an idle agent rendered them all each time), and every
    way they change shows at the next scrape, in either format."""
    from setui.agent.metrics import AgentMetrics
    from setui.core.impact import STALL, Impact

    openmetrics = "application/openmetrics-text; version=1.0.0"
    metrics = AgentMetrics(vm_name="vm-a", compute=None, version="0")
    first = metrics.exposition()[0]
    kept = dict(metrics._counted_kept)
    assert metrics.exposition()[0] == first
    assert metrics._counted_kept == kept and all(  # the same bytes, not made again
        metrics._counted_kept[k][1] is kept[k][1] for k in kept)
    at = datetime(2026, 11, 25, 19, 22, 1, tzinfo=timezone.utc)
    changes: list[tuple[Callable[[], object], str]] = [
        (lambda: metrics.count_hook_run("prepare", "ok"),
         'setui_hook_runs_total{hook="prepare",outcome="ok"} 1.0'),
        (lambda: metrics.count_approval("approved", "policy"),
         'setui_approvals_total{actor_kind="policy",outcome="approved"} 1.0'),
        (lambda: metrics.count_notification(True), 'setui_notifications_total{outcome="sent"} 1.0'),
        (lambda: metrics.observe_impact(Impact(STALL, at, 2.0)),
         'setui_stalls_total{announced="false"} 1.0'),
        (lambda: metrics.observe_notice("Freeze", 300.0),
         'setui_event_notice_seconds_count{eventType="Freeze"} 1.0'),
    ]
    for change, line in changes:
        metrics.exposition(openmetrics)  # both formats kept before the change
        metrics.exposition()
        change()
        assert line in metrics.exposition()[0].decode(), line
        om = metrics.exposition(openmetrics)[0].decode()
        assert line in om, line
        assert om.count("# EOF") == 1 and om.endswith("# EOF\n")
