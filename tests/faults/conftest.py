"""The dashboard fixtures (tests/support/dashboard.py), shared with the fault matrix. The
matrix's own helpers are in faultmatrix.py."""

from __future__ import annotations

from tests.support.dashboard import _fixed_time_zone, make_dashboard, write_scenario

__all__ = ["_fixed_time_zone", "make_dashboard", "write_scenario"]
