"""What ``setui agent`` decided and did, kept in the same database as the audit log.

A restarted agent reads its work back from here: a step that finished is not done again,
a notification that was sent is not sent again, and a step that was running when the
agent died is not rerun blindly (it is marked interrupted, and a person is told). The
dashboard reads the same rows to show what the agent plans and does, and writes the holds
that the agent obeys. Every call is synchronous SQLite: callers run it on a worker thread.

The steps, the holds, the hook runs and the notifications are this VM's (store.vmkeys):
found by its vmId once known, whatever endpoint wrote them, so a hold set through one
endpoint holds the agent that polls another, and a message one agent left unsent is
sent by the next whatever endpoint it polls (schema 8 gave the hook runs and the
notifications their ``vm`` column). A notification's key begins with the VM's key too
(agent.telling): one written before the vmId was known begins with the endpoint's, and
counts as the same message once the vmId is known (:meth:`AgentLog.queue_notification`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol

from setui.store.audit import AuditLog
from setui.store.connection import Database, write_transaction
from setui.store.endpoints import endpoint_column
from setui.store.records import (
    DONE,
    FAILED,
    FINISHED,
    INTERRUPTED,
    PLANNED,
    RUNNING,
    SKIPPED,
    UNKNOWN,
    WAITING,
    AuditEntry,
    AuditRecord,
    Hold,
    HookRun,
    Step,
    clean_text,
    from_db_time,
    to_db_time,
)
from setui.store.vmkeys import ThisVm, with_vm_id

# The step and its states are values (store.records), re-exported for the agent's callers.
__all__ = ["DONE", "FAILED", "FINISHED", "HOLD", "INTERRUPTED", "MAX_OUTPUT", "PLANNED", "RELEASE",
           "RUNNING", "SKIPPED", "UNKNOWN", "UNMATCHED", "WAITING", "AgentLog", "Hold", "HookRun",
           "Notification", "Step", "holds_of", "hook_runs_of"]

# Audit actions of a person holding or releasing the agent's automation for an event.
HOLD = "agent-hold"
RELEASE = "agent-release"
# The agent's own: an event changed so that its rule no longer matches, and the agent
# took no more steps for it.
UNMATCHED = "agent-unmatched"
MAX_OUTPUT = 16 * 1024  # characters of a hook's output kept in the store
MAX_DETAIL = 1000



def _hook_run(row: Sequence[object], output: bool = True) -> HookRun:
    return HookRun(int(str(row[0])), str(row[1]), str(row[2]), str(row[3]), str(row[4]),
                   from_db_time(str(row[5])), from_db_time(str(row[6])) if row[6] else None,
                   None if row[7] is None else int(str(row[7])), bool(row[8]),
                   str(row[9]) if output else "")


_HOOK_RUN_COLUMNS = ("id, event_id, step, rule, command, started, ended, exit_status, "
                     "timed_out, output")


def hook_runs_of(conn: sqlite3.Connection, event_ids: Collection[str]) -> list[HookRun]:
    """The hook runs of ``event_ids`` (case ignored, as EventIds are), whichever key of
    this VM they were written under, oldest first, their output left out: what a report,
    a replay and an event's story tell of them. None in a store from before the agent's
    tables."""
    if not event_ids:
        return []
    wanted = {clean_text(i).casefold() for i in event_ids}
    try:
        if len(wanted) <= 500:
            rows = conn.execute(
                f"SELECT {_HOOK_RUN_COLUMNS} FROM agent_hook_runs WHERE event_id IN "
                f"({', '.join('?' * len(wanted))}) ORDER BY id", sorted(wanted)).fetchall()
        else:
            rows = conn.execute(
                f"SELECT {_HOOK_RUN_COLUMNS} FROM agent_hook_runs ORDER BY id").fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []
        raise
    return [_hook_run(r, output=False) for r in rows if str(r[1]).casefold() in wanted]




def holds_of(records: Iterable[AuditRecord]) -> list[Hold]:
    """The holds the audit ``records`` (oldest first) tell of, in the order they were set:
    each hold paired with the release that ended it. A hold set again while one stands
    changes nothing (the first holder held it); a release of nothing is left out."""
    holds: list[Hold] = []
    standing: dict[str, int] = {}
    for record in records:
        key = (record.event_id or "").casefold()
        if not key:
            continue
        if record.action == HOLD and key not in standing:
            standing[key] = len(holds)
            holds.append(Hold(record.event_id or "", record.user, record.time, record.seq))
        elif record.action == RELEASE and key in standing:
            index = standing.pop(key)
            holds[index] = replace(holds[index], until=record.time, released_by=record.user,
                                   release_seq=record.seq)
    return holds


@dataclass(frozen=True)
class Notification:
    """A message to send once: ``key`` names the lifecycle change it tells."""

    key: str
    event_id: str
    change: str
    title: str
    body: str
    state: str  # pending, sent, failed
    attempts: int


def _step(row: Sequence[object]) -> Step:
    return Step(str(row[0]), str(row[1]), str(row[2]), str(row[3]), str(row[4]),
                from_db_time(str(row[5])) if row[5] else None, from_db_time(str(row[6])))


class _Opened(Protocol):
    """An opened store (store.store.Store): the agent's tables are in its database, and
    a hold is written to its audit log first."""

    database: Database
    audit_log: AuditLog


class AgentLog:
    """The agent's tables in ``store`` (schema version 8, store/schema.py), as this VM's:
    ``endpoint``, and ``vm_id`` once it is known (set it when it is learned)."""

    def __init__(self, store: _Opened, endpoint: str, *, vm_id: str | None = None) -> None:
        self.store = store
        self.endpoint = endpoint_column(endpoint)  # one spelling (store.endpoints)
        self.vm_id = vm_id

    @property
    def vm(self) -> ThisVm:
        return ThisVm.of(self.endpoint, self.vm_id)

    # -- steps ----------------------------------------------------------------------------
    def steps(self, event_ids: Sequence[str] | None = None) -> list[Step]:
        """The steps of these events (all of this VM's when None), oldest first; of a
        step written under two keys (through another endpoint before the vmId was known),
        the newest."""
        where, args = self.vm.where()
        sql = ("SELECT event_id, step, rule, state, detail, started, updated FROM agent_steps "
               f"WHERE {where}")
        if event_ids is not None:
            if not event_ids:
                return []
            sql += f" AND event_id IN ({', '.join('?' * len(event_ids))})"
            args += [clean_text(i) for i in event_ids]
        with self.store.database.using("read the agent's work") as conn:
            rows = [_step(r) for r in conn.execute(sql + " ORDER BY updated DESC", args)]
        newest = {(s.event_id.casefold(), s.step): s for s in reversed(rows)}
        return sorted(newest.values(), key=lambda s: s.updated)

    def set_step(self, event_id: str, step: str, *, rule: str, state: str, at: datetime,
                 detail: str = "", started: datetime | None = None) -> None:
        """Record a step's state, durably, before acting on it: the row this VM already
        has for it (keyed by the vmId from now on, if it was not), else a new one."""
        vm = self.vm
        where, args = vm.where()
        values = (clean_text(rule)[:200], state, clean_text(detail)[:MAX_DETAIL],
                  to_db_time(started) if started else None, to_db_time(at))
        with self.store.database.using("record the agent's work", write=True) as conn, \
                write_transaction(conn):
            # OR REPLACE: two rows of the step (one per key) become the one, keyed by the vmId.
            changed = conn.execute(
                "UPDATE OR REPLACE agent_steps SET vm = coalesce(?, vm), rule = ?, state = ?, "
                "detail = ?, started = coalesce(?, started), updated = ? "
                f"WHERE {where} AND event_id = ? AND step = ?",
                (vm.vm_id, *values, *args, clean_text(event_id), step)).rowcount
            if not changed:
                conn.execute(
                    "INSERT INTO agent_steps (vm, endpoint, event_id, step, rule, state, "
                    "detail, started, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (vm.key, self.endpoint, clean_text(event_id), step, *values))

    def interrupt_running(self, at: datetime) -> list[Step]:
        """Steps left running by an agent that died: marked interrupted, returned. They
        are not rerun: whether a hook finished, or an approval reached the service, is
        not known."""
        where, args = self.vm.where()
        with self.store.database.using("record the agent's work", write=True) as conn, \
                write_transaction(conn):
            rows = conn.execute(
                "SELECT event_id, step, rule, state, detail, started, updated FROM agent_steps "
                f"WHERE {where} AND state = ?", (*args, RUNNING)).fetchall()
            conn.execute(
                "UPDATE agent_steps SET state = ?, updated = ?, detail = ? "
                f"WHERE {where} AND state = ?",
                (INTERRUPTED, to_db_time(at), "the agent stopped while this ran: not rerun",
                 *args, RUNNING))
        return [_step(r) for r in rows]

    # -- hook runs ------------------------------------------------------------------------
    def hook_started(self, event_id: str, step: str, *, rule: str, command: str,
                     at: datetime) -> int:
        with self.store.database.using("record a hook run", write=True) as conn:
            cursor = conn.execute(
                "INSERT INTO agent_hook_runs (vm, endpoint, event_id, step, rule, command, "
                "started) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (self.vm.key, self.endpoint, clean_text(event_id), step, clean_text(rule)[:200],
                 clean_text(command)[:2000], to_db_time(at)))
            return int(cursor.lastrowid or 0)

    def hook_ended(self, run_id: int, *, at: datetime, exit_status: int | None,
                   timed_out: bool, output: str) -> None:
        with self.store.database.using("record a hook run", write=True) as conn:
            conn.execute(
                "UPDATE agent_hook_runs SET ended = ?, exit_status = ?, timed_out = ?, "
                "output = ? WHERE id = ?",
                (to_db_time(at), exit_status, int(timed_out), clean_text(output)[-MAX_OUTPUT:],
                 run_id))

    def hook_runs(self, event_id: str | None = None) -> list[HookRun]:
        """This VM's hook runs (of ``event_id``, or all), oldest first."""
        where, keys = self.vm.where()
        sql = f"SELECT {_HOOK_RUN_COLUMNS} FROM agent_hook_runs WHERE {where}"
        args: list[object] = [*keys]
        if event_id is not None:
            sql += " AND event_id = ?"
            args.append(clean_text(event_id))
        with self.store.database.using("read the hook runs") as conn:
            return [_hook_run(r) for r in conn.execute(sql + " ORDER BY id", args)]

    # -- notifications --------------------------------------------------------------------
    def queue_notification(self, key: str, *, event_id: str, change: str, title: str,
                           body: str, at: datetime) -> bool:
        """Keep a message to send; False when ``key`` was queued before (by this agent or
        one before a restart, at any endpoint of this VM): then it is not sent again.

        A key begins with the VM's key (agent.telling); one that begins with its vmId has
        a twin written at this endpoint before the vmId was known, which is the same
        message (store.vmkeys: such rows are this VM's)."""
        key = clean_text(key)[:500]
        vm = self.vm
        twins = [key]
        if vm.vm_id is not None and key.startswith(f"{vm.vm_id}|"):
            twins.append(vm.endpoint + key[len(vm.vm_id):])
        with self.store.database.using("queue a notification", write=True) as conn:
            cursor = conn.execute(
                "INSERT INTO agent_notifications (key, vm, endpoint, event_id, change, title, "
                "body, state, created) SELECT ?, ?, ?, ?, ?, ?, ?, 'pending', ? WHERE NOT "
                f"EXISTS (SELECT 1 FROM agent_notifications WHERE key IN "
                f"({', '.join('?' * len(twins))}))",
                (key, vm.key, self.endpoint, clean_text(event_id), change,
                 clean_text(title)[:500], clean_text(body)[:4000], to_db_time(at), *twins))
            return cursor.rowcount == 1

    def notification_done(self, key: str, *, sent: bool, at: datetime,
                          error: str | None = None, final: bool = True) -> None:
        """One attempt's outcome: sent, or failed (``final``: no more attempts)."""
        state = "sent" if sent else ("failed" if final else "pending")
        with self.store.database.using("record a notification", write=True) as conn:
            conn.execute(
                "UPDATE agent_notifications SET state = ?, attempts = attempts + 1, error = ?, "
                "sent = CASE WHEN ? THEN ? ELSE sent END WHERE key = ?",
                (state, None if error is None else clean_text(error)[:MAX_DETAIL], sent,
                 to_db_time(at), key))

    def notifications(self, *, pending_only: bool = False) -> list[Notification]:
        """This VM's messages (those still to send, if ``pending_only``), oldest first."""
        where, args = self.vm.where()
        sql = ("SELECT key, event_id, change, title, body, state, attempts "
               f"FROM agent_notifications WHERE {where}")
        if pending_only:
            sql += " AND state = 'pending'"
        with self.store.database.using("read the notifications") as conn:
            return [Notification(r[0], r[1], r[2], r[3], r[4], r[5], int(r[6]))
                    for r in conn.execute(sql + " ORDER BY created, key", args)]

    # -- holds ----------------------------------------------------------------------------
    def held(self, event_ids: Sequence[str]) -> set[str]:
        """Which of ``event_ids`` a person holds (as spelt in ``event_ids``): by the
        newest hold or release of each."""
        if not event_ids:
            return set()
        where, args = self.vm.where()
        with self.store.database.using("read the holds") as conn:
            rows = conn.execute(
                f"SELECT event_id, held FROM agent_holds WHERE {where} AND "
                f"event_id IN ({', '.join('?' * len(event_ids))}) ORDER BY time",
                [*args, *(clean_text(i) for i in event_ids)]).fetchall()
        found = {str(event_id).casefold(): bool(held) for event_id, held in rows}
        return {i for i in event_ids if found.get(i.casefold())}

    def set_hold(self, event_id: str, *, held: bool, entry: AuditEntry) -> None:
        """Hold or release the automation for ``event_id``, with its audit record written
        first (a hold nobody can account for is worse than none); the record names this
        VM's vmId when it is known."""
        vm = self.vm
        self.store.audit_log.append(replace(entry, details=with_vm_id(entry.details, vm.vm_id)))
        where, args = vm.where()
        values = (int(held), clean_text(entry.user)[:200], to_db_time(entry.time))
        with self.store.database.using("record the hold", write=True) as conn, \
                write_transaction(conn):
            changed = conn.execute(
                "UPDATE OR REPLACE agent_holds SET vm = coalesce(?, vm), held = ?, actor = ?, "
                f"time = ? WHERE {where} AND event_id = ?",
                (vm.vm_id, *values, *args, clean_text(event_id))).rowcount
            if not changed:
                conn.execute("INSERT INTO agent_holds (vm, endpoint, event_id, held, actor, "
                             "time) VALUES (?, ?, ?, ?, ?, ?)",
                             (vm.key, self.endpoint, clean_text(event_id), *values))
