"""The order events are listed in, most urgent first: one rule for the dashboard's table
and ``setui events``."""

from __future__ import annotations

from datetime import datetime, timezone

from setui.core.model import Event

__all__ = ["sort_key"]


def sort_key(event: Event, vm_name: str | None, *, started_at: datetime | None = None,
             first_seen: datetime | None = None) -> tuple[object, ...]:
    """Most urgent first: this VM's events before everyone else's (the operator acts on
    those; a neighbour's started event is news, not a task), then started, then by
    NotBefore (passed ones first). It does not depend on the time, so rows only move
    when the document changes."""
    far = datetime.max.replace(tzinfo=timezone.utc)
    mine = 0 if event.affects(vm_name) else 1
    if event.is_started:
        return (mine, 0, started_at or first_seen or far, event.event_id)
    if event.is_scheduled and event.not_before is not None:
        return (mine, 1, event.not_before, event.event_id)
    return (mine, 2, first_seen or far, event.event_id)
