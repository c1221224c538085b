"""``StoredRecord``: the record read from the store itself, answering the questions a front
end asks (store.reading.Record) as the agent's client answers them through its API.

Each answer is one part's (the history, the audit log, the recording sessions); the few
that gather across the parts (an event's story, ids by prefix, a replay's recording) are
asked of the database they share.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from setui.core.holes import Hole
from setui.core.impact import Impact
from setui.store import eventids, recording, story
from setui.store.auditlog import AuditLog
from setui.store.database import Database
from setui.store.incarnations import History
from setui.store.reading import RecordingParts
from setui.store.records import (
    AuditRecord,
    Claim,
    IncarnationRecord,
    StoryEntry,
    VerifyResult,
)
from setui.store.sessions import RecordingSessions

__all__ = ["StoredRecord"]


class StoredRecord:
    """A :class:`~setui.store.reading.Record` over one opened store's parts; closing it
    closes the database."""

    def __init__(self, database: Database, history: History, audit_log: AuditLog,
                 sessions: RecordingSessions) -> None:
        self.database = database
        self._history = history
        self._audit = audit_log
        self._sessions = sessions

    def history(self, *, limit: int | None = 50, since: datetime | None = None,
                endpoint: str | None = None, event_id: str | None = None,
                before: IncarnationRecord | None = None) -> list[IncarnationRecord]:
        return self._history.incarnations(limit=limit, since=since, endpoint=endpoint,
                                          event_id=event_id, before=before)

    def incarnation(self, number: int, *,
                    endpoint: str | None = None) -> IncarnationRecord | None:
        return self._history.incarnation(number, endpoint=endpoint)

    def previous(self, record: IncarnationRecord) -> IncarnationRecord | None:
        return self._history.previous(record)

    def event_story(self, event_id: str) -> list[StoryEntry]:
        return story.event_story(self.database, event_id)

    def event_ids(self, prefix: str, *, limit: int = 20) -> list[str]:
        """EventIds the history or the audit log knows that start with ``prefix`` (case
        ignored), newest first: for resolving an id typed by a person."""
        with self.database.using("read the history") as conn:
            return eventids.known(conn, prefix, limit)

    def holes(self, *, endpoint: str, now: datetime | None = None) -> list[Hole]:
        return self._sessions.holes(endpoint=endpoint, now=now)

    def impacts(self, *, endpoint: str, since: datetime | None = None,
                until: datetime | None = None, newest: int | None = None) -> list[Impact]:
        return self._sessions.impacts(endpoint=endpoint, since=since, until=until,
                                      newest=newest)

    def approvals(self, event_ids: Sequence[str], *,
                  unknown: bool = False) -> dict[str, AuditRecord]:
        return self._audit.approvals(event_ids, unknown=unknown)

    def claim(self, event_id: str, endpoint: str, *,
              vm_id: str | None = None) -> Claim | None:
        return self._audit.claim(event_id, endpoint, vm_id=vm_id)

    def audit(self, *, limit: int | None = None, oldest_first: bool = False,
              after: int | None = None, before: int | None = None) -> list[AuditRecord]:
        return self._audit.records(limit=limit, oldest_first=oldest_first, after=after,
                                   before=before)

    def unforwarded(self) -> dict[int, str]:
        return self._audit.unforwarded()

    def missing_records(self) -> str | None:
        return self._audit.missing_records()

    def verify_audit(self) -> VerifyResult:
        return self._audit.verify()

    def recording(self, *, since: datetime | None = None, until: datetime | None = None,
                  endpoint: str | None = None) -> RecordingParts | None:
        """One endpoint's record for a replay or a report (store.recording); None when
        nothing was recorded there."""
        return recording.gather(self._history, self._audit, self._sessions, since=since,
                                until=until, endpoint=endpoint)

    def close(self) -> None:
        self.database.close()
