"""History of incarnations and the hash-chained audit log, in one SQLite file.

Standard library ``sqlite3`` only: no textual, no httpx, no setui.ui.
"""

from __future__ import annotations

from setui.store.db import DB_NAME, NothingRecorded, ReadOnlyStore, StoreError, default_data_dir
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

__all__ = [
    "ACTIONS",
    "APPROVED",
    "APPROVE_ATTEMPT",
    "APPROVE_OUTCOME",
    "CANCELLED",
    "DB_NAME",
    "DISMISSALS",
    "DISMISSED",
    "FAILED",
    "REFUSED",
    "UNKNOWN",
    "AuditEntry",
    "AuditRecord",
    "ChangeRecord",
    "IncarnationRecord",
    "NothingRecorded",
    "ReadOnlyStore",
    "Store",
    "StoreError",
    "StoryEntry",
    "VerifyResult",
    "action_word",
    "default_data_dir",
    "event_snapshot",
]
