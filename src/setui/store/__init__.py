"""The record in one SQLite file: the history of incarnations, the hash-chained audit
log, the recording sessions and the agent's work.

Standard library ``sqlite3`` only: no textual, no httpx, no setui.ui.

One module per concept, each table's class beside its SQL, so whoever looks for one
thing finds it in one place; the imports run one way, each module importing only those
above it here (the "store-layers" import contract keeps it so: no circle). Two splits
are kept on purpose: the values (records) apart from the SQL that stores them, and the
Record a front end asks (reading) apart from the store that answers it (stored), because
the agent's client side imports the values and the Record but nothing that opens or
writes the database (the "api-client" contract).

* ``errors``: RecordError, StoreError and its kinds, sqlite3 and OS errors in words.
* ``records``: the values handed out and taken in (frozen dataclasses, action and state
  words, the one reading of an approval's outcome: approved, failed, unknown) and their
  form in the database (times, text, JSON).
* ``place``: where a store lives, its owner and mode, no symbolic links, and whether that
  directory can hold an audit log.
* ``endpoints``: one spelling of an endpoint as the database keys it.
* ``vmkeys``: whose rows are this VM's (its vmId once known, else its endpoint).
* ``flocks``: which processes hold a lock on a file (a running agent's), from the
  kernel's list of locks.
* ``schema``: the tables, the upgrades from every older version, the schema checks.
* ``witness``: the file beside the database naming the audit log's newest record.
* ``connection``: the one opened file (Database): made, opened, read-only too, locked.
* ``history``: History and the SQL of the incarnations, each distinct document once,
  pruned.
* ``claims``: which earlier approval claims an event on this VM: one approval per event
  across processes, taken in the attempt's transaction.
* ``audit``: AuditLog and the hash chain, its SQL (append, claim, unforwarded) and its
  verification.
* ``impacts``: the stalls and boots the agent measured; a boot told once.
* ``sessions``: RecordingSessions (who recorded when) and the holes between them.
* ``agent``: AgentLog, the agent's steps, hook runs, notifications and holds.
* ``eventids``: EventIds the record knows, by prefix.
* ``against``: an audit log compared with a copy from off the VM (an export or its
  forwarded copy).
* ``story``: an event's life across the history, the audit log and the agent's tables.
* ``reading``: the Record a front end may ask, whether of a store or of the agent, and
  the RecordingParts a replay or report is built from (no database: the agent's client
  side imports it).
* ``stored``: StoredRecord, a Record over a store's parts, and the gathering of a
  recording from them.
* ``store``: Store, what a caller opens: the parts above over one connection.
"""

from __future__ import annotations

from setui.store.errors import NothingRecorded, ReadOnlyStore, StoreError
from setui.store.place import DB_NAME, default_data_dir
from setui.store.records import (
    ACTIONS,
    APPROVE_ATTEMPT,
    APPROVE_OUTCOME,
    APPROVED,
    CANCELLED,
    DISMISSALS,
    DISMISSED,
    FAILED,
    REFUSED,
    UNKNOWN,
    AuditEntry,
    AuditRecord,
    ChangeRecord,
    IncarnationRecord,
    StoryEntry,
    VerifyResult,
    action_word,
    event_snapshot,
)
from setui.store.store import Store

__all__ = ["ACTIONS", "APPROVED", "APPROVE_ATTEMPT", "APPROVE_OUTCOME", "CANCELLED", "DB_NAME",
           "DISMISSALS", "DISMISSED", "FAILED", "REFUSED", "UNKNOWN", "AuditEntry", "AuditRecord",
           "ChangeRecord", "IncarnationRecord", "NothingRecorded", "ReadOnlyStore", "Store",
           "StoreError", "StoryEntry", "VerifyResult", "action_word", "default_data_dir",
           "event_snapshot"]
