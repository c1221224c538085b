"""A real Prometheus for the fleet tests and the bench, and stand-in exporters for it.

:class:`Prometheus` runs Debian's ``prometheus`` on a free loopback port with its storage
and config in a temporary directory; it can be stopped and started again on the same port
and storage. :class:`StandIn` serves a Prometheus text exposition of contract-shaped
series (``setui agent``'s metric names and labels) from the test, on loopback: the fleet
code is proven against a real scrape even where ``setui agent`` is not available.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

__all__ = ["SHIPPED_RULES", "Prometheus", "StandIn", "VmSeries", "exposition", "free_port",
           "have_prometheus"]

SHIPPED_RULES = Path(__file__).parents[2] / "contrib" / "prometheus" / "setui-rules.yml"


def have_prometheus() -> bool:
    return shutil.which("prometheus") is not None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: Mapping[str, str]) -> str:
    return ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())


@dataclass
class VmSeries:
    """What one agent would export: its identity, last good poll, and events (each a
    dict of the event labels, plus ``value``: NotBefore as Unix seconds)."""

    vm_name: str
    vm_scale_set: str = ""
    placement_group: str = ""
    resource_group: str = "rg"
    subscription_id: str = "sub-1"
    zone: str = ""
    last_success: float | None = None  # None: now, at each scrape
    events: list[dict[str, str | float]] = field(default_factory=list)
    # The last stall or boot its agent measured: the labels, plus ``value`` (seconds).
    impact: dict[str, str | float] | None = None

    def identity(self) -> dict[str, str]:
        return {"vm_name": self.vm_name, "vm_scale_set": self.vm_scale_set,
                "placement_group": self.placement_group,
                "resource_group": self.resource_group,
                "subscription_id": self.subscription_id, "zone": self.zone}


EVENT_DEFAULTS = {"eventType": "Reboot", "eventStatus": "Scheduled", "eventSource": "Platform",
                  "resourceType": "virtualMachine", "notBefore": "", "this_vm": "true",
                  "approved_by": ""}


def exposition(vms: Sequence[VmSeries], now: float | None = None) -> str:
    """The text format (version 0.0.4) of the series a set of agents export."""
    now = time.time() if now is None else now
    out = ["# TYPE azure_scheduledevent_event gauge"]
    for vm in vms:
        for event in vm.events:
            labels = {**vm.identity(), **EVENT_DEFAULTS,
                      **{k: str(v) for k, v in event.items() if k != "value"}}
            labels.setdefault("resource", vm.vm_name)
            out.append(f"azure_scheduledevent_event{{{_labels(labels)}}} "
                       f"{float(event.get('value', 0))}")
    out.append("# TYPE setui_last_success_timestamp_seconds gauge")
    for vm in vms:
        last = now if vm.last_success is None else vm.last_success
        out.append(f"setui_last_success_timestamp_seconds{{{_labels(vm.identity())}}} {last}")
    out.append("# TYPE setui_last_impact_seconds gauge")
    for vm in vms:
        if vm.impact is not None:
            labels = {**vm.identity(), **{k: str(v) for k, v in vm.impact.items()
                                          if k != "value"}}
            out.append(f"setui_last_impact_seconds{{{_labels(labels)}}} "
                       f"{float(vm.impact['value'])}")
    return "\n".join(out) + "\n"


class StandIn:
    """An exporter on 127.0.0.1: ``/metrics`` answers ``render()`` at each scrape."""

    def __init__(self, render: Callable[..., str]) -> None:
        self.render = render
        self.scrapes = 0
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = stand_in.render().encode()
                stand_in.scrapes += 1
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Prometheus:
    """Debian's Prometheus on loopback, scraping ``targets`` every ``interval`` seconds
    and evaluating ``rules`` (files) as often."""

    def __init__(self, root: Path, targets: Sequence[str], *, interval: str = "1s",
                 storage: Path | None = None, port: int | None = None,
                 rules: Sequence[Path] = ()) -> None:
        self.root = root
        self.port = port or free_port()
        self.storage = storage or root / "data"
        self.config = root / "prometheus.yml"
        rule_files = "".join(f"  - {path}\n" for path in rules)
        self.config.write_text(
            "global:\n"
            f"  scrape_interval: {interval}\n"
            f"  scrape_timeout: {interval}\n"
            f"  evaluation_interval: {interval}\n"
            + (f"rule_files:\n{rule_files}" if rules else "") +
            "scrape_configs:\n"
            "  - job_name: setui\n"
            "    static_configs:\n"
            f"      - targets: [{', '.join(repr(t) for t in targets)}]\n")
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = root / "prometheus.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0, extra: Sequence[str] = ()) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                ["prometheus", f"--config.file={self.config}",
                 f"--storage.tsdb.path={self.storage}",
                 f"--web.listen-address=127.0.0.1:{self.port}", *extra],
                stdout=log, stderr=subprocess.STDOUT, cwd=self.root)
        deadline = time.monotonic() + timeout
        with httpx.Client(trust_env=False) as client:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"prometheus exited: {self.log.read_text()[-2000:]}")
                try:
                    if client.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"prometheus not ready: {self.log.read_text()[-2000:]}")
                time.sleep(0.1)

    def query(self, promql: str) -> list[dict[str, object]]:
        with httpx.Client(trust_env=False) as client:
            answer = client.get(f"{self.url}/api/v1/query", params={"query": promql},
                                timeout=30).json()
        return answer["data"]["result"]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
