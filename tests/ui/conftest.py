"""The dashboard fixtures (tests/support/dashboard.py) for these tests."""

from __future__ import annotations

from tests.support.dashboard import _fixed_time_zone, make_dashboard, write_scenario

__all__ = ["_fixed_time_zone", "make_dashboard", "write_scenario"]
