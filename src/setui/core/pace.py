"""How often setui may ask the service: the one rule for the polling interval.

Its own module (no httpx, no asyncio) so that the configuration and the command line
check an interval with the same words as the poller, without loading the HTTP stack.
"""

from __future__ import annotations

import math

__all__ = ["MAX_INTERVAL", "MIN_INTERVAL", "check_interval"]

MIN_INTERVAL = 0.2  # IMDS allows about 5 requests a second per VM, approvals included
# The service switches Scheduled Events off after a day without requests, and notice can
# be as short as 30 s: a slower pace than this watches nothing useful.
MAX_INTERVAL = 300.0


def check_interval(interval: float) -> float:
    """The polling interval, or ValueError saying the allowed range."""
    if not (math.isfinite(interval) and MIN_INTERVAL <= interval <= MAX_INTERVAL):
        raise ValueError(f"the interval must be {MIN_INTERVAL:g} to {MAX_INTERVAL:g} seconds "
                         "(IMDS allows about 5 requests a second; slower than every "
                         f"{MAX_INTERVAL:g} s would miss short notices), got {interval:g}")
    return float(interval)
