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

Only this VM's attempts claim (store.vmkeys): those made with its vmId, through any
endpoint, and those made without one at its endpoint; while its vmId is not known, every
attempt at its endpoint, and the claim then says which VM the attempt named.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from setui.core.vmid import vm_id_key
from setui.store.endpoints import endpoint_column
from setui.store.errors import StoreError
from setui.store.records import (
    APPROVE_ATTEMPT,
    APPROVE_OUTCOME,
    FAILED,
    UNKNOWN,
    Claim,
    approval_result,
    from_db_time,
)
from setui.store.vmkeys import DETAIL, ThisVm

__all__ = ["AlreadyClaimed", "Claim", "check", "find"]


class AlreadyClaimed(StoreError):
    """The approval was not recorded: these events are claimed by earlier approvals."""

    def __init__(self, claims: Sequence[Claim]) -> None:
        super().__init__("; ".join(f"{c.event_id}: {c.describe()}" for c in claims))
        self.claims = tuple(claims)


# Every attempt of the event (only its records are read, on an index), newest first; which
# of them are this VM's is decided by ThisVm.owns, the rule's one home.
_SQL = (
    "SELECT a.seq, a.time, a.os_user, a.host, a.ssh_client, a.event_id, a.endpoint, "
    "a.details_json, o.seq, o.status, o.error, o.details_json FROM audit a LEFT JOIN audit o "
    "ON o.attempt_seq = a.seq AND o.action = ? WHERE a.action = ? "
    "AND a.event_id = ? COLLATE NOCASE ORDER BY a.seq DESC")


def find(conn: sqlite3.Connection, event_id: str, here: ThisVm) -> Claim | None:
    """The approval that claims ``event_id`` on the VM ``here``, if one does."""
    rows = conn.execute(_SQL, (APPROVE_OUTCOME, APPROVE_ATTEMPT, event_id))
    for (seq, time, user, host, ssh, stored_id, endpoint, made, out_seq, status, error,
         details) in rows:
        made_on = vm_id_key(_details(made).get(DETAIL))
        if not here.owns(made_on, endpoint_column(str(endpoint))):
            continue
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
                     unknown=result == UNKNOWN,
                     made_on=made_on if here.vm_id is None else None)
    return None


def _details(text: object) -> dict[str, object]:
    """An outcome's details; unreadable ones read as none (verify reports the record)."""
    try:
        value = json.loads(str(text))
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def check(conn: sqlite3.Connection, event_ids: Sequence[str], here: ThisVm) -> None:
    """Raise :class:`AlreadyClaimed` if any of ``event_ids`` is claimed on ``here``."""
    claims = [c for c in (find(conn, i, here) for i in event_ids) if c is not None]
    if claims:
        raise AlreadyClaimed(claims)
