"""What a screen reads of the app that hosts it: a small read-only view, not the class.

The main screen is given a :class:`DashboardHost` (the live app is one, a replay's
:class:`~setui.ui.screens.replay.ReplayView` another) instead of importing ``ui/app.py``
or reaching for ``self.app``: the app and its screens do not import each other, and a
screen can be tested with any host that offers these few things. What a screen asks of
the app goes up as a message (setui.ui.messages), never through this view.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from setui.core.health import Health

if TYPE_CHECKING:
    from setui.agent.plan import EventPlan
    from setui.settings.config import Config
    from setui.ui.changelog import ChangeLog, Hold
    from setui.ui.format import Palette
    from setui.ui.messages import Session

__all__ = ["DashboardHost", "LinkView", "PlannedEvent", "WindowView"]


@dataclass(frozen=True)
class LinkView:
    """Where the dashboard's news comes from, for the status line: the agent it is
    attached to ("attached to the agent (pid 812, up 3d 02h)"), or "standalone";
    ``short`` where room is short; ``lost``: the agent is not answering, and ``text``
    says what the dashboard does about it."""

    text: str
    short: str
    lost: bool = False
    # Seconds between the agent's words while nothing changes (0: this dashboard polls):
    # the last answer's age reads "<Ns" under it, rather than counting up between them.
    every: float = 0.0


@dataclass(frozen=True)
class PlannedEvent:
    """The agent's plan for one event, as the dashboard's pane shows it: the event's
    name ("Reboot F020BA2E"), whether it is this VM's, its plan (None: no rule of the
    agent's matched it), and whether a person holds it (and who, when known)."""

    event_id: str
    name: str
    mine: bool
    plan: EventPlan | None
    held: bool = False
    hold: Hold | None = None


@dataclass(frozen=True)
class WindowView:
    """What the pane under the timeline shows: attached, the agent's plan for the events
    (``plans``, this VM's first) and the change log; standalone, the change log alone."""

    attached: bool
    plans: tuple[PlannedEvent, ...]
    log: ChangeLog


class DashboardHost(Protocol):
    """The dashboard's state and actions, as the screens see them."""

    session: Session
    vm_name: str | None
    palette: Palette
    config: Config
    demo: bool

    @property
    def replay_label(self) -> str | None:
        """The REPLAY badge (with the day) of a replay; None on the live dashboard."""

    @property
    def store_status(self) -> str | None:
        """Why the history is not being recorded, or None when it is."""

    @property
    def recorder_note(self) -> str | None:
        """Whether another recorder keeps the history while this dashboard is closed."""

    @property
    def link(self) -> LinkView | None:
        """Attached to the agent (or reaching it again), or standalone; None: not said."""

    @property
    def approvals_here(self) -> bool:
        """Whether the rows show only the approvals made in this dashboard (standalone);
        False where they show anyone's, each with who approved (the agent's audit log)."""

    @property
    def approvals_off(self) -> str | None:
        """Why nothing can be approved here (the agent said this user may not), or None:
        the approve key is shown dimmed, and pressing it says why."""

    def now(self) -> datetime:
        """The time every countdown and age is measured against (the service's)."""

    def health(self) -> Health:
        """The connection's health at this moment ("live" turns "stale" by itself)."""

    def stale(self) -> bool:
        """Whether the document shown is older than "live" allows."""

    def agent_plan(self, event_id: str | None) -> str:
        """What `setui agent` plans and does for the event ("" when nothing)."""

    def window(self) -> WindowView | None:
        """The agent's plan and the change log for the pane under the timeline; None:
        no pane (a replay shows the past)."""
