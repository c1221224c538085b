"""The metric contract between ``setui agent`` (which exports) and ``setui fleet`` (which
reads through Prometheus): the names and labels both sides use, in one place. What each
means is in docs/metrics.md; a change here is a change of that contract.
"""

from __future__ import annotations

__all__ = ["BUSY_METRIC", "BUSY_REASONS", "EVENT_LABELS", "EVENT_METRIC", "IDENTITY_LABELS",
           "IMPACT_LABELS", "IMPACT_METRIC", "INFO_METRIC", "NOT_REPORTED_METRIC",
           "SUCCESS_METRIC", "WAITING_METRIC", "WAITING_REASONS"]

# On every per-VM series: the VM's identity from IMDS compute metadata.
IDENTITY_LABELS = ("vm_name", "vm_scale_set", "placement_group", "resource_group",
                   "subscription_id", "zone")
# One series per current event this VM's document lists.
EVENT_METRIC = "azure_scheduledevent_event"
EVENT_LABELS = ("eventID", "eventType", "eventStatus", "eventSource", "resourceType",
                "resource", "notBefore", "this_vm", "approved_by", "resources_listed")
# Unix time of the agent's last good answer from IMDS.
SUCCESS_METRIC = "setui_last_success_timestamp_seconds"
# The last stall or boot the agent measured on this VM (one series, replaced by the next):
# what it was (stall, boot), the event it was tied to ("" for none), when (ISO 8601 UTC);
# value: its length in seconds.
IMPACT_METRIC = "setui_last_impact_seconds"
IMPACT_LABELS = ("impact", "eventType", "eventID", "at")
# The VM's identity, the agent's version: 1 while the agent is scraped.
INFO_METRIC = "setui_vm_info"
# Recorded by the shipped rules (contrib/prometheus/setui-rules.yml): each agent not
# scraped now, valued when it last was; and one series without labels (0), so that an
# answer says whether the Prometheus has the rule at all.
NOT_REPORTED_METRIC = "setui:vm_not_reported_since_timestamp_seconds"
# What makes this VM count against its group's disruption budget, besides its events:
# 1 per reason while it holds (no series otherwise): a hook running, an early approval
# being claimed or sent.
BUSY_METRIC = "setui_agent_busy"
BUSY_REASONS = ("prepare", "recover", "approving")
# 1 per reason while an early approval waits (no series otherwise): the group's budget is
# spent, or Prometheus cannot say whether it is.
WAITING_METRIC = "setui_agent_waiting"
WAITING_REASONS = ("budget", "prometheus")
