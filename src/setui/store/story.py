"""An event's life as the store tells it: what the history saw change, what the audit
log says people and setui did about it, and what the agent measured, in one order."""

from __future__ import annotations

from setui.actor import describe_actor
from setui.core.impact import Impact, impact_words
from setui.store import audit as audit_log
from setui.store import history as hist
from setui.store import impacts
from setui.store.database import Database
from setui.store.records import (
    APPROVE_ATTEMPT,
    APPROVE_OUTCOME,
    APPROVED,
    DISMISSALS,
    IMPACT_SOURCE,
    REFUSED,
    UNKNOWN,
    AuditRecord,
    StoryEntry,
)

__all__ = ["event_story"]


def event_story(database: Database, event_id: str) -> list[StoryEntry]:
    """The event's life, oldest first: its changes and every audit record about it,
    read under one hold of the database so the three parts agree."""
    event_id = hist.clean_text(event_id)
    with database.using("read the history") as conn:
        story = hist.event_story(conn, event_id)
        records = audit_log.for_event(conn, event_id)
        measured = impacts.for_event(conn, event_id)
    story += [_audit_story(record) for record in records]
    story += [_impact_story(impact) for impact in measured]
    story.sort(key=lambda entry: (entry.time, entry.kind == "last-seen"))
    return story


def _who(record: AuditRecord) -> str:
    return describe_actor(record.user, record.ssh_client, record.host,
                          record.details if isinstance(record.details, dict) else {})


def _impact_story(impact: Impact) -> StoryEntry:
    """A stall or a boot tied to the event, as a story line: measured by the agent."""
    return StoryEntry(time=impact.at, kind=impact.kind, event_id=impact.event_id or "",
                      endpoint=impact.endpoint, detail=impact_words(impact, local=False),
                      event_type=impact.event_type, source=IMPACT_SOURCE)


def _audit_story(record: AuditRecord) -> StoryEntry:
    """An audit record as a story line, in words that say it was an operator's act.

    The kind stays the audit action, so an operator's ``cancelled`` (they said no in the
    dialog) and the history's ``cancelled`` (Azure removed the event) share a name; the
    ``source`` and these words are what tell them apart.
    """
    snapshot = record.event or {}
    if record.action == APPROVE_ATTEMPT:
        detail = f"operator {_who(record)} approved it; setui sent the approval"
        if record.outcome_unknown:
            detail += " (outcome unknown: setui stopped before recording it)"
    elif record.action == APPROVE_OUTCOME:
        if record.result == APPROVED:
            detail = f"the service accepted the approval: HTTP {record.status}"
        elif record.result == UNKNOWN:
            detail = f"the approval's outcome is unknown: {record.error}"
        else:
            detail = f"the approval failed: {record.error}"
        if record.latency_ms is not None:
            detail += f" in {record.latency_ms:.0f} ms"
    elif record.action in DISMISSALS:
        detail = f"operator {_who(record)} dismissed the approval dialog, nothing sent"
    elif record.action == REFUSED:
        detail = (f"approval by operator {_who(record)} refused by setui, nothing sent: "
                  f"{record.error or 'no reason'}")
    else:
        detail = f"audit record: {record.action}"
    return StoryEntry(
        time=record.time, kind=record.action, event_id=record.event_id or "",
        endpoint=record.endpoint, incarnation=record.incarnation, detail=detail,
        event_type=snapshot.get("EventType"), status=snapshot.get("EventStatus"),
        not_before=str(snapshot.get("NotBefore") or ""), source="audit",
        audit_seq=record.seq)
