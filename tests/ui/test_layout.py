"""What a tired operator sees at 80x24: nothing cut off, nothing covered for long, no
repaint that is not needed, and the dialog's keys always on the screen."""

from __future__ import annotations

import gc
import re
import weakref
from typing import Any, ClassVar

import pytest
from rich.cells import cell_len
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.geometry import Region
from textual.widgets import Footer, Static
from textual.widgets._footer import FooterKey

from setui.ui.screens.confirm import ConfirmationModal
from setui.ui.screens.main import MainScreen, share_height
from setui.ui.widgets.events import EventsTable
from setui.ui.widgets.notices import MAX_NOTICES, NoticeLine
from setui.ui.widgets.status import StatusBar
from setui.ui.widgets.summary import EventSummary
from setui.ui.widgets.timeline import Timeline
from tests.support.dashboard import (
    NARROW,
    WIDE,
    MakeDashboard,
    open_dialog,
    screen_text,
    start,
    status,
    table,
    wait_for,
)


# -- sharing the height -------------------------------------------------------------------------
def test_share_height_gives_both_what_they_need_when_it_fits() -> None:
    assert share_height(14, rows=4, lanes=6) == (8, 6)


def test_share_height_keeps_half_for_the_table_when_it_does_not_fit() -> None:
    table_lines, lanes = share_height(14, rows=20, lanes=20)
    assert (table_lines, lanes) == (7, 7)
    # Few rows: the timeline gets the rest, not a fixed share.
    assert share_height(14, rows=2, lanes=20) == (3, 11)  # a header and two rows


def test_share_height_never_starves_either() -> None:
    for lines in range(0, 30):
        for rows in (0, 1, 5, 50):
            for lanes in (0, 1, 5, 50):
                table_lines, lane_lines = share_height(lines, rows=rows, lanes=lanes)
                assert table_lines >= 3 and lane_lines >= 1


async def test_timeline_uses_the_free_lines_at_80x24(make_dashboard: MakeDashboard) -> None:
    # At 440 s of busy: three events in the table, five lanes with the gone ones.
    d = make_dashboard(at=200)
    async with d.app.run_test(size=NARROW) as pilot:
        await start(d, pilot)
        await d.advance(pilot, 240, step=20)
        lines = d.app.main_screen.query_one(Timeline).plain()
        assert "more lane" not in lines
        assert "completed" in lines and "cancelled" in lines


# -- 80 columns ---------------------------------------------------------------------------------
async def test_after_an_approval_the_table_still_fits_80_columns(
        make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    d_app = d.app
    async with d_app.run_test(size=NARROW) as pilot:
        await start(d, pilot)
        d_app.confirm_guard = 0.0
        await open_dialog(d, pilot)
        await pilot.press("y", "e", "s", "enter")  # it also starts for web-1
        await d.wait_for(pilot, lambda: len(d.posts()) == 1)
        await d.advance(pilot, 12)  # the approved Freeze starts
        t = table(d)
        first = t.keys[0]
        await d.wait_for(pilot, lambda: t.cell_text(first, "approved").startswith("✓"))
        assert t.cell_text(first, "countdown").startswith("▶ ")
        assert t.cell_text(first, "countdown").endswith(" ago")
        # Every column on the screen: nothing to scroll sideways to.
        assert t.virtual_size.width <= t.size.width, (t.virtual_size, t.size)


async def test_a_failed_approval_gives_its_reason_under_the_table(
        make_dashboard: MakeDashboard) -> None:
    d = make_dashboard(store=False)
    async with d.app.run_test(size=NARROW) as pilot:
        await start(d, pilot)
        await pilot.press("a")
        await d.wait_for(pilot, lambda: "✗ not approved 10:05:00: " in d.app.main_screen
                         .query_one(EventSummary).plain())
        summary = d.app.main_screen.query_one(EventSummary).plain()
        assert "refused: the audit log cannot" in summary


# -- notices and the bell -----------------------------------------------------------------------
async def test_at_most_two_notices_take_room_from_the_dashboard(
        make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=NARROW) as pilot:
        await start(d, pilot)
        for i in range(6):
            d.app.notify(f"notice {i}", markup=False)
        await pilot.pause()
        shown = d.app.main_screen.query_one(NoticeLine).plain().splitlines()
        assert shown == [f"notice {i}" for i in range(6 - MAX_NOTICES, 6)]
        assert [f"notice {i}" for i in range(6)] == list(d.app.notices)[-6:]


async def test_the_bell_rings_for_this_vm_not_for_neighbours(
        make_dashboard: MakeDashboard, write_scenario: Any) -> None:
    scenario = write_scenario("neighbours", {
        "vm_name": "web-0",
        "events": [
            {"type": "Freeze", "at": 10, "notice": "5m", "resources": ["web-1"],
             "duration": 5},
            {"type": "Reboot", "at": 20, "notice": "5m", "resources": ["web-0"],
             "duration": 5},
        ],
    })
    d = make_dashboard(scenario, at=0)
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        await d.advance(pilot, 15)
        assert any(n.startswith("New event: Freeze for web-1") for n in d.notices())
        assert d.app.bells == 0
        await d.advance(pilot, 10)
        assert any(n.startswith("New event: Reboot for this VM") for n in d.notices())
        assert d.app.bells == 1


# -- the dialog ---------------------------------------------------------------------------------
async def test_the_dialog_keys_stay_on_an_80x24_screen_with_a_long_body(
        make_dashboard: MakeDashboard, write_scenario: Any) -> None:
    scenario = write_scenario("long", {
        "vm_name": "web-0",
        "events": [{
            "type": "Reboot", "at": 0, "notice": "10m", "duration": 5,
            "resources": ["web-0", *(f"neighbour-vm-{i:03d}" for i in range(60))],
            "description": "A description that goes on and on. " * 12,
        }],
    })
    d = make_dashboard(scenario, at=30)
    async with d.app.run_test(size=NARROW) as pilot:
        await start(d, pilot)
        dialog = await open_dialog(d, pilot)
        await pilot.pause()
        screen = dialog.region
        keys = dialog.query_one("#dialog-keys").region
        assert keys.height == 1 and screen.contains_region(keys), (keys, screen)
        body = dialog.plain()
        # The warning comes first, where no scrolling is needed to see it.
        assert body.index("WARNING: this also starts it for 60 other VMs") < body.index("EventId")
        assert "… and 41 more" in body
        await pilot.press("n")


async def test_the_dialog_says_when_the_connection_is_down(
        make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        d.emulator.stop()
        await d.wait_for(pilot, lambda: "✖ unreachable" in status(d), timeout=10)
        dialog = await open_dialog(d, pilot)
        body = dialog.plain()
        assert "The connection is unreachable: this is the last answer" in body
        await pilot.press("n")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, MainScreen))


# -- repainting ---------------------------------------------------------------------------------
async def test_a_tick_repaints_only_the_cells_that_changed(
        make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        t = table(d)
        timeline = d.app.main_screen.query_one(Timeline)
        screen = d.app.main_screen
        screen.refresh_view()
        await pilot.pause()
        before = (t.cell_updates, t.rebuilds, timeline.plain())
        screen.refresh_view()  # the same second: nothing to repaint
        await pilot.pause()
        assert (t.cell_updates, t.rebuilds, timeline.plain()) == before
        d.clock.advance(1)
        screen.refresh_view()
        await pilot.pause()
        # One second later only countdowns move: at most one cell a row.
        assert 0 < t.cell_updates - before[0] <= len(t.keys)
        assert t.rebuilds == before[1]


class RefreshSpy:
    """Records every ``refresh`` of the dashboard's widgets while it is installed."""

    def __init__(self, screen: MainScreen) -> None:
        self.widgets = [screen.query_one(kind) for kind in
                        (StatusBar, EventsTable, EventSummary, Timeline)]
        self.calls: list[tuple[str, tuple[Region, ...], dict[str, Any]]] = []
        self._originals = [widget.refresh for widget in self.widgets]

    def __enter__(self) -> RefreshSpy:
        for widget, original in zip(self.widgets, self._originals, strict=True):
            def spy(*regions: Region, _name: str = type(widget).__name__,
                    _original: Any = original, **kwargs: Any) -> Any:
                self.calls.append((_name, regions, kwargs))
                return _original(*regions, **kwargs)

            widget.refresh = spy  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        for widget, original in zip(self.widgets, self._originals, strict=True):
            widget.refresh = original  # type: ignore[method-assign]

    def of(self, name: str) -> list[tuple[tuple[Region, ...], dict[str, Any]]]:
        return [(regions, kwargs) for who, regions, kwargs in self.calls if who == name]


async def test_a_tick_with_unchanged_text_refreshes_nothing(
        make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        screen = d.app.main_screen
        screen.refresh_view()
        await pilot.pause()
        # The same instant again (the tick and a poll's answer in one second): every
        # text is the same, so no widget asks for any repaint at all.
        with RefreshSpy(screen) as spy:
            screen.refresh_view()
        assert spy.calls == []


async def test_a_changed_countdown_refreshes_only_its_cell(
        make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        screen = d.app.main_screen
        t = table(d)
        screen.refresh_view()
        await pilot.pause()
        before = {key: t.cell_text(key, "countdown") for key in t.keys}
        d.clock.advance(1)
        with RefreshSpy(screen) as spy:
            screen.refresh_view()
        changed = [key for key in t.keys if t.cell_text(key, "countdown") != before[key]]
        assert changed  # the scenario has events counting down
        calls = spy.of("EventsTable")
        assert len(calls) == 1 and calls[0][1] == {}  # regions only: no whole repaint
        regions = calls[0][0]
        assert len(regions) == len(changed)
        cells = [t.cell_region(key, "countdown").translate(-t.scroll_offset)
                 for key in changed]
        for region in regions:
            assert any(cell.contains_region(region) for cell in cells), (region, cells)
        # The status line's clock: only cells on its first line, right of the VM's name.
        for regions, kwargs in spy.of("StatusBar"):
            assert kwargs == {} and all(r.y == 0 and r.x > 40 for r in regions)
        await pilot.pause()
        text = screen_text(d)
        for key in changed:
            assert t.cell_text(key, "countdown") in text


class Terminal:
    """The characters a terminal shows after the dashboard's output: cursor moves,
    newlines and text are followed, colours and modes ignored."""

    _SEQUENCE = re.compile(r"\x1b\[(?:(\d+);(\d+)H|[0-9;?<>=]*[A-Za-z~])")

    def __init__(self, width: int, height: int) -> None:
        self.width = width
        self.cells = [[" "] * width for _ in range(height)]
        self.x = self.y = 0

    def write(self, output: str) -> None:
        at = 0
        for match in self._SEQUENCE.finditer(output):
            self._text(output[at:match.start()])
            if match.group(1):
                self.y, self.x = int(match.group(1)) - 1, int(match.group(2)) - 1
            at = match.end()
        self._text(output[at:])

    def _text(self, text: str) -> None:
        for char in text:
            if char == "\n":
                self.y += 1
                self.x = 0
            elif char == "\r":
                self.x = 0
            elif self.x < self.width:
                self.cells[self.y][self.x] = char
                self.x += 1
                if cell_len(char) == 2 and self.x < self.width:
                    self.cells[self.y][self.x] = ""
                    self.x += 1

    def text(self) -> str:
        return "\n".join("".join(row).rstrip() for row in self.cells)


@pytest.mark.parametrize("size", [WIDE, NARROW], ids=["120x36", "80x24"])
async def test_the_terminal_shows_the_screen_after_a_minute_of_partial_repaints(
        make_dashboard: MakeDashboard, size: tuple[int, int]) -> None:
    """Only changed cells are sent (setui.ui.compat.install, ChangedLines, the table's
    cells): after a minute of ticks, events starting and leaving, what the terminal
    shows must still be exactly what the app would draw from scratch."""
    d = make_dashboard(at=280)
    terminal = Terminal(*size)
    updates = {"partial": 0}
    async with d.app.run_test(size=size) as pilot:
        original = d.app._display

        def display(screen: Any, renderable: Any) -> None:
            if hasattr(renderable, "render_segments"):
                terminal.write(renderable.render_segments(d.app.console))
                updates["partial"] += type(renderable).__name__ == "ChopsUpdate"
            original(screen, renderable)

        d.app._display = display  # type: ignore[method-assign]
        d.app.screen.refresh()  # a full frame first, as the terminal driver starts with
        await start(d, pilot)
        for second in range(60):  # the Freeze of web-0 starts and ends, another is cancelled
            d.clock.advance(1)
            d.app.main_screen.refresh_view()
            await pilot.pause()
            expected = "\n".join(line.rstrip() for line in screen_text(d).split("\n"))
            # After every tick, not only at the end: a later full repaint would hide a
            # cell left stale in between.
            assert terminal.text() == expected, second
        assert updates["partial"] > 30


# -- the approval dialog leaves nothing behind -----------------------------------------------
def compact_watchers(footer: Footer) -> int:
    """How many FooterKeys the Footer keeps a data-binding watcher for (see
    bench/upstream/footer_leak.py: Textual never drops them while ``compact`` is unchanged).
    """
    return len(getattr(footer, "__watchers", {}).get("compact", []))


async def test_closing_the_approval_dialog_leaves_the_footer_as_it_was(
        make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=NARROW) as pilot:
        await start(d, pilot)
        footer = d.app.main_screen.query_one(Footer)

        async def open_and_close() -> None:
            await open_dialog(d, pilot)
            await pilot.press("escape")
            await d.wait_for(pilot, lambda: d.app.screen is d.app.main_screen)
            await pilot.pause()

        await open_and_close()
        keys = list(footer.query(FooterKey))
        watchers = compact_watchers(footer)
        for _ in range(4):
            await open_and_close()
        # The same key widgets: the Footer was not composed again (30-40 ms each time,
        # in the way of an approval's POST), and nothing piled up behind it.
        assert list(footer.query(FooterKey)) == keys
        assert compact_watchers(footer) == watchers
        assert "Approve" in screen_text(d)


class KeysApp(App[None]):
    """A screen whose keys change while a dialog covers it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("x", "act", "Act"),
                                             Binding("z", "other", "Other")]
    allowed = True

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.allowed if action == "act" else True

    def compose(self) -> ComposeResult:
        yield Static("main")
        yield Footer()


async def test_the_footer_still_follows_keys_that_changed_under_the_dialog() -> None:
    app = KeysApp()
    async with app.run_test() as pilot:
        await pilot.pause()
        footer = app.query_one(Footer)
        assert [k.description for k in footer.query(FooterKey)][:2] == ["Act", "Other"]
        await app.push_screen(ConfirmationModal("Sure?", Text("body"), guard=0))
        await pilot.pause()
        app.allowed = False
        app.pop_screen()
        await wait_for(pilot, lambda: "Act" not in
                       [k.description for k in footer.query(FooterKey)])
        assert [k.description for k in footer.query(FooterKey)][:1] == ["Other"]


async def test_a_closed_dialog_lets_its_rendered_lines_go(
        make_dashboard: MakeDashboard) -> None:
    """Textual's lru_cache on StylesCache.get_inner_outer keeps every rendered widget's
    lines alive; the dialog empties it when it closes."""
    d = make_dashboard()
    async with d.app.run_test(size=NARROW) as pilot:
        await start(d, pilot)
        dialog = await open_dialog(d, pilot)
        await pilot.pause()
        body = dialog.query_one("#dialog-body")
        rendered = weakref.ref(body._styles_cache)
        del body, dialog
        await pilot.press("escape")
        await d.wait_for(pilot, lambda: d.app.screen is d.app.main_screen)
        await pilot.pause()

        def released() -> bool:
            # The loop lets go of the closed dialog once its last timer callbacks ran;
            # Textual's cache would hold the lines for good.
            gc.collect()
            return rendered() is None

        await d.wait_for(pilot, released)


async def test_an_approval_that_fails_inside_setui_is_not_left_pending(
        make_dashboard: MakeDashboard, monkeypatch: Any) -> None:
    d = make_dashboard()

    async def broken(*_args: Any, **_kw: Any) -> Any:
        raise RuntimeError("boom")

    async with d.app.run_test(size=NARROW) as pilot:
        await start(d, pilot)
        monkeypatch.setattr(d.app.approver, "approve", broken)
        d.app.confirm_guard = 0.0
        await open_dialog(d, pilot)
        await pilot.press("y", "e", "s", "enter")  # it also starts for web-1
        first = table(d).keys[0]
        await d.wait_for(pilot, lambda: table(d).cell_text(first, "approved") == "✗ failed")
        assert any("setui failed (RuntimeError: boom)" in n for n in d.notices())


async def test_the_first_zoom_can_be_chosen(make_dashboard: MakeDashboard) -> None:
    # `setui demo` starts at the closest zoom: its sped-up notices are minutes long.
    d = make_dashboard(zoom=0)
    async with d.app.run_test(size=NARROW) as pilot:
        await start(d, pilot)
        timeline = d.app.main_screen.query_one(Timeline)
        assert timeline.plain().startswith("zoom -2m…+10m")
        await pilot.press("minus")
        assert timeline.plain().startswith("zoom -5m…+30m")


async def test_a_failing_store_is_still_offered_every_new_incarnation(
        make_dashboard: MakeDashboard, monkeypatch: Any) -> None:
    from setui.store import StoreError

    d = make_dashboard()
    tried: list[int] = []

    def failing(document: Any, **_kwargs: Any) -> bool:
        tried.append(document.incarnation)
        raise StoreError("the database stayed locked by another process")

    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        monkeypatch.setattr(d.store.history, "record", failing)
        await d.advance(pilot, 40)  # several incarnations, many polls of each
        # Five more answers of the last document: each a chance to try it again.
        polled = len(d.gets())
        await d.wait_for(pilot, lambda: len(d.gets()) >= polled + 5)
        await d.wait_for(pilot, lambda: len(set(tried)) >= 2)
        # Repeats of a document wait for the back-off; a new incarnation never does.
        assert len(set(tried)) >= 2, tried
        assert len(tried) == len(set(tried)), tried
        assert "history NOT recorded" in status(d)


def test_a_brief_store_problem_names_the_file_and_mangles_no_words() -> None:
    from pathlib import Path

    from setui.monitor import brief_store_problem
    from setui.store import StoreError

    def brief(exc: StoreError) -> str:
        return brief_store_problem(str(exc), exc.path)

    relative = StoreError("cannot record the history: the database data/setui.db is "
                          "damaged; check data", path=Path("data/setui.db"))
    assert brief(relative) == "the database …/setui.db is damaged; check data"
    absolute = StoreError("cannot record the history: the store /var/lib/setui/setui.db "
                          "is closed", path=Path("/var/lib/setui/setui.db"))
    assert brief(absolute) == "the store …/setui.db is closed"
    assert brief(StoreError("disk full")) == "disk full"
