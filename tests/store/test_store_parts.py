"""The three parts of a Store share its one database: each refuses a write on a read-only
store in the words the Store used before the split, a write through one is read through
the others, and closing the record a command reads closes the database."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from setui.core.impact import STALL, Impact
from setui.store import DB_NAME, Store, StoreError
from tests.support.store_helpers import ENDPOINT, STORY, T0, entry, play

WRITES: dict[str, tuple[str, Callable[[Store], Any]]] = {
    "history": ("record the history",
                lambda s: s.history.record(STORY[0], seen_at=T0, endpoint=ENDPOINT)),
    "prune": ("prune the history", lambda s: s.history.prune(now=T0)),
    "audit log": ("write the audit log", lambda s: s.audit_log.append(entry())),
    "claiming": ("write the audit log", lambda s: s.audit_log.extend_claiming(
        [entry("approve-attempt", event_id="A-1")], ["A-1"], ENDPOINT)),
    "session": ("note the recording session",
                lambda s: s.sessions.start(endpoint=ENDPOINT, pid=1, host="h", command="c",
                                           at=T0)),
    "beat": ("note the recording session", lambda s: s.sessions.beat(1, T0)),
    "impact": ("record what an event did to the VM",
               lambda s: s.sessions.record_impact(Impact(STALL, T0, 1.0, ENDPOINT))),
}


@pytest.mark.parametrize("part", list(WRITES))
def test_each_part_refuses_a_write_on_a_read_only_store_in_words(data_dir: Path,
                                                                 part: str) -> None:
    Store.open_dir(data_dir).close()
    doing, write = WRITES[part]
    with Store.open_dir(data_dir, readonly=True) as reader, \
            pytest.raises(StoreError) as refused:
        write(reader)
    assert refused.value.message == (f"cannot {doing}: {data_dir / DB_NAME} was opened "
                                     "read-only")


def test_the_parts_write_and_read_one_database(data_dir: Path) -> None:
    with Store.open_dir(data_dir) as store:
        play(store, STORY[:2])
        store.audit_log.append(entry("approve-attempt", minute=1, event_id="A-1"))
        session = store.sessions.start(endpoint=ENDPOINT, pid=1, host="h", command="c",
                                       at=T0)
        assert {e.source for e in store.record.event_story("A-1")} == {"history", "audit"}
        assert store.record.event_ids("a-") == ["A-1"]
        assert [s.id for s in store.sessions.spans(endpoint=ENDPOINT)] == [session]


def test_closing_the_record_closes_the_database(data_dir: Path) -> None:
    with Store.open_dir(data_dir) as writer:
        writer.audit_log.append(entry())
    reader = Store.open_dir(data_dir, readonly=True)
    record = reader.record
    assert len(record.audit()) == 1
    record.close()
    with pytest.raises(StoreError, match=r"cannot read the audit log: the store .* is closed"):
        reader.audit_log.records()
    assert repr(reader).endswith("closed>")
