"""The agent's record (history, holes, measured impacts, stories, audit log) read through
its API, in the store's own shapes: what the dashboard's screens read when attached.

:class:`AgentRecord` answers the read-only questions the screens ask a
:class:`~setui.store.Store` (``history``, ``previous``, ``holes``, ``impacts``,
``event_story``, ``audit``, ``verify_audit``), each with a request to the agent, so a
screen does not know which it reads. Blocking, like the store: call it on a thread. One
connection, opened when first needed and again when the agent closed it (a connection
that asks nothing for a minute is closed; a restarted agent is a new one): a read is
asked again once on a new connection when the old one failed before an answer. Errors
are :class:`~setui.api.client.ApiError`, with a message for people.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from setui.api.client import CONNECT_TIMEOUT, AgentClient, ApiError
from setui.api.codec import RecordingParts
from setui.api.protocol import BUSY
from setui.core.holes import Hole
from setui.core.impact import Impact
from setui.store.records import AuditRecord, IncarnationRecord, StoryEntry, VerifyResult

__all__ = ["AgentRecord"]

_T = TypeVar("_T")
# The agent answers a user's whole-record query (verify_audit, recording) at most once in
# this many seconds (docs/api.md, "Bounds"): asked sooner, it is asked again after it.
_HEAVY_EVERY = 5.0


class AgentRecord:
    """The agent's record at ``path``, read as the store is (see the module doc)."""

    def __init__(self, path: Path, *,
                 connect: Callable[[Path], AgentClient] | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.path = path
        self.readonly = True  # nothing here writes (as a store opened to read says)
        self._connect = connect or (lambda p: AgentClient.connect(p, timeout=CONNECT_TIMEOUT))
        self._sleep = sleep
        self._client: AgentClient | None = None
        self._lock = threading.Lock()

    def _ask(self, ask: Callable[[AgentClient], _T]) -> _T:
        with self._lock:
            try:
                return self._once(ask)
            except ApiError as exc:
                if exc.answered:
                    raise
            return self._once(ask)  # on a new connection: a read may be asked again

    def _once(self, ask: Callable[[AgentClient], _T]) -> _T:
        if self._client is None:
            self._client = self._connect(self.path)
        try:
            return ask(self._client)
        except ApiError as exc:
            if not exc.answered:  # the connection failed, or the agent closed it
                self._drop()
            raise

    def _drop(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close(bye=False)

    def close(self) -> None:
        """Close the connection now, without waiting for a read under way (it fails)."""
        self._drop()

    def _heavy(self, ask: Callable[[AgentClient], _T]) -> _T:
        """A whole-record query: asked again once, after the wait, when asked too soon."""
        try:
            return self._ask(ask)
        except ApiError as exc:
            if exc.code != BUSY:
                raise
        self._sleep(_HEAVY_EVERY)
        return self._ask(ask)

    # -- what the screens ask -------------------------------------------------------------
    def history(self, *, limit: int | None = 50, since: datetime | None = None,
                endpoint: str | None = None, event_id: str | None = None,
                before: IncarnationRecord | None = None) -> list[IncarnationRecord]:
        """A page (``limit`` None: the agent's largest, 1,000); page on with ``before``."""
        return self._ask(lambda c: c.history(limit=limit or 1000, since=since,
                                             endpoint=endpoint, event_id=event_id,
                                             before=before))

    def incarnation(self, number: int, *, endpoint: str | None = None
                    ) -> IncarnationRecord | None:
        return self._ask(lambda c: c.incarnation(number, endpoint=endpoint))

    def previous(self, record: IncarnationRecord) -> IncarnationRecord | None:
        return self._ask(lambda c: c.previous(record))

    def event_story(self, event_id: str) -> list[StoryEntry]:
        return self._ask(lambda c: c.event_story(event_id))

    def holes(self, *, endpoint: str, now: datetime | None = None) -> list[Hole]:
        return list(self._ask(lambda c: c.holes(endpoint=endpoint, now=now)))

    def impacts(self, *, endpoint: str, since: datetime | None = None,
                until: datetime | None = None, newest: int | None = None) -> list[Impact]:
        return list(self._ask(lambda c: c.impacts(endpoint=endpoint, since=since,
                                                  until=until, newest=newest)))

    def audit(self, *, limit: int | None = None, oldest_first: bool = False
              ) -> list[AuditRecord]:
        records, _, _ = self._ask(lambda c: c.audit(limit=limit or 10_000,
                                                    oldest_first=oldest_first))
        return records

    def verify_audit(self) -> VerifyResult:
        result, _missing = self._heavy(lambda c: c.verify_audit())
        return result

    def recording(self, *, since: datetime | None = None, until: datetime | None = None,
                  endpoint: str | None = None) -> RecordingParts | None:
        """What a replay is built from (monitor.replay.recording_of makes it one)."""
        return self._heavy(lambda c: c.recording(since=since, until=until,
                                                 endpoint=endpoint))
