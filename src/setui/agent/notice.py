"""The notice each event of this VM gave, measured as it appears (core.notice).

For every event of this VM seen to appear (not one already there when the agent began, nor
one first seen across a gap: their notice is not known), the agent counts its notice in
``setui_event_notice_seconds{eventType}``, says it, and when it is less than documented
tells people (the policy's ``[notify] short_notice``, on unless set to false), whatever
the event's rule says: the event is told once, under its own key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from setui.core.notice import DEFAULT_TERMINATE_NOTICE, measure_notice, notice_words, unwatched
from setui.core.tracker import ChangeKind

if TYPE_CHECKING:
    from setui.agent.agent import Agent
    from setui.agent.metrics import AgentMetrics
    from setui.monitor import MonitorUpdate

__all__ = ["SHORT_NOTICE", "NoticeWatch"]

SHORT_NOTICE = "short notice"  # the agent's line and the message's $change


class NoticeWatch:
    """``handle(update)`` after the agent has: measures what the update saw appear."""

    def __init__(self, agent: Agent, *, metrics: AgentMetrics | None,
                 terminate: float = DEFAULT_TERMINATE_NOTICE) -> None:
        self.agent = agent
        self.metrics = metrics
        self.terminate = terminate

    def handle(self, update: MonitorUpdate) -> None:
        vm_name = self.agent.vm_name
        for change in update.result.changes:
            event = change.event
            if change.kind is not ChangeKind.APPEARED or event is None \
                    or not event.affects(vm_name):
                continue  # a neighbour's, or this VM's name not known yet
            notice = measure_notice(
                event.event_type.value, first_seen=change.seen_at, announced=event.not_before,
                appeared_started=event.is_started,
                unseen=unwatched(initial=change.initial, certain=change.certain),
                terminate=self.terminate)
            if notice.seconds is None:
                continue
            if self.metrics is not None:
                self.metrics.observe_notice(notice.event_type, notice.seconds)
            short = bool(notice.short)
            self.agent.measured(SHORT_NOTICE if short else "notice", event, event.event_id,
                                f"{event.event_type.value}: notice {notice_words(notice)}",
                                tell=short and self.agent.policy.short_notice)
