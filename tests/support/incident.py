"""The incident every replay, report and export test reads: one scenario, recorded."""

from __future__ import annotations

# A reboot of this VM approved early by alice, a neighbour's freeze rescheduled then
# cancelled, a redeploy that left while nothing was recording, a refusal.
INCIDENT = """
name = "incident"
vm_name = "web-0"
tail = 30
approval_delay = 2

[[events]]
id = "A1B2C3D4-0000-4000-8000-000000000001"
type = "Reboot"
at = 10
notice = "5m"
resources = ["web-0"]
duration = -1

[[events]]
id = "A1B2C3D4-0000-4000-8000-000000000002"
type = "Freeze"
at = 20
notice = "4m"
resources = ["web-1", "web-2"]
duration = 5
reschedule = [{ at = 60, notice = "5m" }]
cancel_at = 200

[[events]]
id = "A1B2C3D4-0000-4000-8000-000000000003"
type = "Redeploy"
at = 30
notice = "4m"
resources = ["web-0", "db-0"]
duration = 0
"""
SECONDS = 420
HOLE = (240, 330)  # nothing records from 03:04:00 to 03:05:30
