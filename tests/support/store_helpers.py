"""Shared builders for the store tests: documents as the service writes them."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from setui.core.model import Document, parse_document
from setui.core.tracker import Tracker
from setui.store import AuditEntry, Store
from setui.store.history import content_hash

ENDPOINT = "http://169.254.169.254"
T0 = datetime(2024, 5, 14, 9, 30, tzinfo=timezone.utc)
NOT_BEFORE = "Tue, 14 May 2024 10:00:00 GMT"


def event(event_id: str, status: str = "Scheduled", kind: str = "Reboot",
          not_before: str = NOT_BEFORE, resources: Iterable[str] = ("vm-web-0",),
          **extra: Any) -> dict[str, Any]:
    return {"EventId": event_id, "EventType": kind, "EventStatus": status,
            "ResourceType": "VirtualMachine", "Resources": list(resources),
            "NotBefore": not_before if status == "Scheduled" else "",
            "Description": "Host maintenance", "EventSource": "Platform",
            "DurationInSeconds": 15, **extra}


def doc(incarnation: int, *events: dict[str, Any]) -> Document:
    return parse_document(json.dumps({"DocumentIncarnation": incarnation,
                                      "Events": list(events)}))


# Incarnation 1 empty, 2 A-1 scheduled, 3 A-1 started, 4 A-1 gone (completed).
STORY = [doc(1), doc(2, event("A-1")), doc(3, event("A-1", "Started")), doc(4)]


def play(store: Store, documents: Iterable[Document], start: datetime = T0,
         step: timedelta = timedelta(minutes=1), endpoint: str = ENDPOINT,
         tracker: Tracker | None = None) -> datetime:
    """Record documents as a poller would, one per ``step``, each said to follow the one
    before with nothing missed; returns the last time."""
    tracker = tracker or Tracker()
    when = start
    after: tuple[int, str] | None = None
    for number, document in enumerate(documents):
        when = start + step * number
        store.history.record(document, seen_at=when, changes=tracker.update(document, when),
                             endpoint=endpoint, after=after)
        after = (document.incarnation, content_hash(document))
    return when


def entry(action: str = "cancelled", minute: float = 0, **fields: Any) -> AuditEntry:
    values: dict[str, Any] = {"user": "alice", "host": "vm-web-0", "ssh_client": "10.1.2.3",
                              "endpoint": ENDPOINT, "event_id": "A-1", "incarnation": 2,
                              "event": {"EventId": "A-1", "EventType": "Reboot"}}
    values.update(fields)
    return AuditEntry(action=action, time=T0 + timedelta(minutes=minute), **values)


def raw(path: Path) -> sqlite3.Connection:
    """A plain sqlite3 connection, as a tamperer (or an auditor) would open the file."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DROP TRIGGER IF EXISTS audit_no_update")
    conn.execute("DROP TRIGGER IF EXISTS audit_no_delete")
    return conn
