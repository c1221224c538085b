"""The pieces around the agent: the store's schema 3, the emulator's compute identity,
`setui agent` without its extra, a refused policy at start, metrics address parsing."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from setui.agent.metrics import parse_listen
from setui.emulator.server import Emulator
from setui.store import Store
from setui.store.agent import DONE, INTERRUPTED, RUNNING, SKIPPED, AgentLog
from setui.store.schema import SCHEMA_VERSION
from tests.support.agent_helpers import agent_env, write_policy
from tests.support.children import SETUI
from tests.support.oldstores import back_to

if TYPE_CHECKING:
    from setui.core.model import Document

T = datetime(2026, 1, 1, tzinfo=timezone.utc)


def test_a_version_2_store_gains_the_agents_tables_and_reads_without_them(
        tmp_path: Path) -> None:
    with Store.open_dir(tmp_path):
        pass
    path = tmp_path / "setui.db"
    conn = sqlite3.connect(path)
    for table in ("agent_steps", "agent_hook_runs", "agent_notifications", "agent_holds"):
        conn.execute(f"DROP TABLE {table}")
    back_to(conn, 2)
    conn.commit()
    conn.close()
    with Store.open_dir(tmp_path, readonly=True) as old:  # a reader of an older store
        assert AgentLog(old, "http://e").steps() == []
        assert AgentLog(old, "http://e").held(["x"]) == set()
    with Store.open_dir(tmp_path) as store:
        log = AgentLog(store, "http://e")
        log.set_step("E1", "prepare", rule="r", state=RUNNING, at=T, started=T)
        log.set_step("e1", "match", rule="r", state=DONE, at=T, detail="prepare 'x'")
        left = log.interrupt_running(T)
        assert [(s.event_id, s.step) for s in left] == [("E1", "prepare")]
        assert {s.step: s.state for s in log.steps(["E1"])} == {
            "prepare": INTERRUPTED, "match": DONE}
        assert AgentLog(store, "http://other").steps() == []
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


def test_the_emulator_serves_the_vms_identity(emulator: Emulator) -> None:
    headers = {"Metadata": "true"}
    base = f"{emulator.url}/metadata/instance/compute"
    whole = httpx.get(f"{base}?api-version=2021-02-01", headers=headers).json()
    assert whole == {"name": "app-vm-1", "vmScaleSetName": "web-ss",
                     "placementGroupId": "pg-1", "resourceGroupName": "rg-web",
                     "subscriptionId": "sub-1", "zone": "2", "location": "westeurope"}
    zone = httpx.get(f"{base}/zone?api-version=2021-02-01&format=text", headers=headers)
    assert zone.text == "2"
    name = httpx.get(f"{base}/name?api-version=2021-02-01&format=text", headers=headers)
    assert name.text == "app-vm-1"
    assert httpx.get(f"{base}?api-version=2021-02-01").status_code == 400  # no header
    assert httpx.get(f"{base}/nope?api-version=2021-02-01", headers=headers).status_code \
        == 404


@pytest.mark.slow
def test_the_emulator_command_takes_the_identity_flags(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [*SETUI, "emulator", "--scenario", "quiet", "--scale-set", "ss", "--placement-group",
         "pg", "--resource-group", "rg", "--subscription", "sub", "--zone", "1",
         "--location", "westeurope"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=agent_env(tmp_path))
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        answer = httpx.get(f"{url}/metadata/instance/compute?api-version=2021-02-01",
                           headers={"Metadata": "true"}).json()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert answer["vmScaleSetName"] == "ss" and answer["placementGroupId"] == "pg"
    assert answer["resourceGroupName"] == "rg" and answer["subscriptionId"] == "sub"
    assert answer["zone"] == "1" and answer["location"] == "westeurope"


@pytest.mark.slow
def test_without_the_extra_it_says_what_to_install(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['apprise'] = None; sys.modules['prometheus_client'] = None;"
            " from setui.cli import main; sys.exit(main(['agent']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env=agent_env(tmp_path))
    assert done.returncode == 2
    assert "pip install 'setui[agent]'" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_the_rest_of_setui_never_loads_the_extra(tmp_path: Path) -> None:
    code = ("import sys, setui.cli, setui.commands.watch, setui.monitor, setui.approval.approver, "
            "setui.agent.policy, setui.agent.rules, setui.agent.plan, setui.store.agent; "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('apprise', 'prometheus_client'))))")
    done = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True,
                          text=True, timeout=60, env=agent_env(tmp_path), check=True)
    assert json.loads(done.stdout) == []


@pytest.mark.slow
def test_a_bad_policy_is_refused_at_start_with_its_line(tmp_path: Path) -> None:
    policy = write_policy(tmp_path, '[[rule]]\nname = "a"\nevent_tpye = "Reboot"\n')
    done = subprocess.run([*SETUI, "agent", "--endpoint", "http://127.0.0.1:9", "--policy",
                           str(policy)], capture_output=True, text=True, timeout=60,
                          env=agent_env(tmp_path))
    assert done.returncode == 2
    assert f"{policy}:3: unknown key 'event_tpye'" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_the_policy_path_can_come_from_the_config_file(tmp_path: Path) -> None:
    policy = write_policy(tmp_path, '[[rule]]\nname = "a"\napprove = "later"\n')
    config = tmp_path / "config.toml"
    config.write_text(f'policy = "{policy}"\n')
    done = subprocess.run([*SETUI, "agent", "--endpoint", "http://127.0.0.1:9",
                           "--config", str(config)], capture_output=True, text=True,
                          timeout=60, env=agent_env(tmp_path))
    assert done.returncode == 2 and "approve must be one of" in done.stderr


@pytest.mark.parametrize(("text", "wanted"), [
    ("127.0.0.1:0", ("127.0.0.1", 0)), ("9464", ("127.0.0.1", 9464)),
    ("[::1]:9464", ("::1", 9464)), ("0.0.0.0:9464", ("0.0.0.0", 9464)),
])
def test_metrics_addresses(text: str, wanted: tuple[str, int]) -> None:
    assert parse_listen(text) == wanted


@pytest.mark.parametrize("text", ["host:", "host:99999", "host:x"])
def test_bad_metrics_addresses(text: str) -> None:
    with pytest.raises(ValueError, match="ADDR:PORT"):
        parse_listen(text)




def test_metric_labels_are_bounded_and_printable() -> None:
    from setui.agent.metrics import AgentMetrics
    from setui.core.model import parse_document

    document = parse_document(json.dumps({"DocumentIncarnation": 3, "Events": [{
        "EventId": "E\x1b[31m" + "x" * 500, "EventType": "Reboot", "ResourceType":
        "VirtualMachine", "Resources": ["vm-a", "vm-a", "vm-\u009bb"],
        "EventStatus": "Scheduled", "NotBefore": "", "Description": "", "EventSource": "",
        "DurationInSeconds": -1}]}))
    metrics = AgentMetrics(vm_name="vm-a", compute={"zone": "1\n2"}, version="0")
    metrics.observe(document, fresh=True, error_kind=None, wall=1000.0)
    text = metrics.text().decode()
    events = [line for line in text.splitlines()
              if line.startswith("azure_scheduledevent_event{")]
    assert len(events) == 1  # one series per event, whatever it lists
    assert 'resources_listed="2"' in events[0]  # vm-a listed twice is one VM
    for line in events:
        event_id = line.split('eventID="', 1)[1].split('"', 1)[0]
        assert len(event_id) == 128 and "\x1b" not in event_id
        assert line.endswith(" 0.0")  # NotBefore empty: 0
    assert 'zone="1?2"' in text and "\u009b" not in text
    assert "setui_last_success_timestamp_seconds{" in text and "1000.0" in text
    metrics.observe(None, fresh=False, error_kind="unreachable")
    text = metrics.text().decode()
    assert 'setui_poll_errors_total{kind="unreachable"} 1.0' in text
    assert "1000.0" in text  # the last success stays what it was


def _one_event(not_before: str, status: str = "Scheduled") -> Document:
    from setui.core.model import parse_document

    return parse_document(json.dumps({"DocumentIncarnation": 5, "Events": [{
        "EventId": "E1", "EventType": "Reboot", "ResourceType": "VirtualMachine",
        "Resources": ["vm-a"], "EventStatus": status, "NotBefore": not_before,
        "Description": "", "EventSource": "Platform", "DurationInSeconds": -1}]}))


def test_a_scrape_shows_every_change_since_the_last_one() -> None:
    """The document's series are rendered once and kept between scrapes: whatever the
    next scrape must show differently (the event, the text of its NotBefore alone, who
    approved it) is rendered again, and the counters move at every scrape."""
    from setui.agent.metrics import AgentMetrics

    metrics = AgentMetrics(vm_name="vm-a", compute=None, version="0")
    metrics.observe(_one_event("Tue, 01 Dec 2026 13:43:50 GMT"), fresh=True,
                    error_kind=None, wall=1000.0)
    first = metrics.text().decode()
    assert 'notBefore="Tue, 01 Dec 2026 13:43:50 GMT"' in first
    assert 'setui_polls_total{outcome="ok"} 1.0' in first

    # Every poll parses a new, equal document: the same series, the counters moved.
    metrics.observe(_one_event("Tue, 01 Dec 2026 13:43:50 GMT"), fresh=True,
                    error_kind=None, wall=1001.0)
    again = metrics.text().decode()
    assert 'setui_polls_total{outcome="ok"} 2.0' in again and "1001.0" in again
    event_lines = [line for line in first.splitlines() if line.startswith("azure_")]
    assert event_lines == [line for line in again.splitlines() if line.startswith("azure_")]

    # The same instant written otherwise: equal parsed documents, a different label.
    metrics.observe(_one_event("Tue, 1 Dec 2026 13:43:50 GMT"), fresh=True,
                    error_kind=None, wall=1002.0)
    assert 'notBefore="Tue, 1 Dec 2026 13:43:50 GMT"' in metrics.text().decode()

    metrics.set_approved_by({"E1": "policy:drain (setui agent, uid 0)"})
    assert 'approved_by="policy:drain (setui agent, uid 0)"' in metrics.text().decode()
    metrics.observe(_one_event("", status="Started"), fresh=True, error_kind=None)
    text = metrics.text().decode()
    assert 'eventStatus="Started"' in text and 'eventStatus="Scheduled"' not in text

    metrics.observe(None, fresh=False, error_kind="timeout")
    text = metrics.text().decode()
    assert "azure_scheduledevent_event{" not in text
    assert 'setui_polls_total{outcome="error"} 1.0' in text


def test_an_openmetrics_scrape_ends_once_with_eof() -> None:
    """The kept part and the live part are two renderings: OpenMetrics' ``# EOF`` must
    close the whole answer once, and the kept part is per format, never the other's."""
    from setui.agent.metrics import AgentMetrics

    metrics = AgentMetrics(vm_name="vm-a", compute=None, version="0")
    metrics.observe(_one_event("Tue, 01 Dec 2026 13:43:50 GMT"), fresh=True,
                    error_kind=None)
    for _ in range(2):  # rendered, then kept
        body, content_type = metrics.exposition("application/openmetrics-text")
        text = body.decode()
        assert content_type.startswith("application/openmetrics-text")
        assert text.endswith("\n# EOF\n") and text.count("# EOF") == 1
        assert "# TYPE setui_polls counter" in text and "azure_scheduledevent_event{" in text
        plain = metrics.text().decode()
        assert "# EOF" not in plain and "# TYPE setui_polls_total counter" in plain


def test_the_plan_in_words() -> None:
    from setui.agent.plan import plan_of, plan_text
    from setui.agent.policy import parse_policy
    from setui.store.agent import Step

    rule = parse_policy('[[rule]]\nname = "drain"\nprepare = "/bin/drain"\n'
                        'approve = "after-prepare"\nrecover = "/bin/undrain"\n').rules[0]
    plan = plan_of(rule)
    assert plan == "prepare 'drain', approve after prepare, recover 'undrain'"
    match = Step("E", "match", "drain", DONE, plan, None, T)
    done = Step("E", "prepare", "drain", DONE, "", T, T)
    assert plan_text([match, done], now=T) == (
        "rule drain: prepare done, approve after prepare, recover 'undrain'")
    assert plan_text([match], now=T, held=True).startswith("HELD by a person; rule drain")
    assert plan_text([], now=T) == ""
    # The event changed under its rule: said, with what was done, and that it stops.
    let_go = Step("E", "match", "drain", SKIPPED, "no longer matches: EventType Freeze is "
                  "not Reboot or Redeploy (type: Reboot -> Freeze)", None, T)
    assert plan_text([let_go, done], now=T) == (
        "rule drain no longer matches: EventType Freeze is not Reboot or Redeploy (type: "
        "Reboot -> Freeze); prepare done; nothing more without a person")


def test_an_approval_before_the_scenarios_first_second_still_starts_the_event() -> None:
    """A fast agent approves within the emulator's first second (its epoch is the next
    whole second): the event must start all the same."""
    from setui.emulator.clock import ManualClock
    from setui.emulator.scenario import parse_scenario
    from tests.support.agent_helpers import EVENT_ID, USER_REBOOT

    clock = ManualClock(1000.5)
    emu = Emulator(parse_scenario(USER_REBOOT), clock=clock, speed=1.0)
    emu.start()
    try:
        assert emu.scenario_time() < 0
        headers = {"Metadata": "true"}
        answer = httpx.post(f"{emu.url}/metadata/scheduledevents?api-version=2020-07-01",
                            headers=headers, json={"StartRequests": [{"EventId": EVENT_ID}]})
        assert answer.status_code == 200
        clock.set(emu.epoch + 2)
        document = httpx.get(f"{emu.url}/metadata/scheduledevents?api-version=2020-07-01",
                             headers=headers).json()
    finally:
        emu.stop()
    assert document["Events"][0]["EventStatus"] == "Started", document


async def test_the_metrics_endpoint_answers_scrapes_and_nothing_else() -> None:
    import asyncio

    from setui.agent.metrics import AgentMetrics
    from setui.agent.scrape import MAX_REQUEST

    metrics = AgentMetrics(vm_name="vm-a", compute=None, version="0")
    host, port = await metrics.serve("127.0.0.1", 0)
    try:
        async with httpx.AsyncClient(base_url=f"http://{host}:{port}") as client:
            scrape = await client.get("/metrics")
            assert scrape.status_code == 200 and "setui_build_info" in scrape.text
            assert scrape.headers["content-type"].startswith("text/plain")
            open_metrics = await client.get(
                "/metrics", headers={"Accept": "application/openmetrics-text"})
            assert open_metrics.headers["content-type"].startswith(
                "application/openmetrics-text")
            assert (await client.get("/other")).status_code == 404
            assert (await client.post("/metrics")).status_code == 405
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(b"GET /metrics HTTP/1.1\r\nX: " + b"y" * (2 * MAX_REQUEST))
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 10) == b""  # closed, nothing said
        writer.close()
    finally:
        await metrics.aclose()


async def test_the_metrics_endpoint_reads_a_head_in_pieces_and_bounds_a_slow_one() -> None:
    """The head may come in several pieces; HEAD gets the headers alone; a client that
    stops mid-head is closed after the timeout, one that leaves early harms nothing."""
    import asyncio

    from setui.agent.metrics import AgentMetrics
    from setui.agent.scrape import MetricsServer

    metrics = AgentMetrics(vm_name="vm-a", compute=None, version="0")
    server = MetricsServer(metrics.exposition, head_timeout=0.5)
    host, port = await server.start("127.0.0.1", 0)

    async def exchange(*pieces: bytes) -> bytes:
        reader, writer = await asyncio.open_connection(host, port)
        for piece in pieces:
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0.05)
        answer = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        return answer

    try:
        whole = await exchange(b"GET /met", b"rics HTTP/1.1\r\nAccept: application/",
                               b"openmetrics-text\r\n", b"\r\n")
        head, _, body = whole.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK\r\n")
        assert b"Content-Type: application/openmetrics-text" in head
        assert f"Content-Length: {len(body)}".encode() in head
        assert body.endswith(b"# EOF\n") and b"setui_build_info" in body
        only_head = await exchange(b"HEAD /metrics HTTP/1.1\r\n\r\n")
        assert only_head.startswith(b"HTTP/1.1 200 OK") and only_head.endswith(b"\r\n\r\n")
        started = asyncio.get_running_loop().time()
        assert await exchange(b"GET /metrics HTTP/1.1\r\n") == b""  # never finished
        assert asyncio.get_running_loop().time() - started < 5
        _, leaving = await asyncio.open_connection(host, port)
        leaving.write(b"GET /metr")
        leaving.close()
        assert (await exchange(b"GET / HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 200 OK")
    finally:
        await server.aclose()
