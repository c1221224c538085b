"""History of incarnations and the hash-chained audit log, in one SQLite file.

Standard library ``sqlite3`` only: no textual, no httpx, no setui.ui.
"""

from __future__ import annotations

from setui.store.db import DB_NAME, NothingRecorded, StoreError, default_data_dir
from setui.store.records import (
    ACTIONS,
    APPROVE_ATTEMPT,
    APPROVE_OUTCOME,
    APPROVED,
    CANCELLED,
    FAILED,
    REFUSED,
    UNKNOWN,
    AuditEntry,
    AuditRecord,
    ChangeRecord,
    IncarnationRecord,
    StoryEntry,
    VerifyResult,
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
    "FAILED",
    "REFUSED",
    "UNKNOWN",
    "AuditEntry",
    "AuditRecord",
    "ChangeRecord",
    "IncarnationRecord",
    "NothingRecorded",
    "Store",
    "StoreError",
    "StoryEntry",
    "VerifyResult",
    "default_data_dir",
    "event_snapshot",
]
