"""The stalls and boots the agent measured (core.impact), and what finds a boot.

A boot is found from the recording sessions: each keeps the boot id it ran in (schema 6),
so the sessions of another boot say when this endpoint was last polled before it (the
stop of a session that ended cleanly, as when the machine shut down; else its last beat,
at most a minute before it died), and the first session of this boot when it was first
polled after. A boot is told once (a unique index), whichever agent saw it first. Every
call is synchronous SQLite on the caller's connection: the Store runs it under its lock.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from setui.core.impact import BOOT, Impact
from setui.core.model import Document, DocumentError, parse_document
from setui.store.records import clean_text, from_db_time, to_db_time

__all__ = ["BootGap", "boot_gap", "for_event", "insert", "listing"]

_COLUMNS = ("id, endpoint, kind, at, seconds, wall_seconds, boottime_seconds, booted_at, "
            "first_poll, exact, boot_id, event_id, event_type, announced, tie")
_TEXT = 200  # an id, a type, a boot id: anything longer is not one


@dataclass(frozen=True)
class BootGap:
    """This endpoint's polls on either side of a boot, and the document seen last before."""

    last_poll: datetime
    exact: bool  # the session before stopped cleanly: its stop was the last poll
    first_poll: datetime
    before: Document | None


def _time(text: object) -> datetime | None:
    return from_db_time(str(text)) if text else None


def _impact(row: Sequence[object]) -> Impact:
    def number(value: object) -> float | None:
        return None if value is None else float(str(value))

    def text(value: object) -> str | None:
        return None if value is None else str(value)

    announced = number(row[13])
    return Impact(
        kind=str(row[2]), at=from_db_time(str(row[3])), seconds=float(str(row[4])),
        endpoint=str(row[1]), wall_seconds=number(row[5]), boottime_seconds=number(row[6]),
        booted_at=_time(row[7]), first_poll=_time(row[8]), exact=bool(row[9]),
        boot_id=text(row[10]), event_id=text(row[11]), event_type=text(row[12]),
        announced=None if announced is None else int(announced), tie=text(row[14]),
        id=int(str(row[0])))


def insert(conn: sqlite3.Connection, impact: Impact, endpoint: str) -> int | None:
    """Keep ``impact`` (``endpoint``: as the store keys it); its row id, or None for a boot
    told already."""
    def text(value: str | None) -> str | None:
        return None if value is None else clean_text(value)[:_TEXT]

    cursor = conn.execute(
        f"INSERT OR IGNORE INTO impacts ({_COLUMNS.split(', ', 1)[1]}) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (endpoint, impact.kind, to_db_time(impact.at), float(impact.seconds),
         impact.wall_seconds, impact.boottime_seconds,
         to_db_time(impact.booted_at) if impact.booted_at else None,
         to_db_time(impact.first_poll) if impact.first_poll else None, int(impact.exact),
         text(impact.boot_id), text(impact.event_id), text(impact.event_type),
         impact.announced, impact.tie))
    return int(cursor.lastrowid) if cursor.rowcount == 1 and cursor.lastrowid else None


def listing(conn: sqlite3.Connection, endpoint: str, *, since: datetime | None = None,
            until: datetime | None = None, newest: int | None = None) -> list[Impact]:
    """The endpoint's stalls and boots from ``since`` to ``until`` (the ``newest`` N of
    them), oldest first."""
    sql = f"SELECT {_COLUMNS} FROM impacts WHERE endpoint = ?"
    args: list[object] = [endpoint]
    if since is not None:
        sql += " AND at >= ?"
        args.append(to_db_time(since))
    if until is not None:
        sql += " AND at <= ?"
        args.append(to_db_time(until))
    if newest is not None:
        rows = conn.execute(sql + " ORDER BY at DESC, id DESC LIMIT ?", [*args, newest])
        return [_impact(r) for r in reversed(rows.fetchall())]
    return [_impact(r) for r in conn.execute(sql + " ORDER BY at, id", args)]


def for_event(conn: sqlite3.Connection, event_id: str) -> list[Impact]:
    """The stalls and boots tied to ``event_id``, oldest first."""
    return [_impact(r) for r in conn.execute(
        f"SELECT {_COLUMNS} FROM impacts WHERE event_id = ? ORDER BY at, id",
        (clean_text(event_id),))]


def boot_gap(conn: sqlite3.Connection, endpoint: str, boot_id: str,
             booted_at: datetime | None) -> BootGap | None:
    """The polls around the boot ``boot_id`` began with, when the record holds another
    boot of this endpoint and this one was not told yet; None otherwise (a first run, a
    restart within one boot). A session from before sessions kept their boot counts as
    another boot when it ended before ``booted_at``."""
    told = conn.execute("SELECT 1 FROM impacts WHERE endpoint = ? AND kind = ? AND boot_id = ?",
                        (endpoint, BOOT, boot_id)).fetchone()
    if told is not None:
        return None
    other = "boot_id IS NOT NULL AND boot_id != ?"
    args: list[object] = [endpoint, boot_id]
    if booted_at is not None:
        other = f"({other} OR (boot_id IS NULL AND coalesce(stopped, last_beat) < ?))"
        args.append(to_db_time(booted_at))
    before = conn.execute(
        "SELECT coalesce(stopped, last_beat), stopped IS NOT NULL FROM recorders "
        f"WHERE endpoint = ? AND {other} ORDER BY coalesce(stopped, last_beat) DESC LIMIT 1",
        args).fetchone()
    after = conn.execute("SELECT min(started) FROM recorders WHERE endpoint = ? AND boot_id = ?",
                         (endpoint, boot_id)).fetchone()
    if before is None or after is None or after[0] is None:
        return None
    last_poll = from_db_time(str(before[0]))
    row = conn.execute(
        "SELECT raw_json FROM incarnations WHERE endpoint = ? AND first_seen <= ? "
        "ORDER BY first_seen DESC, id DESC LIMIT 1", (endpoint, str(before[0]))).fetchone()
    document = None
    if row is not None:
        try:
            document = parse_document(row[0])
        except (DocumentError, ValueError):
            document = None
    return BootGap(last_poll, bool(before[1]), from_db_time(str(after[0])), document)
