"""One approval per event, across every setui process on this VM.

An approval is claimed by its own attempt record: the audit log already says who sent
which approval, so the claim needs no table of its own that could disagree with it.
:func:`check` runs inside the write transaction (``BEGIN IMMEDIATE``) that appends the
attempt, so of six processes approving one event at once the first appends its attempt
and the other five, serialised behind it, find that attempt and append nothing.

An event is claimed by its newest attempt that the service accepted, or whose outcome
is unknown: recorded so (a try timed out, or was cut off or interrupted, after its
request left), or not recorded at all (in flight in another process, or a process that
stopped before recording it). A failed attempt claims nothing: none of its tries can
have approved the event.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from setui.store.db import StoreError
from setui.store.endpoints import SQL_FUNCTION, endpoint_column
from setui.store.records import (
    APPROVE_ATTEMPT,
    APPROVE_OUTCOME,
    FAILED,
    UNKNOWN,
    Claim,
    approval_result,
    from_db_time,
)

__all__ = ["AlreadyClaimed", "Claim", "check", "find"]


class AlreadyClaimed(StoreError):
    """The approval was not recorded: these events are claimed by earlier approvals."""

    def __init__(self, claims: Sequence[Claim]) -> None:
        super().__init__("; ".join(f"{c.event_id}: {c.describe()}" for c in claims))
        self.claims = tuple(claims)


_SQL = (
    "SELECT a.seq, a.time, a.os_user, a.host, a.ssh_client, a.event_id, o.seq, o.status, "
    "o.error, o.details_json FROM audit a LEFT JOIN audit o ON o.attempt_seq = a.seq "
    "AND o.action = ? WHERE a.action = ? AND a.event_id = ? COLLATE NOCASE "
    f"AND {SQL_FUNCTION}(a.endpoint) = ? ORDER BY a.seq DESC")


def find(conn: sqlite3.Connection, event_id: str, endpoint: str) -> Claim | None:
    """The approval that claims ``event_id`` at ``endpoint``, if one does."""
    rows = conn.execute(_SQL, (APPROVE_OUTCOME, APPROVE_ATTEMPT, event_id,
                               endpoint_column(endpoint)))
    for seq, time, user, host, ssh, stored_id, out_seq, status, error, details in rows:
        result = UNKNOWN if out_seq is None else approval_result(
            status if isinstance(status, int) else None, error, _details(details))
        if result == FAILED:
            continue
        try:
            when = from_db_time(str(time))
        except ValueError:
            continue  # a damaged record claims nothing; verify reports it
        return Claim(str(stored_id), str(user), str(host), ssh, when, int(seq),
                     int(out_seq) if out_seq is not None else None,
                     unknown=result == UNKNOWN)
    return None


def _details(text: object) -> dict[str, object]:
    """An outcome's details; unreadable ones read as none (verify reports the record)."""
    try:
        value = json.loads(str(text))
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def check(conn: sqlite3.Connection, event_ids: Sequence[str], endpoint: str) -> None:
    """Raise :class:`AlreadyClaimed` if any of ``event_ids`` is claimed."""
    claims = [c for c in (find(conn, i, endpoint) for i in event_ids) if c is not None]
    if claims:
        raise AlreadyClaimed(claims)
