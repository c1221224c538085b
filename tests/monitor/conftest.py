"""The dashboard fixtures (tests/dashboard.py), for the monitor seen through the dashboard."""

from __future__ import annotations

from dashboard import _fixed_time_zone, make_dashboard, write_scenario

__all__ = ["_fixed_time_zone", "make_dashboard", "write_scenario"]
