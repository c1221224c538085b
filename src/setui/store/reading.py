"""The record, as the commands read it: from the store itself, or through the agent.

On a machine with the agent, a front end reads what the agent recorded through its API
(:class:`setui.api.client.AgentClient`); without one, or told ``--standalone``, it reads a
store (a read-only :class:`setui.store.Store`'s ``record``: store.stored). Both answer
the same questions with the same values, so ``setui history``, ``audit``, ``report``,
``replay`` and the others have one code path, whichever it is: :class:`Record` is what
they may ask, and every error is a :class:`RecordError` (store.errors).

:class:`RecordingParts` is what a replay or a report is built from, gathered in one
place (store.stored) whether the agent or the command reads the store.

Nothing here opens or writes a database: the agent's client side imports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from setui.core.holes import Hole
from setui.core.impact import Impact
from setui.store.records import (
    AuditRecord,
    Claim,
    HookRun,
    IncarnationRecord,
    StoryEntry,
    VerifyResult,
)

__all__ = ["Record", "RecordingParts"]


@dataclass(frozen=True)
class RecordingParts:
    """One endpoint's record, oldest first, as read (monitor.replay.Recording parses its
    documents): every incarnation before ``end`` (an event's life began when it appeared,
    not when the window opens), the audit records of the endpoint, the holes (each whole),
    whether recording sessions were kept, the window, the stalls and boots measured, and
    when a heartbeat ran (where nothing measured means none), and the agent's hook runs
    of its events."""

    endpoint: str
    records: tuple[IncarnationRecord, ...]
    audit: tuple[AuditRecord, ...]
    holes: tuple[Hole, ...]
    sessions_known: bool
    start: datetime
    end: datetime
    impacts: tuple[Impact, ...] = ()
    measuring: tuple[tuple[datetime, datetime], ...] = ()
    # The agent's hook runs of the record's events, oldest first, without their output.
    hook_runs: tuple[HookRun, ...] = ()


class Record(Protocol):
    """What a front end may ask of the record; blocking (SQLite, or a socket): commands
    call it directly, a live view on a thread. Every error is a :class:`RecordError`."""

    def history(self, *, limit: int | None = 50, since: datetime | None = None,
                endpoint: str | None = None, event_id: str | None = None,
                before: IncarnationRecord | None = None) -> list[IncarnationRecord]:
        """Incarnations, newest first; ``before`` pages past an earlier answer."""
        ...

    def incarnation(self, number: int, *,
                    endpoint: str | None = None) -> IncarnationRecord | None:
        """The most recently seen document with that number."""
        ...

    def previous(self, record: IncarnationRecord) -> IncarnationRecord | None:
        """The document seen at the same endpoint just before ``record``."""
        ...

    def event_story(self, event_id: str) -> list[StoryEntry]:
        """The event's life, oldest first: its changes, audit records, what was measured."""
        ...

    def event_ids(self, prefix: str, *, limit: int = 20) -> list[str]:
        """EventIds the record knows that start with ``prefix``, newest first."""
        ...

    def holes(self, *, endpoint: str, now: datetime | None = None) -> Sequence[Hole]:
        """When nothing recorded ``endpoint``, oldest first, each hole whole."""
        ...

    def impacts(self, *, endpoint: str, since: datetime | None = None,
                until: datetime | None = None, newest: int | None = None) -> list[Impact]:
        """The stalls and boots measured for ``endpoint``, oldest first."""
        ...

    def approvals(self, event_ids: Sequence[str], *,
                  unknown: bool = False) -> dict[str, AuditRecord]:
        """The newest accepted approval of each event that has one; with ``unknown``,
        else its newest approval of unknown outcome."""
        ...

    def claim(self, event_id: str, endpoint: str, *,
              vm_id: str | None = None) -> Claim | None:
        """The earlier approval that claims the event on this VM (its ``vm_id`` when
        known, else ``endpoint``: store.vmkeys), if one does."""
        ...

    def audit(self, *, limit: int | None = None,
              oldest_first: bool = False) -> list[AuditRecord]:
        """Audit records, newest first unless ``oldest_first``; all of them without
        ``limit``."""
        ...

    def unforwarded(self) -> dict[int, str]:
        """Audit records that did not leave the VM: seq -> why."""
        ...

    def missing_records(self) -> str | None:
        """Why the log is shorter than its witness says, in words; None if it is not."""
        ...

    def verify_audit(self) -> VerifyResult:
        """The hash chain recomputed, against its head and its witness."""
        ...

    def recording(self, *, since: datetime | None = None, until: datetime | None = None,
                  endpoint: str | None = None) -> RecordingParts | None:
        """What replay and a report are built from; None when nothing was recorded."""
        ...

    def close(self) -> None:
        ...
