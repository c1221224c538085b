"""What a running agent serves over its API, read the way a test waits for it: an
event's life, whether it has served a document yet, and the life once it has started."""

from __future__ import annotations

from pathlib import Path

from setui.api.client import AgentClient, ApiError
from setui.monitor.state import EventLife
from tests.support.children import wait_until
from tests.support.waiting import PATIENCE

__all__ = ["life", "served", "started_life"]


def life(sock: Path, event_id: str) -> EventLife | None:
    """The event's life as the agent at ``sock`` serves it; None while it cannot say."""
    try:
        with AgentClient.connect(sock, timeout=5) as client:
            return client.state()[0].state.lives.get(event_id)
    except ApiError:
        return None


def served(sock: Path) -> bool:
    """Whether the agent at ``sock`` serves a document (its first answer)."""
    try:
        with AgentClient.connect(sock, timeout=5) as client:
            return client.state()[0].state.document is not None
    except ApiError:
        return False


def started_life(sock: Path, event_id: str) -> EventLife:
    """The event's life once the agent serves it as started."""
    found: list[EventLife] = []

    def started() -> bool:
        now = life(sock, event_id)
        if now is not None and now.started_at is not None:
            found.append(now)
            return True
        return False

    wait_until(started, PATIENCE, f"the agent to serve {event_id}'s life, started")
    return found[-1]
