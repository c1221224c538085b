"""An event's life as the store tells it: what the history saw change, what the audit
log says people and setui did about it (holds with who set and released them), the
agent's hook runs, and what the agent measured, in one order."""

from __future__ import annotations

from setui.core.impact import Impact, impact_words
from setui.core.timefmt import duration, stamp
from setui.store import audit as audit_log
from setui.store import history as hist
from setui.store import impacts
from setui.store.agent import HOLD, RELEASE, Hold, HookRun, holds_of, hook_runs_of
from setui.store.connection import Database
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
    clean_text,
)
from setui.system.actor import describe_actor

__all__ = ["AGENT_SOURCE", "event_story", "hold_words", "hook_run_words"]

# The story's source of what the agent's own tables say it did (its hook runs).
AGENT_SOURCE = "agent"


def event_story(database: Database, event_id: str) -> list[StoryEntry]:
    """The event's life, oldest first: its changes and every audit record about it,
    read under one hold of the database so the three parts agree."""
    event_id = clean_text(event_id)
    with database.using("read the history") as conn:
        story = hist.event_story(conn, event_id)
        records = audit_log.for_event(conn, event_id)
        measured = impacts.for_event(conn, event_id)
        runs = hook_runs_of(conn, [event_id])
    holds = {h.seq: h for h in holds_of(records)}
    holds.update({h.release_seq: h for h in list(holds.values()) if h.release_seq is not None})
    story += [_audit_story(record, holds) for record in records]
    story += [_impact_story(impact) for impact in measured]
    story += [_hook_story(run) for run in runs]
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


def hold_words(hold: Hold) -> str:
    """``held by alice from 21:55:00 to 22:02:00 UTC (7m 00s), released by bob``."""
    since = stamp(hold.since, local=False)
    if hold.until is None:
        return f"held by {hold.holder} since {since}: not released"
    return (f"held by {hold.holder} from {since} to {stamp(hold.until, local=False)} "
            f"({duration((hold.until - hold.since).total_seconds())}), released by "
            f"{hold.released_by}")


def hook_run_words(run: HookRun) -> str:
    """``prepare hook (rule drain) ran from 21:55:01 to 21:55:03 UTC (2s): exit 0``."""
    head = f"{run.step} hook (rule {run.rule})"
    since = stamp(run.started, local=False)
    if run.ended is None:
        return (f"{head} started at {since}; its end is not recorded (still running, "
                "or the agent stopped while it ran)")
    if run.timed_out:
        how = "timed out"
    elif run.exit_status is None:
        how = "no exit status (ended by a signal)"
    else:
        how = f"exit {run.exit_status}"
    took = duration(max(0.0, (run.ended - run.started).total_seconds()))
    return f"{head} ran from {since} to {stamp(run.ended, local=False)} ({took}): {how}"


def _hook_story(run: HookRun) -> StoryEntry:
    return StoryEntry(time=run.started, kind="hook-run", event_id=run.event_id,
                      endpoint="", detail=hook_run_words(run), source=AGENT_SOURCE)


def _audit_story(record: AuditRecord, holds: dict[int, Hold] | None = None) -> StoryEntry:
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
    elif record.action == HOLD:
        hold = (holds or {}).get(record.seq)
        detail = f"operator {_who(record)} held the agent's automation for it"
        if hold is not None:
            detail += f": {hold_words(hold)}"
        else:
            detail += " (held already)"
    elif record.action == RELEASE:
        hold = (holds or {}).get(record.seq)
        detail = f"operator {_who(record)} released the agent's automation for it"
        if hold is not None:
            detail += f" (held by {hold.holder} for "
            detail += f"{duration((record.time - hold.since).total_seconds())})"
    else:
        detail = f"audit record: {record.action}"
    return StoryEntry(
        time=record.time, kind=record.action, event_id=record.event_id or "",
        endpoint=record.endpoint, incarnation=record.incarnation, detail=detail,
        event_type=snapshot.get("EventType"), status=snapshot.get("EventStatus"),
        not_before=str(snapshot.get("NotBefore") or ""), source="audit",
        audit_seq=record.seq)
