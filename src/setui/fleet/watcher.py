"""One refresh of the fleet view: one query, its answer understood, the link's state.

:meth:`FleetWatcher.refresh` is synchronous and blocking (HTTP, then parsing tens of
thousands of series): the dashboard runs it in a thread worker, never on its event loop,
and never two at once. The pace (at most one query every :data:`MIN_REFRESH` seconds) is
the caller's timer; this module says what the link is after each try. A failed refresh
keeps the last good fleet, so the view can say how old what it shows is.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from setui.fleet.model import Fleet, FleetBuilder
from setui.fleet.prometheus import QUERY, PrometheusClient, PrometheusError
from setui.system.gctune import collector_paused

__all__ = ["MIN_REFRESH", "FleetUpdate", "FleetWatcher", "LinkState"]

MIN_REFRESH = 5.0  # seconds: a fleet's query is heavy for Prometheus; news is not faster


class LinkState(Enum):
    LOADING = "loading"  # no answer yet
    LIVE = "live"
    ERROR = "Prometheus error"  # it answered, with an error (a bad query, its own fault)
    REFUSED = "refused"  # 401/403: the credentials
    UNREACHABLE = "unreachable"  # no answer at all


_KINDS = {"unreachable": LinkState.UNREACHABLE, "refused": LinkState.REFUSED}


@dataclass(frozen=True)
class FleetUpdate:
    """What one refresh brought: the fleet (the last good one when this try failed), the
    link's state and why, and the times the dashboard ticks its countdowns from."""

    fleet: Fleet | None
    state: LinkState
    error: str | None
    answered_mono: float | None  # monotonic time of the last good answer
    failures: int  # consecutive failed refreshes
    fetch_seconds: float = 0.0
    parse_seconds: float = 0.0
    size: int = 0
    warnings: tuple[str, ...] = ()


class FleetWatcher:
    """Keeps the client, the builder (which remembers the VMs seen) and the last good
    fleet across refreshes."""

    def __init__(self, client: PrometheusClient, *, stale_after: float = 120.0,
                 query: str = QUERY, wall: Callable[[], float] = time.time,
                 mono: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.query = query
        self.builder = FleetBuilder(stale_after)
        self._wall = wall
        self._mono = mono
        self.last: FleetUpdate = FleetUpdate(None, LinkState.LOADING, None, None, 0)

    def refresh(self) -> FleetUpdate:
        """Query once and return the new update (also kept as :attr:`last`)."""
        started = self._mono()
        try:
            status, body = self.client.fetch(self.query)
            # One pause of the collector from the JSON to the model, and the answer's own
            # containers (a dict and a list per series) dropped before it runs again: it
            # then goes once through what the fleet keeps, not also through the answer
            # (30 ms of a 10,000-VM refresh). Never over the wait for Prometheus, which
            # may last the whole timeout.
            with collector_paused():
                answer = self.client.decode(status, body)
                del body
                fetched = self._mono()
                # Prometheus's clock, not this machine's: staleness is measured in the
                # clock the agents' timestamps were compared with. An empty answer has no
                # time: ours.
                at = answer.evaluated_at if answer.evaluated_at is not None else self._wall()
                fleet = self.builder.build(answer.result, at)
                size, warnings = answer.size, answer.warnings
                del answer
        except PrometheusError as exc:
            state = _KINDS.get(exc.kind, LinkState.ERROR)
            self.last = FleetUpdate(self.last.fleet, state, str(exc), self.last.answered_mono,
                                    self.last.failures + 1, self._mono() - started)
            return self.last
        done = self._mono()
        self.last = FleetUpdate(fleet, LinkState.LIVE, None, fetched, 0, fetched - started,
                                done - fetched, size, warnings)
        return self.last

    def close(self) -> None:
        self.client.close()
