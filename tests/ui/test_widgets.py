"""The widgets' texts and the session record, without the emulator."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.strip import Strip
from textual.widgets import DataTable

from setui.core.health import ConnectionState, Health, PollResult
from setui.core.model import parse_document
from setui.core.tracker import Tracker
from setui.ui import compat
from setui.ui.format import Palette, Urgency
from setui.ui.messages import ApprovalNote, PollUpdate, Session
from setui.ui.screens.confirm import Prompt, approval_prompt
from setui.ui.screens.details import describe_event, raw_json
from setui.ui.widgets.events import EventsTable, Row, columns_for, tier_for
from setui.ui.widgets.lines import ChangedLines, changed_span, same_shape
from setui.ui.widgets.status import StatusView, status_lines
from setui.ui.widgets.summary import summary_lines
from setui.ui.widgets.timeline import Lane, tick_label, timeline_lines, until_text

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=timezone.utc)
PALETTE = Palette()


def nb(seconds: int) -> str:
    return (NOW + timedelta(seconds=seconds)).strftime("%a, %d %b %Y %H:%M:%S GMT")


def doc(incarnation: int, *events: dict[str, Any]) -> Any:
    return parse_document({"DocumentIncarnation": incarnation, "Events": list(events)})


def event(event_id: str, *, status: str = "Scheduled", seconds: int = 600,
          resources: tuple[str, ...] = ("web-0",), kind: str = "Reboot",
          **extra: Any) -> dict[str, Any]:
    return {"EventId": event_id, "EventType": kind, "EventStatus": status,
            "ResourceType": "VirtualMachine", "Resources": list(resources),
            "NotBefore": nb(seconds) if status == "Scheduled" else "",
            "Description": "Planned maintenance", "EventSource": "Platform",
            "DurationInSeconds": 15, **extra}


# -- the status line --------------------------------------------------------------------------
def view(**values: Any) -> StatusView:
    base = StatusView(now=NOW, endpoint="http://169.254.169.254",
                      health=Health(state=ConnectionState.LIVE, last_success=NOW),
                      vm_name="web-0", incarnation=7, last_seen=NOW - timedelta(seconds=1))
    return replace(base, **values)


def test_status_live() -> None:
    first, second = (line.plain for line in status_lines(view(), 120, PALETTE))
    assert first.startswith("setui VM web-0  http://169.254.169.254")
    assert first.endswith("10:00:00 UTC  11:00:00 CET")
    assert len(first) == 120
    assert second == "● live  ·  last answer <2s ago  ·  incarnation 7"


def test_status_demo_and_read_only_are_unmissable() -> None:
    first = status_lines(view(demo=True, read_only=True), 100, PALETTE)[0].plain
    assert first.startswith(" DEMO  setui VM web-0   READ-ONLY ")


def test_status_failing_connection_gives_the_reason_a_line() -> None:
    health = Health(state=ConnectionState.RETRYING, last_error="the service answered 500",
                    next_attempt_in=3.6, consecutive_failures=2)
    lines = [line.plain for line in status_lines(view(health=health, last_seen=NOW - timedelta(
        seconds=42)), 100, PALETTE)]
    assert lines[1].startswith("↻ retrying (next try in 4 s)  ·  STALE: showing the last "
                               "answer, 42s old")
    assert lines[2] == "  ↳ the service answered 500"
    unreachable = Health(state=ConnectionState.UNREACHABLE, last_error="nothing answers")
    lines = [line.plain for line in status_lines(view(health=unreachable), 80, PALETTE)]
    assert lines[1].startswith("✖ unreachable (trying now)")  # no wait: a try under way
    assert lines[2] == "  ↳ nothing answers"


def test_status_enabling_and_problems() -> None:
    lines = status_lines(view(health=Health(), last_seen=None, incarnation=None,
                              vm_name=None, store_problem="disk full [x]\x1b",
                              this_vm_only=True, filter_text="db"), 200, PALETTE)
    first, second, store = (line.plain for line in lines)
    assert "VM (asking IMDS…)" in first
    assert second.startswith("◌ enabling: first call; the service can take up to 2 minutes")
    assert "history NOT recorded" in second
    assert "this VM only (m)" in second and "filter “db”" in second
    # The reason on a line of its own, escaped.
    assert store == "  ↳ history NOT recorded: disk full [x]\\x1b"


def test_status_connection_and_store_problems_each_get_a_line() -> None:
    health = Health(state=ConnectionState.UNREACHABLE, last_error="connection refused")
    lines = [line.plain for line in status_lines(
        view(health=health, store_problem="the store …/setui.db is closed"), 80, PALETTE)]
    assert lines[2] == "  ↳ connection refused"
    assert lines[3] == "  ↳ history NOT recorded: the store …/setui.db is closed"


def test_status_clock_skew_is_told() -> None:
    health = Health(state=ConnectionState.LIVE, clock_skew=35.2)
    second = status_lines(view(health=health), 200, PALETTE)[1].plain
    assert "this VM's clock is 35 s behind the service's" in second


def test_status_is_cut_to_the_width() -> None:
    long = view(endpoint="http://" + "x" * 300, health=Health(
        state=ConnectionState.UNREACHABLE, last_error="y" * 500))
    for line in status_lines(long, 80, PALETTE):
        assert line.cell_len <= 80


SEPARATOR = re.compile(r" {1,2}· {1,2}")


@pytest.mark.parametrize("values", [
    {"recorder": "history: only while open"},
    {"recorder": "recorder: pid 4242", "this_vm_only": True, "filter_text": "web", "hidden": 3},
    {"health": Health(state=ConnectionState.STALE, clock_skew=-12.0),
     "last_seen": NOW - timedelta(seconds=75), "recorder": "history: only while open"},
    {"health": Health(state=ConnectionState.RETRYING, next_attempt_in=12.0,
                      last_error="the service answered 500"),
     "store_problem": "the disk is full", "incarnation": 12345,
     "last_seen": NOW - timedelta(seconds=80)},
    {"health": Health(), "last_seen": None, "incarnation": None},
])
def test_status_parts_are_whole_at_every_width(values: dict[str, Any]) -> None:
    """At 60 columns the second line ended "history: only while open" as "his…": a part
    is shown whole, in a shorter form, or not at all, and never a word cut short. What
    hides rows, staleness and a history not recorded stay at any width the dashboard
    runs at (60 columns, 58 inside the padding)."""
    wide = status_lines(view(**values), 300, PALETTE)[1].plain
    long_parts = SEPARATOR.split(wide)
    for width in range(58, 200):
        second = status_lines(view(**values), width, PALETTE)[1]
        assert second.cell_len <= width
        text = second.plain.rstrip()
        assert "…" not in text, (width, text)
        for part in SEPARATOR.split(text):
            # Each part is one of the wide line's, or a shorter form of one: the words
            # it starts with (a symbol, STALE, history, the filter) are the same.
            assert any(part == whole or part.split()[0] == whole.split()[0]
                       or part.split()[0].rstrip(".:") in whole
                       for whole in long_parts), (width, part)
        for kept in ("hidden", "STALE", "NOT recorded"):
            if kept in wide:
                assert kept in text, (width, kept, text)


# -- the timeline -----------------------------------------------------------------------------
def test_tick_labels() -> None:
    assert [tick_label(t) for t in (-600, 0, 900, 3600, 5400, 86400)] == [
        "-10m", "now", "+15m", "+1h", "+1h30", "+1d"]


def test_timeline_marks() -> None:
    lanes = [
        Lane("A", "Reboot", True, not_before=NOW + timedelta(minutes=20), duration=-1,
             urgency=Urgency.CALM, selected=True),
        Lane("B", "Freeze", False, not_before=NOW + timedelta(minutes=30), duration=600),
        Lane("C", "Redeploy", True, not_before=NOW + timedelta(days=7), duration=0),
        Lane("D", "Reboot", True, started_at=NOW - timedelta(minutes=5), duration=120),
        Lane("E", "Freeze", True, not_before=NOW + timedelta(minutes=3),
             gone_at=NOW - timedelta(minutes=2), fate="cancelled"),
    ]
    lines = [line.plain for line in timeline_lines(lanes, NOW, (600, 3600), 100, PALETTE, 10)]
    assert lines[0].startswith("zoom -10m…+1h   -10m")
    assert "now" in lines[0] and "+1h" in lines[0]
    assert all(len(line) <= 100 for line in lines)
    a, b, c, d, e = lines[1:]
    assert a.startswith("›Reboot ▲") and "│" in a and "◆?" in a
    assert b.startswith(" Freeze ") and "◆██" in b
    assert c.endswith("· in 7d 00h →")
    assert "▶██━" in d
    assert "✗" in e and "cancelled 09:58" in e


def test_timeline_keeps_to_its_height() -> None:
    lanes = [Lane(str(i), "Freeze", False, not_before=NOW + timedelta(minutes=i))
             for i in range(10)]
    lines = timeline_lines(lanes, NOW, (600, 3600), 80, PALETTE, 4)
    assert len(lines) == 5
    assert lines[-1].plain == "  … 7 more lanes"


def test_a_note_past_the_right_edge_counts_minutes() -> None:
    assert [until_text(s) for s in (600, 3720, 3779, 7 * 86400)] == [
        "10m", "1h02", "1h02", "7d 00h"]
    lanes = [Lane("A", "Reboot", True, not_before=NOW + timedelta(minutes=62, seconds=30),
                  duration=-1)]
    first = timeline_lines(lanes, NOW, (600, 3600), 80, PALETTE, 4)
    later = timeline_lines(lanes, NOW + timedelta(seconds=1), (600, 3600), 80, PALETTE, 4)
    assert first[1].plain.endswith("in 1h02 →")
    # The same second of the note's minute: the very same lane, drawn once.
    assert later[1] is first[1]
    moved = timeline_lines(lanes, NOW + timedelta(seconds=31), (600, 3600), 80, PALETTE, 4)
    assert moved[1].plain.endswith("in 1h01 →")


def test_timeline_lane_labels_are_literal() -> None:
    lanes = [Lane("X", "[b]Evil\x1b[0m", True, not_before=NOW + timedelta(minutes=5))]
    line = timeline_lines(lanes, NOW, (600, 3600), 80, PALETTE, 4)[1].plain
    assert line.startswith(" [b]Evil… ▲")


# -- the table --------------------------------------------------------------------------------
def test_columns_by_width() -> None:
    assert tier_for(80) == "narrow" and tier_for(100) == "medium" and tier_for(140) == "wide"
    assert [k for k, _ in columns_for("narrow")] == ["type", "countdown", "utc", "impact",
                                                      "resources", "approved"]
    assert "status" in dict(columns_for("medium")) and "local" not in dict(columns_for(
        "medium"))
    assert len(columns_for("wide")) == 9
    # Standalone, the rows show this dashboard's approvals; attached, anyone's (the
    # agent's audit log), each with who approved.
    assert dict(columns_for("wide"))["approved"] == "Approved here"
    assert dict(columns_for("wide", here=False))["approved"] == "Approved"


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield EventsTable()


def rows(*items: tuple[str, str]) -> list[Row]:
    return [Row(key, {"type": Text(key), "countdown": Text(value)}) for key, value in items]


async def test_table_updates_cells_in_place_and_follows_the_selection() -> None:
    app = TableApp()
    columns = [("type", "Type"), ("countdown", "Countdown")]
    async with app.run_test() as pilot:
        table = app.query_one(EventsTable)
        table.sync(columns, rows(("A", "T-1:00"), ("B", "T-2:00"), ("C", "T-3:00")))
        table.select_key("B")
        await pilot.pause()
        assert table.rebuilds == 1
        table.sync(columns, rows(("A", "T-0:59"), ("B", "T-1:59"), ("C", "T-2:59")))
        assert table.rebuilds == 1  # same rows: cells updated, not rebuilt
        assert table.cell_text("A", "countdown") == "T-0:59"
        table.sync(columns, rows(("C", "T-2:58"), ("B", "T-1:58")))  # A left, order changed
        await pilot.pause()
        assert table.rebuilds == 2
        assert table.selected_key == "B"
        table.sync(columns, rows(("C", "T-2:57")))  # the selected one left: a neighbour
        await pilot.pause()
        assert table.selected_key == "C"
        table.sync(columns, [])
        assert table.selected_key is None


def wide_rows(second: int, *, approved: str = "") -> list[Row]:
    return [Row(f"E{i}", {
        "type": Text("Reboot", style="bold" if i == 0 else "dim"),
        "status": Text("Scheduled", style="dim"),
        "countdown": Text(f"T-{i + 10}:{second:02d}", style="bold" if i == 0 else "dim"),
        "utc": Text("10:14:32"), "local": Text("11:14:32"), "impact": Text("5 s"),
        "source": Text("Platform"), "resources": Text(f"▲ web-{i} +1"),
        "approved": Text(approved if i == 1 else "")}) for i in range(4)]


async def test_table_lines_are_the_lines_datatable_draws() -> None:
    """EventsTable keeps rows and cells rendered; what it draws must stay exactly what
    DataTable draws for the same state (a newer Textual that renders otherwise fails
    here, not on someone's screen)."""
    app = TableApp()
    columns = columns_for("wide")
    async with app.run_test(size=(130, 12)) as pilot:
        table = app.query_one(EventsTable)

        def same_as_datatable() -> None:
            region = Region(0, 0, table.size.width, table.size.height)
            table.render_lines(region)  # as a repaint does: what the lines share, once
            for y in range(table.size.height):
                assert table.render_line(y) == DataTable.render_line(table, y), y

        table.sync(columns, wide_rows(59))
        await pilot.pause()
        same_as_datatable()
        table.select_key("E2")
        await pilot.pause()
        same_as_datatable()
        rendered, patched = table.cells_rendered, table.rows_patched
        table.sync(columns, wide_rows(58))  # countdowns tick: characters change in place
        await pilot.pause()
        same_as_datatable()
        assert table.cells_rendered == rendered  # no cell rendered through Rich again
        assert table.rows_patched == patched + 4  # each row's line changed in place
        table.sync(columns, wide_rows(58, approved="approving…"))  # a new shape
        await pilot.pause()
        same_as_datatable()
        assert table.cells_rendered == rendered + 1
        table.blur()
        await pilot.pause()
        same_as_datatable()
        table.focus()
        table.hover_coordinate = table.cursor_coordinate._replace(row=0)
        table._show_hover_cursor = True
        await pilot.pause()
        same_as_datatable()


async def test_a_row_with_a_double_width_character_is_drawn_again_not_changed_in_place(
        ) -> None:
    """Where a line's characters and cells differ (a wide character left of the
    countdown), the row is rendered again: what it draws is still DataTable's."""
    app = TableApp()
    columns = columns_for("wide")

    def rows_at(second: int) -> list[Row]:
        return [Row(row.key, {**row.cells, "type": Text("再起動")})
                for row in wide_rows(second)]

    async with app.run_test(size=(130, 12)) as pilot:
        table = app.query_one(EventsTable)
        for second in (59, 58):  # drawn twice: the second in the frame the third shares
            table.sync(columns, rows_at(second))
            await pilot.pause()
        patched = table.rows_patched
        table.sync(columns, rows_at(57))
        await pilot.pause()
        assert table.rows_patched == patched
        table.render_lines(Region(0, 0, table.size.width, table.size.height))
        for y in range(table.size.height):
            assert table.render_line(y) == DataTable.render_line(table, y), y


async def test_a_ticking_countdown_repaints_only_its_changed_characters() -> None:
    app = TableApp()
    columns = columns_for("wide")
    async with app.run_test(size=(130, 12)) as pilot:
        table = app.query_one(EventsTable)
        table.sync(columns, wide_rows(59))
        await pilot.pause()
        calls: list[tuple[tuple[Region, ...], dict[str, Any]]] = []
        original = table.refresh

        def spy(*regions: Region, **kwargs: Any) -> Any:
            calls.append((regions, kwargs))
            return original(*regions, **kwargs)

        table.refresh = spy  # type: ignore[method-assign]
        table.sync(columns, wide_rows(59))  # nothing changed: nothing repainted
        assert calls == []
        table.sync(columns, wide_rows(58))  # "T-10:59" -> "T-10:58" in each row
        assert len(calls) == 1 and calls[0][1] == {}
        regions = calls[0][0]
        assert len(regions) == 4
        for index, region in enumerate(regions):
            cell = table.cell_region(f"E{index}", "countdown")
            assert cell.contains_region(region)
            assert (region.width, region.height) == (1, 1)  # the last digit only
            assert region.x == cell.x + table.cell_padding + len("T-10:5")
        table.refresh = original  # type: ignore[method-assign]
        await pilot.pause()
        assert table.cell_text("E3", "countdown") == "T-13:58"
        screen = "\n".join(strip.text for strip in app.screen._compositor.render_strips())
        assert "T-13:58" in screen and "T-13:59" not in screen


# -- lines that repaint only what changed ------------------------------------------------------
def strip(*parts: tuple[str, str]) -> Strip:
    return Strip([Segment(text, Style.parse(style) if style else None) for text, style in parts])


def test_changed_span_finds_the_cells_that_differ() -> None:
    clock = strip(("setui VM web-0", "bold"), ("   ", ""), ("10:00:01 UTC", ""))
    assert changed_span(clock, clock) is None
    assert changed_span(None, clock) == (0, 29)
    # One digit.
    assert changed_span(clock, strip(("setui VM web-0", "bold"), ("   ", ""),
                                     ("10:00:02 UTC", ""))) == (24, 25)
    # The same cells cut into segments differently: nothing to repaint.
    assert changed_span(clock, strip(("setui VM web-0", "bold"), ("   10:00:01", ""),
                                     (" UTC", ""))) is None
    # Only a style changed.
    assert changed_span(clock, strip(("setui VM web-0", "bold"), ("   ", ""),
                                     ("10:00:01", ""), (" UTC", "dim"))) == (25, 29)
    # A longer line, a shorter one; a word that got shorter moves what follows it.
    assert changed_span(strip(("ab", "")), strip(("abcd", ""))) == (2, 4)
    assert changed_span(strip(("abcd", "")), strip(("ab", ""))) == (2, 4)
    assert changed_span(strip(("Freeze  Scheduled  for web-0", "")),
                        strip(("Freeze  Started  for web-0", ""))) == (9, 28)
    # Double-width characters are repainted whole.
    assert changed_span(strip(("日本1", "")), strip(("日本2", ""))) == (4, 5)
    assert changed_span(strip(("日本1", "")), strip(("月本1", ""))) == (0, 2)


class LinesApp(App[None]):
    def compose(self) -> ComposeResult:
        yield ChangedLines()


async def test_changed_lines_repaint_only_the_changed_cells() -> None:
    app = LinesApp()
    async with app.run_test(size=(60, 6)) as pilot:
        widget = app.query_one(ChangedLines)
        widget.set_lines([Text("setui VM web-0"), Text("● live  ·  10:00:01")])
        await pilot.pause()
        calls: list[tuple[tuple[Region, ...], dict[str, Any]]] = []
        original = widget.refresh

        def spy(*regions: Region, **kwargs: Any) -> Any:
            calls.append((regions, kwargs))
            return original(*regions, **kwargs)

        widget.refresh = spy  # type: ignore[method-assign]
        assert not widget.set_lines([Text("setui VM web-0"), Text("● live  ·  10:00:01")])
        assert calls == []
        assert widget.set_lines([Text("setui VM web-0"), Text("● live  ·  10:00:02")])
        assert calls == [((Region(18, 1, 1, 1),), {})]
        calls.clear()
        widget.set_lines([Text("setui VM web-0"), Text("● live"), Text("↳ a reason")])
        assert calls == [((), {"layout": True})]  # one more line: laid out again
        widget.refresh = original  # type: ignore[method-assign]
        await pilot.pause()
        assert widget.size.height == 3
        assert widget.plain() == "setui VM web-0\n● live\n↳ a reason"


async def test_characters_changed_in_place_render_as_textual_renders_them() -> None:
    app = LinesApp()
    async with app.run_test(size=(60, 6)) as pilot:
        widget = app.query_one(ChangedLines)
        await pilot.pause()

        def clock(second: int, style: str = "") -> Text:
            line = Text(" DEMO ", style="bold reverse")
            line.append(" setui ", style="bold")
            line.append(f"10:00:{second:02d} UTC", style=style or "#8a94a1")
            return line

        before = widget._render_text(clock(1))
        after = same_shape(before, clock(1), clock(2))
        assert after is not None and after == widget._render_text(clock(2))
        assert after.text.endswith("10:00:02 UTC")
        # Another style, another length, a cut line: rendered the long way instead.
        assert same_shape(before, clock(1), clock(2, style="bold")) is None
        assert same_shape(before, clock(1), Text(" DEMO  setui 10:00:02 UTC")) is None
        cut = widget._render_text(Text("x" * 80))  # wider than the widget: cut
        assert same_shape(cut, Text("x" * 80), Text("y" * 80)) is None


async def test_a_partial_repaint_writes_only_the_cells_asked_for() -> None:
    """Textual writes a dirty span from the widget's left edge (Textualize/textual#5625);
    with compat installed (as a setui app does at start) a tick of the clock sends its
    one changed digit."""
    app = LinesApp()
    writes: list[str] = []
    assert compat.install()
    async with app.run_test(size=(60, 6)) as pilot:
        assert compat.installed()
        original = app._display

        def display(screen: Any, renderable: Any) -> None:
            if type(renderable).__name__ == "ChopsUpdate":
                writes.append(renderable.render_segments(app.console))
            original(screen, renderable)

        app._display = display  # type: ignore[method-assign]
        widget = app.query_one(ChangedLines)
        widget.set_lines([Text("setui VM web-0" + " " * 30 + "10:00:01 UTC", style="bold")])
        await pilot.pause()
        writes.clear()
        widget.set_lines([Text("setui VM web-0" + " " * 30 + "10:00:02 UTC", style="bold")])
        await pilot.pause()
    assert len(writes) == 1
    # The cursor moves to the digit (51 cells in: row 1, column 52, counted from 1) and
    # that one character is written.
    assert writes[0].startswith("\x1b[1;52H")
    assert re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", writes[0]) == "2"


def test_a_cut_never_splits_a_double_width_character() -> None:
    line = strip(("ab日本cd", ""))
    assert compat.whole_cells(line, 3, 4) == (2, 4)  # 日 is cells 2-3
    assert compat.whole_cells(line, 4, 5) == (4, 6)  # 本 is cells 4-5
    assert compat.whole_cells(line, 6, 7) == (6, 7)


# -- the summary, the dialog, the details ----------------------------------------------------
def test_summary_lines() -> None:
    document = doc(3, event("E1", resources=("web-0", "web-1")))
    note = ApprovalNote("E1", NOW, "oncall", approved=True)
    first, second = (line.plain for line in summary_lines(document.events[0], "web-0", NOW,
                                                          note, PALETTE, 200))
    assert first == ("› Reboot  Scheduled  for web-0 (this VM), web-1  approved 10:00:00 by "
                     "oncall  source Platform  impact 15 s")
    assert second == ("NotBefore 2026-11-22 10:10:00 UTC (11:10:00 CET)  "
                      "“Planned maintenance”")


def test_summary_keeps_this_vm_whole_at_60_columns_and_gives_a_failure_its_line() -> None:
    long_name = "web-frontend-production-0042"
    target = doc(3, event("E1", resources=(long_name, "web-1", "web-2"))).events[0]
    for width in (56, 78, 200):
        first, _ = summary_lines(target, long_name, NOW, None, PALETTE, width)
        assert "(this VM)" in first.plain and first.cell_len <= width, first.plain
    failed = ApprovalNote("E1", NOW, "oncall", refused=True,
                          message="setui is read-only here")
    first, second = summary_lines(target, long_name, NOW, failed, PALETTE, 56)
    assert "(this VM)" in first.plain
    assert second.plain.startswith("✗ not approved 10:00:00: setui is read-only here")


def _all(prompt: Prompt) -> str:
    return "\n".join(t.plain for t in (prompt.top, prompt.body, prompt.starts, prompt.who))


def test_approval_prompt_for_this_vm_only() -> None:
    target = doc(3, event("E1")).events[0]
    prompt = approval_prompt(target, vm_name="web-0", identity="oncall on vm", now=NOW)
    assert prompt.title == "Approve this Reboot now?"
    assert not prompt.loud and not prompt.typed  # one key, y, approves it
    text = prompt.body.plain
    assert "NotBefore   2026-11-22 10:10:00 UTC (11:10:00 CET), T-10:00" in text
    assert "Approving lets Azure start this now instead of waiting for NotBefore." in text
    assert prompt.starts.plain == "It will start for:  web-0 (this VM)"
    assert prompt.who.plain == "Recorded in the audit log as:  oncall on vm"
    assert "WARNING" not in _all(prompt) and not prompt.top.plain


def test_approval_prompt_is_loud_for_other_vms() -> None:
    target = doc(3, event("E1", resources=("web-0", "web-1", "web-2"))).events[0]
    prompt = approval_prompt(target, vm_name="web-0", identity="me", now=NOW)
    assert prompt.loud and prompt.typed  # "yes" must be typed
    assert "!! WARNING: this also starts it for 2 other VMs: web-1, web-2." in prompt.top.plain
    assert prompt.starts.plain == "It will start for 3 VMs:  web-0 (this VM), web-1, web-2"
    other = doc(3, event("E2", resources=("db-0",))).events[0]
    prompt = approval_prompt(other, vm_name="web-0", identity="me", now=NOW)
    assert prompt.typed and "!! This event does not list web-0." in prompt.top.plain


def test_approval_prompt_when_the_event_started_or_left() -> None:
    started = doc(4, event("E1", status="Started")).events[0]
    prompt = approval_prompt(started, vm_name="web-0", identity="me", now=NOW)
    assert prompt.top.plain.startswith(
        "!! This event has started: approving it now will be refused")
    gone = doc(4, event("E1")).events[0]
    prompt = approval_prompt(gone, vm_name="web-0", identity="me", now=NOW, present=False)
    assert "is no longer in the document" in prompt.top.plain
    assert "T-10:00" not in _all(prompt)


def test_approval_prompt_asked_again_says_what_changed_and_who_approved() -> None:
    target = doc(4, event("E1")).events[0]
    prompt = approval_prompt(target, vm_name="web-0", identity="me", now=NOW,
                             changes=("type: Freeze -> Reboot",),
                             claimed="already approved by bob on vm at 10:00 (audit record 7)")
    assert prompt.top.plain.startswith("!! It changed since you confirmed, so nothing was "
                                       "sent: type: Freeze -> Reboot")
    assert "already approved by bob on vm at 10:00 (audit record 7). Approve it again?" \
        in prompt.top.plain


def test_details_show_every_field_and_unknown_ones_literally() -> None:
    target = doc(5, event("E1", kind="Hibernate", Extra="[i]x[/i]\x1b[1m",
                          Resources=["web-0", "db-0"])).events[0]
    session = Session()
    tracker = Tracker()
    for change in tracker.update(doc(5, dict(target.raw)), NOW):
        session.record(change)
    text = describe_event(target, vm_name="web-0", now=NOW, present=True,
                          life=session.lives["E1"]).plain
    for name in ("EventId", "EventType", "EventStatus", "NotBefore", "DurationInSeconds",
                 "EventSource", "ResourceType", "Resources", "Description"):
        assert name in text
    assert "Hibernate  (a type setui does not know)" in text
    assert "web-0  ◀ this VM" in text and "db-0" in text
    assert 'Extra             "[i]x[/i]\\u001b[1m"' in text
    assert "10:00:00 UTC (11:00:00 CET)  in the first document setui saw (incarnation 5)" \
        in text
    assert '"Extra": "[i]x[/i]\\u001b[1m"' in raw_json(target).plain


# -- messages and the session ----------------------------------------------------------------
def result(document: Any, changes: Any = (), *, fresh: bool = True,
           state: ConnectionState = ConnectionState.LIVE) -> PollResult:
    return PollResult(Health(state=state), document, tuple(changes), fresh=fresh,
                      seen_at=NOW if fresh else None)


def test_poll_updates_coalesce_only_without_changes() -> None:
    quiet = PollUpdate(result(doc(1)))
    busy = PollUpdate(result(doc(1), changes=[object()]))
    newer = PollUpdate(result(doc(1)))
    assert newer.can_replace(quiet)
    assert not newer.can_replace(busy)
    assert not PollUpdate(result(doc(2))).can_replace(quiet)  # keep each incarnation
    assert PollUpdate(result(doc(2))).can_replace(PollUpdate(result(None, fresh=False)))


def test_session_follows_an_event_through_its_life() -> None:
    tracker = Tracker()
    session = Session()
    steps = [
        doc(1),
        doc(2, event("E1", seconds=60)),
        doc(3, event("E1", status="Started")),
        doc(4),
    ]
    said: list[str] = []
    for minute, document in enumerate(steps):
        seen = NOW + timedelta(minutes=minute)
        changes = tracker.update(document, seen)
        announce, _ = session.apply(replace(result(document, changes), seen_at=seen))
        said += [c.kind.value for c in announce]
    assert said == ["appeared", "started", "completed"]
    life = session.lives["E1"]
    assert (life.first_incarnation, life.started_incarnation, life.gone_incarnation) == (2, 3, 4)
    assert life.started_exact and life.fate == "completed"
    assert [g.fate for g in session.gone] == ["completed"]
    assert session.incarnation_since == NOW + timedelta(minutes=3)


def test_session_does_not_announce_the_first_document_and_tells_connection_changes() -> None:
    tracker = Tracker()
    session = Session()
    first = doc(7, event("E1", status="Started"))
    announce, previous = session.apply(result(first, tracker.update(first, NOW)))
    assert announce == []
    assert previous is ConnectionState.ENABLING
    assert not session.lives["E1"].started_exact
    _, previous = session.apply(result(first, fresh=False, state=ConnectionState.UNREACHABLE))
    assert previous is ConnectionState.LIVE
    _, previous = session.apply(result(first, fresh=False, state=ConnectionState.UNREACHABLE))
    assert previous is None


def test_session_approvals() -> None:
    session = Session()
    session.mark_pending("E1", NOW, "oncall")
    assert session.pending("E1")
    session.note_approval(ApprovalNote("E1", NOW, "oncall", approved=True, message="ok"))
    assert not session.pending("E1") and session.approvals["E1"].approved
    session.note_approval(ApprovalNote("E1", NOW, "oncall", refused=True, message="no"))
    assert session.approvals["E1"].approved  # a later refusal does not hide the approval


def test_the_local_column_shows_only_where_local_time_differs_from_utc(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Local time beside UTC only when the zone differs (setui.core.timefmt): on a VM
    that keeps UTC, as most do, a Local column would repeat NotBefore UTC."""
    import time as _time

    from setui.core.timefmt import local_differs

    moment = datetime(2026, 11, 24, 3, 0, tzinfo=timezone.utc)
    if not hasattr(_time, "tzset"):
        pytest.skip("time.tzset is POSIX-only")
    try:
        monkeypatch.setenv("TZ", "UTC")
        _time.tzset()
        assert not local_differs(moment)
        monkeypatch.setenv("TZ", "Europe/Paris")
        _time.tzset()
        assert local_differs(moment)
    finally:
        monkeypatch.undo()
        _time.tzset()
    assert "local" in dict(columns_for("wide", local=True))
    assert "local" not in dict(columns_for("wide", local=False))
