"""`setui approve` while another writer holds the store's write lock: the command run in
this process (``approve_command``, streams injected) against the real emulator over
loopback, on a busy timeout of a fraction of a second instead of SQLite's 5 s, so the
fast tier can wait it out. The command line itself is tested in test_approve_cmd.py."""

from __future__ import annotations

import asyncio
import io
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from setui.commands.approve import ApproveRequest, approve_command
from setui.emulator.clock import ManualClock
from setui.emulator.server import Emulator
from setui.store import Store
from setui.system.identity import Identity

EVENT_ID = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"  # the Freeze, which lists WestNO_1 too
BUSY = 0.2  # seconds a blocked write waits for the lock (SQLite's busy timeout)


@pytest.mark.parametrize("answer, words, code", [
    (None, f"{EVENT_ID} was refused, and it could not be recorded in the audit log: ", 1),
    ("n\n", "cancelled, and it could not be recorded in the audit log: ", 3),
])
def test_a_refusal_or_cancel_that_cannot_be_recorded_says_so(
        make_emulator: Callable[..., Emulator], clock: ManualClock, tmp_path: Path,
        answer: str | None, words: str, code: int) -> None:
    """The store opens, but another writer holds the lock past the busy timeout. Nothing
    is sent either way (--yes alone refuses an event of other VMs too; "n" cancels), but
    the operator must know the log does not show it."""
    emulator = make_emulator("live-migration")
    clock.advance(61)  # the documented Freeze is announced, 15 minutes ahead
    data = tmp_path / "data"
    Store.open_dir(data).close()
    request = ApproveRequest(event_ids=(EVENT_ID,), endpoint=emulator.url,
                             api_version="2020-07-01", data_dir=data, yes=answer is None,
                             store_timeout=BUSY)
    out, err = io.StringIO(), io.StringIO()
    holder = sqlite3.connect(data / "setui.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        code_seen = asyncio.run(approve_command(
            request, stdin=io.StringIO(answer or ""), out=out, err=err,
            identity=Identity(user="oncall", ssh_client="10.9.8.7", host="vm")))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert code_seen == code, out.getvalue() + err.getvalue()
    assert f"setui approve: {words}" in err.getvalue()
    assert "locked by another process" in err.getvalue()
    assert [r for r in emulator.requests if r.method == "POST"] == []
    with Store.open_dir(data, readonly=True) as store:
        assert store.audit_log.verify().ok
        assert store.audit_log.records(oldest_first=True) == []
