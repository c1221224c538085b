"""What the history, audit, details and replay screens read of the record: the store,
or the agent's record through its API when the dashboard is attached (api.record). A
screen asks the same questions of either, on a thread (offloop), and shows either's
errors in their words.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from setui.api.record import AgentRecord
from setui.core.holes import Hole
from setui.core.impact import Impact
from setui.monitor.replay import Recording, load_recording, recording_of
from setui.store.records import AuditRecord, IncarnationRecord, StoryEntry, VerifyResult

__all__ = ["Record", "read_recording"]


class Record(Protocol):
    """The read-only questions the screens ask (a Store answers them, and so does an
    AgentRecord). Blocking: asked on a thread."""

    def history(self, *, limit: int | None = ..., since: datetime | None = ...,
                endpoint: str | None = ..., event_id: str | None = ...,
                before: IncarnationRecord | None = ...) -> list[IncarnationRecord]: ...

    def previous(self, record: IncarnationRecord) -> IncarnationRecord | None: ...

    def event_story(self, event_id: str) -> list[StoryEntry]: ...

    def holes(self, *, endpoint: str, now: datetime | None = ...) -> list[Hole]: ...

    def impacts(self, *, endpoint: str, since: datetime | None = ...,
                until: datetime | None = ..., newest: int | None = ...) -> list[Impact]: ...

    def audit(self, *, limit: int | None = ..., oldest_first: bool = ...
              ) -> list[AuditRecord]: ...

    def verify_audit(self) -> VerifyResult: ...


def read_recording(record: Record, *, since: datetime | None = None,
                   until: datetime | None = None,
                   endpoint: str | None = None) -> Recording | None:
    """The record a replay moves through: read whole from a store, or asked of the agent
    (its recording, and the stalls and boots it measured up to ``until``). Blocking."""
    if not isinstance(record, AgentRecord):
        return load_recording(record, since=since, until=until,  # type: ignore[arg-type]
                              endpoint=endpoint)
    parts = record.recording(since=since, until=until, endpoint=endpoint)
    if parts is None:
        return None
    impacts = record.impacts(endpoint=parts.endpoint, until=until)
    return recording_of(parts.endpoint, parts.records, parts.audit, parts.holes,
                        parts.sessions_known, parts.start, parts.end, impacts)
