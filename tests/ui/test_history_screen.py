"""The history screen with a real store: newest first, paging, the diff, literal text."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from rich.text import Text
from textual.screen import Screen
from textual.widgets import DataTable, Static

from setui.core.model import parse_document
from setui.core.tracker import Tracker
from setui.store import Store, StoreError
from setui.store.stored import StoredRecord
from setui.ui.screens.history import (
    DetailScreen,
    HistoryScreen,
    IncarnationScreen,
    diff_documents,
    local_and_utc,
)
from tests.support.dashboard import wait_for
from tests.support.screenhost import ScreenApp, assert_not_wrapped, drawn_after

ENDPOINT = "http://127.0.0.1:8099"
T0 = datetime(2024, 5, 14, 9, 30, tzinfo=timezone.utc)
HOSTILE_ID = "[bold red]PWN[/]\x1b[2J\x07id"
HOSTILE_TEXT = "[link=http://evil]click[/link] \x1b]0;title\x07 \u202eesrever"




def event(event_id: str, status: str = "Scheduled", kind: str = "Reboot",
          not_before: str = "Tue, 14 May 2024 10:00:00 GMT", **extra: Any) -> dict[str, Any]:
    return {"EventId": event_id, "EventType": kind, "EventStatus": status,
            "ResourceType": "VirtualMachine", "Resources": ["vm-web-0"],
            "NotBefore": not_before if status == "Scheduled" else "",
            "Description": "Host maintenance", "EventSource": "Platform",
            "DurationInSeconds": 15, **extra}


def fill(store: Store, documents: list[dict[str, Any]], start: datetime = T0) -> None:
    """Record documents as the dashboard would: one per minute, with the tracker's changes."""
    tracker = Tracker()
    for minute, body in enumerate(documents):
        document = parse_document(json.dumps(body))
        seen = start + timedelta(minutes=minute)
        changes = tracker.update(document, seen)
        store.history.record(document, seen_at=seen, endpoint=ENDPOINT, changes=changes)


STORY = [
    {"DocumentIncarnation": 1, "Events": []},
    {"DocumentIncarnation": 2, "Events": [event("A-1"), event("B-2", kind="Freeze")]},
    {"DocumentIncarnation": 3, "Events": [
        event("A-1", status="Started"),
        event("B-2", kind="Freeze", not_before="Tue, 14 May 2024 11:00:00 GMT")]},
    {"DocumentIncarnation": 4, "Events": [event("B-2", kind="Freeze",
                                                not_before="Tue, 14 May 2024 11:00:00 GMT")]},
]

LOADING = "Loading the history…"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open_dir(tmp_path / "data")
    try:
        yield opened
    finally:
        opened.close()


def rows(screen: HistoryScreen) -> list[list[str]]:
    table = screen.query_one(DataTable)
    return [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]


def shown_text(widget: Static) -> str:
    """What the widget displays, as Textual will draw it."""
    return widget.visual.plain  # type: ignore[attr-defined]


def status(screen: Screen[Any], selector: str) -> str:
    return shown_text(screen.query_one(selector, Static))


async def opened(screen: HistoryScreen, pilot: Any) -> None:
    """Until the first page is shown: it is read on the store's thread, so one turn of
    the loop is not always enough."""
    await wait_for(pilot, lambda: status(screen, "#history-status") not in ("", LOADING)
                   and not screen._loading)
    await pilot.pause()


def body(screen: Screen[Any]) -> str:
    assert isinstance(screen, DetailScreen)
    return shown_text(screen.query_one("#detail-body", Static))


async def test_lists_newest_first_in_utc_with_no_second_time_column_at_80(
        store: Store) -> None:
    fill(store, STORY)
    screen = HistoryScreen(store.record)
    async with ScreenApp(screen).run_test(size=(80, 24)) as pilot:
        await opened(screen, pilot)
        shown = rows(screen)
        assert [row[1] for row in shown] == ["4", "3", "2", "1"]
        assert shown[0][0] == "2024-05-14 09:33:00"  # UTC; the zone is Europe/Amsterdam
        assert "cancel" not in shown[0][2] and "completed" in shown[0][2]
        assert "4 incarnations" in status(screen, "#history-status")


async def test_wide_lists_show_the_local_time_beside_utc(store: Store) -> None:
    fill(store, STORY)
    screen = HistoryScreen(store.record)
    async with ScreenApp(screen).run_test(size=(120, 36)) as pilot:
        await opened(screen, pilot)
        shown = rows(screen)
        assert shown[0][:3] == ["2024-05-14 09:33:00", "11:33:00", "4"]
        assert local_and_utc(T0) == ("2024-05-14 09:30:00", "11:30:00")


async def test_enter_shows_the_diff_and_escape_goes_back(store: Store) -> None:
    fill(store, STORY)
    screen = HistoryScreen(store.record)
    app = ScreenApp(screen)
    async with app.run_test(size=(80, 24)) as pilot:
        await opened(screen, pilot)
        await pilot.press("j")  # incarnation 3
        await pilot.press("enter")
        await pilot.pause()
        detail = app.screen
        assert isinstance(detail, IncarnationScreen)
        text = body(detail)
        assert "Changes since incarnation 2, first seen" in text
        assert "~ changed  Reboot A-1" in text
        assert 'EventStatus: "Scheduled" -> "Started"' in text
        assert "NotBefore: 2024-05-14 10:00:00 UTC -> 2024-05-14 11:00:00 UTC" in text
        assert "Raw document" in text and '"DocumentIncarnation": 3' in text
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen
        await pilot.press("k", "enter")  # incarnation 4: A-1 completed
        await pilot.pause()
        text = body(app.screen)
        assert "- removed  Reboot A-1" in text and "completed" in text
        assert "= unchanged: 1 event B-2" in text
        await pilot.press("q")
        await pilot.pause()
        await pilot.press("q")
        await pilot.pause()
        assert app.screen is not screen  # q left the history screen too


async def test_first_incarnation_has_no_previous(store: Store) -> None:
    fill(store, STORY[1:2])
    screen = HistoryScreen(store.record)
    app = ScreenApp(screen)
    async with app.run_test(size=(80, 24)) as pilot:
        await opened(screen, pilot)
        await pilot.press("enter")
        await pilot.pause()
        text = body(app.screen)
        assert "No earlier incarnation recorded" in text
        assert "+ added    Reboot A-1" in text and "+ added    Freeze B-2" in text


async def test_hostile_content_is_shown_literally(store: Store) -> None:
    fill(store, [{"DocumentIncarnation": 7, "Events": [
        event(HOSTILE_ID, Description=HOSTILE_TEXT, Resources=["[b]vm[/b]"])]}])
    screen = HistoryScreen(store.record)
    app = ScreenApp(screen)
    async with app.run_test(size=(120, 36)) as pilot:
        await opened(screen, pilot)
        summary = rows(screen)[0][3]
        assert "[bold re" in summary and "\x1b" not in summary  # the summary cuts ids at 8
        await pilot.press("enter")
        await pilot.pause()
        text = body(app.screen)
        assert "[bold red]PWN[/]" in text
        assert "[link=http://evil]click[/link]" in text
        assert "[b]vm[/b]" in text
        for control in ("\x1b", "\x07", "\u202e"):
            assert control not in text


async def test_empty_store_says_so(store: Store) -> None:
    screen = HistoryScreen(store.record)
    async with ScreenApp(screen).run_test(size=(80, 24)) as pilot:
        await opened(screen, pilot)
        assert rows(screen) == []
        assert "No incarnations recorded yet" in status(screen, "#history-status")
        await pilot.press("enter", "j", "k", "G", "g")  # nothing to open: no crash
        await pilot.pause()


async def test_no_store_shows_the_reason() -> None:
    screen = HistoryScreen(None, problem="cannot open /nope/history.db: permission denied")
    async with ScreenApp(screen).run_test(size=(80, 24)) as pilot:
        await opened(screen, pilot)
        text = status(screen, "#history-status")
        assert "History is not available" in text and "permission denied" in text
        await pilot.press("enter", "r")
        await pilot.pause()


async def test_store_error_shows_the_reason(store: Store,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(**_: Any) -> list[Any]:
        raise StoreError("database disk image is malformed")

    monkeypatch.setattr(store.record, "history", broken)
    screen = HistoryScreen(store.record)
    async with ScreenApp(screen).run_test(size=(80, 24)) as pilot:
        await opened(screen, pilot)
        text = status(screen, "#history-status")
        assert "Could not read the history" in text and "malformed" in text


async def test_pages_load_on_demand(store: Store) -> None:
    documents = [{"DocumentIncarnation": n, "Events": [event(f"E-{n}")]} for n in range(1, 13)]
    fill(store, documents)
    screen = HistoryScreen(store.record, page_size=5)
    async with ScreenApp(screen).run_test(size=(80, 24)) as pilot:
        await opened(screen, pilot)
        assert len(rows(screen)) == 5
        assert "The 5 newest" in status(screen, "#history-status")
        await pilot.press("G")  # the end of the list asks for the next page
        await opened(screen, pilot)
        assert len(rows(screen)) == 10
        await pilot.press("G")
        await opened(screen, pilot)
        shown = [row[1] for row in rows(screen)]
        assert shown == [str(n) for n in range(12, 0, -1)]
        assert "12 incarnations" in status(screen, "#history-status")


class CountingStore:
    """Says how much the screen asked for: it must never ask for everything."""

    def __init__(self, real: StoredRecord) -> None:
        self.real = real
        self.limits: list[int | None] = []

    def history(self, **kwargs: Any) -> list[Any]:
        self.limits.append(kwargs.get("limit"))
        return self.real.history(**kwargs)

    def previous(self, record: Any) -> Any:
        return self.real.previous(record)

    def holes(self, **kwargs: Any) -> Any:
        return self.real.holes(**kwargs)

    def impacts(self, **kwargs: Any) -> Any:
        return self.real.impacts(**kwargs)


async def test_opening_reads_one_page_only(store: Store) -> None:
    fill(store, [{"DocumentIncarnation": n, "Events": []} for n in range(1, 40)])
    counting = CountingStore(store.record)
    screen = HistoryScreen(counting, page_size=10)  # type: ignore[arg-type]
    async with ScreenApp(screen).run_test(size=(80, 24)) as pilot:
        await opened(screen, pilot)
        assert counting.limits == [10]
        await pilot.press("j", "j", "j")
        await pilot.pause()
        assert counting.limits == [10]


async def test_keys_in_the_footer_and_vim_keys_hidden(store: Store) -> None:
    fill(store, STORY)
    screen = HistoryScreen(store.record)
    async with ScreenApp(screen).run_test(size=(80, 24)) as pilot:
        await opened(screen, pilot)
        shown = {b.binding.key for b in screen.active_bindings.values() if b.binding.show}
        assert {"escape", "enter"} <= shown
        assert not {"j", "k", "g", "G"} & shown


def test_diff_reports_duplicates_and_unknown_fields() -> None:
    before = parse_document({"DocumentIncarnation": 1, "Events": [event("X", Extra=1)]})
    after = parse_document({"DocumentIncarnation": 2, "Events": [
        event("X", Extra=2, NewField="n"), event("X")]})
    text = diff_documents(after, before)
    assert isinstance(text, Text)
    plain = text.plain
    assert "Extra: 1 -> 2" in plain
    assert 'NewField: (absent) -> "n"' in plain
    assert "1 duplicate EventId entry" in plain


async def test_the_holes_when_nothing_was_recording_are_rows_that_open_nothing(
        store: Store) -> None:
    first = store.sessions.start(endpoint=ENDPOINT, pid=1, host="h", command="watch", at=T0)
    fill(store, STORY[:2])  # #1 at T0, #2 at T0 + 1 min
    store.sessions.beat(first, T0 + timedelta(minutes=2), stopped=True)
    second = store.sessions.start(endpoint=ENDPOINT, pid=2, host="h", command="watch",
                                  at=T0 + timedelta(minutes=50))
    fill(store, STORY[2:3], start=T0 + timedelta(minutes=50))  # #3, across the hole
    store.sessions.beat(second, T0 + timedelta(minutes=51), stopped=True)
    screen = HistoryScreen(store.record, page_size=2)  # the hole falls between two pages
    app = ScreenApp(screen)
    async with app.run_test(size=(100, 24)) as pilot:
        for _ in range(200):  # the pages are read off the loop: wait for all of them
            await pilot.pause(0.02)
            if screen.exhausted and not screen._loading:
                break
            await pilot.press("G")
        shown = rows(screen)
        assert [row[-2] for row in shown] == ["-", "3", "-", "2", "1"]
        hole = shown[2][-1]
        assert hole.startswith("not recording from 2024-05-14 09:32:00 UTC to "
                               "2024-05-14 10:20:00 UTC")
        assert shown[0][-1].startswith("not recording from")  # nobody records now
        assert [r.incarnation for r in screen.records] == [3, 2, 1]
        await pilot.press("g", "j", "j", "enter")  # the hole's row: nothing to open
        await pilot.pause()
        assert app.screen is screen



LONG = "Host maintenance " + "x" * 150 + " END"  # wider than the screen


async def test_the_raw_document_is_never_wrapped(store: Store) -> None:
    """JSON cut at the screen's edge and carried on under it cannot be read or copied as
    JSON: the raw document keeps one line per line and scrolls sideways, as the event
    details do; the prose above it still wraps."""
    fill(store, [{"DocumentIncarnation": 1, "Events": [event("A-1", Description=LONG)]}])
    async with ScreenApp(HistoryScreen(store.record)).run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, IncarnationScreen))
        detail = pilot.app.screen
        await pilot.press("G")
        await pilot.pause()
        assert_not_wrapped(drawn_after(pilot.app, "Raw document"),
                           '"Description": "Host maintenance xxx', " END")
        await pilot.press("g")
        await pilot.pause()
        scroll = detail.query_one("#detail-scroll")
        assert scroll.max_scroll_x > 0
        await pilot.press("right", "right")
        await pilot.pause()
        assert scroll.scroll_x > 0
        assert '"DocumentIncarnation": 1' in body(detail)  # all of it is still the body
