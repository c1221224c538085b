"""The fleet view's headless half: Prometheus's HTTP API, and what its answer says about
every VM's scheduled events. No textual, no rich: ``setui.ui.fleet`` draws it.

* ``prometheus``: one instant query over httpx, its answer decompressed with a cap as it
  streams; credentials from the config or the environment, never in clear beyond
  loopback; errors in words. The agent's budget asks through it too.
* ``model``: the answer as VMs, events and groups: VMs whose series vanished, or that
  Prometheus's recording rule remembers, as not reported since their last scrape;
  listed VMs no agent reports, counted; agents waiting for a budget.
* ``watcher``: one refresh: the query, its answer parsed, the link's state.
"""

# Before httpx is imported: setui.core keeps httpx's own command line (click, rich) out.
import setui.core  # noqa: F401
from setui.fleet.model import Fleet, FleetEvent, FleetGroup, FleetVm, VmKey, VmState
from setui.fleet.prometheus import (
    QUERY,
    InstantVector,
    PrometheusAuth,
    PrometheusClient,
    PrometheusError,
    check_credentials_safe,
    check_prometheus_url,
)
from setui.fleet.watcher import FleetUpdate, FleetWatcher, LinkState

__all__ = [
    "QUERY",
    "Fleet",
    "FleetEvent",
    "FleetGroup",
    "FleetUpdate",
    "FleetVm",
    "FleetWatcher",
    "InstantVector",
    "LinkState",
    "PrometheusAuth",
    "PrometheusClient",
    "PrometheusError",
    "VmKey",
    "VmState",
    "check_credentials_safe",
    "check_prometheus_url",
]
