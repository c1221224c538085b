"""Fixtures of the agent's tests (helpers in agent_helpers.py), and the dashboard's for
the agent's window in it. The dev install has the extra setui[agent]: a test that needs
it does not skip without it, it fails."""

from __future__ import annotations

from tests.support.agent_helpers import emulator, hook, sink
from tests.support.dashboard import _fixed_time_zone, make_dashboard

__all__ = ["_fixed_time_zone", "emulator", "hook", "make_dashboard", "sink"]
