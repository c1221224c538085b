"""The audit screen with a real store: the chain's status in words, paired approvals,
identity, literal text."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.widgets import DataTable, Static

from setui.store import (
    APPROVE_ATTEMPT,
    APPROVE_OUTCOME,
    AuditEntry,
    AuditRecord,
    Store,
    StoreError,
)
from setui.ui.screens.audit import AuditScreen, pair_records
from setui.ui.screens.history import DetailScreen
from tests.support.dashboard import wait_for
from tests.support.screenhost import ScreenApp, assert_not_wrapped, drawn_after

ENDPOINT = "http://127.0.0.1:8099"
T0 = datetime(2024, 5, 14, 9, 30, tzinfo=timezone.utc)
WHO = {"user": "oncall", "ssh_client": "10.0.0.5", "host": "vm-web-0"}
GUID = "3f2a9c1e-5b7d-4e21-9a0f-6c1d2e3f4a5b"
LONG = "Host maintenance " + "x" * 150 + " END"  # wider than the screen
VERIFYING = "Verifying the audit chain…"
SNAPSHOT = {"EventId": "A-1", "EventType": "Reboot", "EventStatus": "Scheduled",
            "Resources": ["vm-web-0"], "NotBefore": "Tue, 14 May 2024 10:00:00 GMT"}




def log(store: Store, minute: float, action: str, **fields: Any) -> AuditRecord:
    values: dict[str, Any] = {**WHO, "endpoint": ENDPOINT, "event_id": "A-1",
                              "event": SNAPSHOT, "incarnation": 2, **fields}
    return store.audit_log.append(
        AuditEntry(time=T0 + timedelta(minutes=minute), action=action, **values))


def approve(store: Store, minute: float, event_id: str = "A-1", status: int = 200,
            error: str | None = None) -> None:
    attempt = log(store, minute, APPROVE_ATTEMPT, event_id=event_id)
    log(store, minute + 0.01, APPROVE_OUTCOME, event_id=event_id, status=status,
        error=error, latency=0.042, attempt_seq=attempt.seq)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open_dir(tmp_path / "data")
    try:
        yield opened
    finally:
        opened.close()


def shown_text(widget: Static) -> str:
    return widget.visual.plain  # type: ignore[attr-defined]


def banner(screen: AuditScreen) -> Static:
    return screen.query_one("#audit-verify", Static)


def status(screen: AuditScreen) -> Static:
    return screen.query_one("#audit-status", Static)


def screen_text(app: App[None]) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def opened(screen: AuditScreen, pilot: Any) -> None:
    """Until the chain is verified and the records are shown: both are read on the
    store's thread, so one turn of the loop is not always enough."""
    await wait_for(pilot, lambda: shown_text(banner(screen)) not in ("", VERIFYING)
                   and not screen._loading)
    await pilot.pause()


def rows(screen: AuditScreen) -> list[list[str]]:
    table = screen.query_one(DataTable)
    return [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]


async def test_chain_ok_and_paired_rows_newest_first(store: Store) -> None:
    approve(store, 1)
    log(store, 2, "cancelled", event_id="B-2")
    log(store, 3, "refused", event_id="C-3", error="event has already started")
    approve(store, 4, event_id=GUID, status=400, error="400 Bad Request")
    screen = AuditScreen(store.record)
    async with ScreenApp(screen).run_test(size=(120, 36)) as pilot:
        await opened(screen, pilot)
        assert shown_text(banner(screen)) == "✓ Audit chain ok, 6 records verified"
        assert banner(screen).has_class("ok") and not banner(screen).has_class("alarm")
        assert shown_text(status(screen)) == (
            "4 rows from 6 records (attempt and outcome share a row). Enter: details.")
        shown = rows(screen)
        assert len(shown) == 4  # two attempts paired with their outcomes
        # Newest first, by time (UTC, under a heading that says so) and by record.
        assert [row[0] for row in shown] == ["2024-05-14 09:34:00", "2024-05-14 09:33:00",
                                             "2024-05-14 09:32:00", "2024-05-14 09:31:00"]
        assert [screen.rows[i].record.seq for i in range(4)] == [5, 4, 3, 1]
        # An older record's "cancelled" (a dismissed dialog) reads as what it was.
        assert [row[1].split()[0] for row in shown] == ["approve", "refused", "dismissed",
                                                        "approve"]
        assert shown[0][1].startswith("approve × FAILED 400")
        assert shown[3][1] == "approve ✓ 200 · 42 ms"
        # Who comes before the event, and the EventId is its first 8 characters.
        assert [row[2] for row in shown] == ["oncall@vm-web-0"] * 4
        assert shown[0][3] == f"Reboot {GUID[:8]}" and shown[3][3] == "Reboot A-1"


async def test_who_and_event_fit_in_80_columns(store: Store) -> None:
    approve(store, 1, event_id=GUID, status=400, error="400 Bad Request: " + "x" * 200)
    screen = AuditScreen(store.record)
    app = ScreenApp(screen)
    async with app.run_test(size=(80, 24)) as pilot:
        await opened(screen, pilot)
        # the rows are in the table; the screen shows them at its next repaint
        await wait_for(pilot, lambda: "2024-05-14 09:31:00" in screen_text(app))
        text = screen_text(app)
        assert "When (UTC)" in text and "Who" in text and "Event" in text
        row = next(line for line in text.splitlines() if "2024-05-14 09:31:00" in line)
        assert "oncall@vm-web-0" in row and f"Reboot {GUID[:8]}" in row, row
        assert GUID not in text  # the full id is in the details, a key away
        await pilot.press("enter")
        await pilot.pause()
        assert GUID in shown_text(app.screen.query_one("#detail-body", Static))


async def test_one_record_one_row_in_words(store: Store) -> None:
    log(store, 1, "cancelled")
    screen = AuditScreen(store.record)
    async with ScreenApp(screen).run_test(size=(80, 24)) as pilot:
        await opened(screen, pilot)
        assert shown_text(banner(screen)) == "✓ Audit chain ok, 1 record verified"
        assert shown_text(status(screen)) == "1 row. Enter: details."


async def test_attempt_without_outcome_says_so(store: Store) -> None:
    log(store, 1, "approve-attempt", details={"sudo_user": "alice"})
    screen = AuditScreen(store.record)
    async with ScreenApp(screen).run_test(size=(80, 24)) as pilot:
        await opened(screen, pilot)
        assert "outcome unknown" in rows(screen)[0][1]
        await pilot.press("enter")
        await pilot.pause()
        text = shown_text(pilot.app.screen.query_one("#detail-body", Static))
        assert "whether the approval reached the service is unknown" in text
        assert 'sudo_user   "alice"' in text


async def test_enter_shows_every_field(store: Store) -> None:
    approve(store, 1)
    screen = AuditScreen(store.record)
    app = ScreenApp(screen)
    async with app.run_test(size=(80, 24)) as pilot:
        await opened(screen, pilot)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen)
        text = shown_text(app.screen.query_one("#detail-body", Static))  # type: ignore[attr-defined]  # Screen[None] in a Screen[object]: mypy narrows to nothing
        for expected in ("approve-attempt", "approve-outcome", "oncall", "10.0.0.5",
                         "vm-web-0", "A-1", "Reboot", "200", "42 ms", "UTC",
                         '"NotBefore": "Tue, 14 May 2024 10:00:00 GMT"'):
            assert expected in text, expected
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen


async def test_tampered_chain_is_loud_and_in_words(store: Store) -> None:
    approve(store, 1)
    tamper(store)
    screen = AuditScreen(store.record)
    async with ScreenApp(screen).run_test(size=(80, 24)) as pilot:
        await opened(screen, pilot)
        assert shown_text(banner(screen)) == (
            "!! TAMPERED: record 1 was altered (its content does not match its hash). "
            "Records from there on cannot be trusted.")
        assert banner(screen).has_class("alarm")
        assert not banner(screen).has_class("ok")


async def test_r_verifies_again(store: Store) -> None:
    approve(store, 1)
    screen = AuditScreen(store.record)
    async with ScreenApp(screen).run_test(size=(80, 24)) as pilot:
        await opened(screen, pilot)
        assert banner(screen).has_class("ok")
        tamper(store)  # while the screen is open
        log(store, 2, "cancelled", event_id="B-2")
        await pilot.press("r")
        await opened(screen, pilot)
        assert shown_text(banner(screen)).startswith("!! TAMPERED: record 1 was altered")
        assert banner(screen).has_class("alarm") and not banner(screen).has_class("ok")
        assert rows(screen)[0][1] == "dismissed"  # reloaded too


def tamper(store: Store) -> None:
    """Change a stored audit record behind the store's back, as an intruder would."""
    conn = sqlite3.connect(store.path)
    try:
        conn.execute("DROP TRIGGER IF EXISTS audit_no_update")
        conn.execute("UPDATE audit SET os_user = 'somebody-else' WHERE seq = 1")
        conn.commit()
    finally:
        conn.close()


async def test_hostile_identity_and_ids_are_literal(store: Store) -> None:
    approve(store, 1, event_id="[b]E[/b]\x1b[31m")
    log(store, 2, "refused", user="[red]root[/red]", host="h\x07", ssh_client="\x1b]0;x\x07",
        error="[link=x]no[/link]\u202e")
    screen = AuditScreen(store.record)
    app = ScreenApp(screen)
    async with app.run_test(size=(120, 36)) as pilot:
        await opened(screen, pilot)
        shown = rows(screen)
        assert "[red]root[/red]" in shown[0][2]
        assert shown[0][1].startswith("refused × [link=x]no[/")  # cut; whole in the details
        assert "[b]E[/b]" in shown[1][3]
        for row in shown:
            for cell in row:
                assert not any(c in cell for c in "\x1b\x07\u202e"), cell
        await pilot.press("enter")
        await pilot.pause()
        text = shown_text(app.screen.query_one("#detail-body", Static))
        assert "[red]root[/red]" in text and "\x1b" not in text
        assert "[link=x]no[/link]\\u202e" in text


async def test_empty_log(store: Store) -> None:
    screen = AuditScreen(store.record)
    async with ScreenApp(screen).run_test(size=(80, 24)) as pilot:
        await opened(screen, pilot)
        assert "chain ok, 0 records" in shown_text(banner(screen))
        assert "No approvals recorded yet" in shown_text(
            screen.query_one("#audit-status", Static))
        await pilot.press("enter", "j", "k", "g", "G")
        await pilot.pause()


async def test_no_store() -> None:
    screen = AuditScreen(None, problem="the data directory is read-only")
    async with ScreenApp(screen).run_test(size=(80, 24)) as pilot:
        await opened(screen, pilot)
        text = shown_text(banner(screen))
        assert "not available" in text and "read-only" in text
        await pilot.press("enter", "r")
        await pilot.pause()


async def test_store_errors_are_shown(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: Any, **__: Any) -> Any:
        raise StoreError("database is locked")

    monkeypatch.setattr(store.record, "verify_audit", broken)
    monkeypatch.setattr(store.record, "audit", broken)
    screen = AuditScreen(store.record)
    async with ScreenApp(screen).run_test(size=(80, 24)) as pilot:
        await opened(screen, pilot)
        assert "database is locked" in shown_text(banner(screen))
        assert banner(screen).has_class("alarm")
        assert "Could not read the audit log" in shown_text(
            screen.query_one("#audit-status", Static))


async def test_more_records_load_at_the_end(store: Store) -> None:
    for minute in range(7):
        log(store, minute, "cancelled", event_id=f"E-{minute}")
    screen = AuditScreen(store.record, page_size=3)
    async with ScreenApp(screen).run_test(size=(80, 24)) as pilot:
        await opened(screen, pilot)
        assert len(rows(screen)) == 3
        assert shown_text(status(screen)).startswith(
            "The newest 3 rows; older ones load at the end of the list.")
        await pilot.press("G")
        await opened(screen, pilot)
        assert len(rows(screen)) == 6
        await pilot.press("G")
        await opened(screen, pilot)
        assert [row[3] for row in rows(screen)] == [f"Reboot E-{m}" for m in range(6, -1, -1)]
        assert shown_text(status(screen)) == "7 rows. Enter: details."


async def test_vim_keys_hidden_and_footer_keys(store: Store) -> None:
    screen = AuditScreen(store.record)
    async with ScreenApp(screen).run_test(size=(80, 24)) as pilot:
        await opened(screen, pilot)
        shown = {b.binding.key for b in screen.active_bindings.values() if b.binding.show}
        assert {"escape", "enter"} <= shown
        assert not {"j", "k", "g", "G"} & shown


def test_pairing_keeps_unmatched_outcomes(store: Store) -> None:
    log(store, 1, "approve-outcome", status=200, latency=0.01)
    approve(store, 2)
    log(store, 3, "approve-attempt", event_id="B-2")
    paired = pair_records(store.audit_log.records())
    assert [(r.record.action, r.outcome is not None) for r in paired] == [
        ("approve-attempt", False), ("approve-attempt", True), ("approve-outcome", False)]


async def test_a_missing_witness_is_noted_not_called_tampering(store: Store,
                                                               tmp_path: Path) -> None:
    approve(store, 1)
    witness = tmp_path / "data" / "setui.db.audit-head"
    assert witness.exists()
    witness.unlink()
    screen = AuditScreen(store.record)
    async with ScreenApp(screen).run_test(size=(120, 36)) as pilot:
        await opened(screen, pilot)
        text = shown_text(banner(screen))
        assert text.startswith("✓ Audit chain ok, 2 records verified; note: ")
        assert "witness" in text
        assert banner(screen).has_class("ok")


async def test_the_event_as_shown_is_never_wrapped(store: Store) -> None:
    """The record's event, as JSON, one line per line: it scrolls sideways."""
    log(store, 1, "cancelled", event={**SNAPSHOT, "Description": LONG})
    async with ScreenApp(AuditScreen(store.record)).run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, DetailScreen))
        await pilot.pause()
        assert_not_wrapped(drawn_after(pilot.app, "event as shown"),
                           '"Description": "Host maintenance xxx', " END")
        assert pilot.app.screen.query_one("#detail-scroll").max_scroll_x > 0
