"""The metric contract between ``setui agent`` (which exports) and ``setui fleet`` (which
reads through Prometheus): the names and labels both sides use, in one place. What each
means is in docs/metrics.md; a change here is a change of that contract.
"""

from __future__ import annotations

__all__ = ["EVENT_LABELS", "EVENT_METRIC", "IDENTITY_LABELS", "INFO_METRIC", "LAST_SEEN_METRIC",
           "REMEMBERS_METRIC", "SUCCESS_METRIC"]

# On every per-VM series: the VM's identity from IMDS compute metadata.
IDENTITY_LABELS = ("vm_name", "vm_scale_set", "placement_group", "resource_group",
                   "subscription_id", "zone")
# One series per current event this VM's document lists.
EVENT_METRIC = "azure_scheduledevent_event"
EVENT_LABELS = ("eventID", "eventType", "eventStatus", "eventSource", "resourceType",
                "resource", "notBefore", "this_vm", "approved_by", "resources_listed")
# Unix time of the agent's last good answer from IMDS.
SUCCESS_METRIC = "setui_last_success_timestamp_seconds"
# The VM's identity, the agent's version: 1 while the agent is scraped.
INFO_METRIC = "setui_vm_info"
# Recorded by the shipped rules (contrib/prometheus/setui-rules.yml): when each agent was
# last scraped, kept after it stops while its target is still scraped.
LAST_SEEN_METRIC = "setui:vm_last_seen_timestamp_seconds"
# Named by setui fleet's query (not exported): how many VMs that rule remembers, so an
# answer says whether the Prometheus has it at all.
REMEMBERS_METRIC = "setui:vm_last_seen_count"
