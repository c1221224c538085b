"""The fleet view's headless half: Prometheus's HTTP API, and what its answer says about
every VM's scheduled events. No textual, no rich: ``setui.ui.fleet`` draws it."""

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
