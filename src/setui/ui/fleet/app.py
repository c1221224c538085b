"""``setui fleet``: the app. It owns the refresh timer and the thread worker that runs
:meth:`setui.fleet.FleetWatcher.refresh` (HTTP and parsing, off the event loop, one at a
time, at most every 5 s), and draws what came back.

Countdowns tick in Prometheus's clock: the time of the last answer, carried on the
monotonic clock, so a machine with a wrong clock shows the same as the fleet's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from importlib import resources
from pathlib import Path
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Input

from setui.fleet import FleetUpdate, FleetWatcher, LinkState
from setui.fleet.model import FleetGroup
from setui.fleet.watcher import MIN_REFRESH
from setui.system.gctune import collector_paused
from setui.ui.fleet.details import FleetDetailsScreen, details_text
from setui.ui.fleet.status import FleetStatus, FleetStatusView
from setui.ui.fleet.table import FleetTable
from setui.ui.fleet.view import HeaderLine, Line, build_lines
from setui.ui.format import Palette, safe
from setui.ui.screens.help import HelpScreen
from setui.ui.shell import TerminalApp
from setui.ui.themes import DEFAULT_THEME, install_themes
from setui.ui.widgets.keys import KeyBar

__all__ = ["FleetApp", "fleet_help"]


def fleet_help() -> str:
    try:
        return resources.files("setui.ui.fleet").joinpath("help.md").read_text("utf-8")
    except (OSError, FileNotFoundError):
        return "# setui fleet\n\nThe help file is missing from this installation."


class Refreshed(Message):
    """A refresh's answer, and its lines already built (on the worker's thread) for the
    filter and group that were in force then (``view``)."""

    def __init__(self, update: FleetUpdate, view: tuple[str, FleetGroup | None],
                 lines: list[Line], hidden: int) -> None:
        super().__init__()
        self.update = update
        self.view = view
        self.lines = lines
        self.hidden = hidden


def lines_for(update: FleetUpdate, text: str, group: FleetGroup | None) -> tuple[list[Line], int]:
    """The lines to show, and how many rows the filter and group hide."""
    fleet = update.fleet
    if fleet is None:
        return [], 0
    with collector_paused():
        lines = build_lines(fleet, text=text, group=group)
    if not text and group is None:
        return lines, 0
    every = len(fleet.events) + len(fleet.problem_vms())
    shown = sum(1 for line in lines if not isinstance(line, HeaderLine))
    return lines, every - shown


class FleetApp(TerminalApp):
    """Every VM's events from Prometheus, grouped, most urgent first; read-only."""

    CSS_PATH = "fleet.tcss"
    TITLE = "setui fleet"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "filter", "Filter"),
        Binding("m", "group", "This group"),
        Binding("escape", "clear", "Clear filter", show=False),
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, watcher: FleetWatcher, *, refresh: float = MIN_REFRESH,
                 theme: str = DEFAULT_THEME, user_themes: Path | None = None,
                 mono: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.watcher = watcher
        self.refresh_seconds = refresh
        self._theme_wanted = theme
        self._user_themes = user_themes
        self._mono = mono
        self.update: FleetUpdate = watcher.last
        self.palette = Palette()
        self.filter_text = ""
        self.group: FleetGroup | None = None
        self.refreshes = 0  # answers drawn (tests wait on it)
        self._busy = False  # a refresh asked for and not yet drawn
        self._querying = threading.Event()  # a query thread is running
        self._unmounted = False
        self._next_at = 0.0
        self._hidden = 0

    def compose(self) -> ComposeResult:
        yield FleetStatus(id="status")
        yield FleetTable(now=self.now, id="lines")
        yield Input(placeholder="filter: any text of a line (Enter keeps, Escape clears)",
                    id="filter")
        yield KeyBar()

    def on_mount(self) -> None:
        _, problems = install_themes(self, self._theme_wanted, self._user_themes)
        if problems:
            self.notify("\n".join(safe(p, 300) for p in problems), title="Theme problems",
                        severity="warning", timeout=15, markup=False)
        self.theme_changed_signal.subscribe(self, lambda _theme: self._restyle())
        self._restyle()
        self.query_one(FleetTable).focus()
        self._query()
        self.set_interval(1.0, self._tick, name="tick")
        self._check_size()

    def on_unmount(self) -> None:
        # Whichever of this and the query thread comes second closes the client (closing
        # twice is harmless; never while a query uses it).
        self._unmounted = True
        if not self._querying.is_set():
            self.watcher.close()

    # -- time ---------------------------------------------------------------------------------
    def now(self) -> datetime:
        """Prometheus's time of the last good answer, carried on the monotonic clock;
        this machine's before any answer."""
        update = self.update
        if update.fleet is None or update.answered_mono is None:
            return datetime.now(timezone.utc)
        return (datetime.fromtimestamp(update.fleet.at, tz=timezone.utc)
                + timedelta(seconds=self._mono() - update.answered_mono))

    def answer_age(self) -> float | None:
        if self.update.answered_mono is None:
            return None
        return max(0.0, self._mono() - self.update.answered_mono)

    # -- refreshing ---------------------------------------------------------------------------
    def _tick(self) -> None:
        if not self._busy and self._mono() >= self._next_at:
            self._query()
        self._draw_status()
        self.query_one(FleetTable).refresh()

    def _query(self) -> None:
        """Start one refresh unless one is running: never two queries at once, and the
        next starts ``refresh_seconds`` after this one started."""
        if self._busy or self._unmounted:
            return
        self._busy = True
        self._next_at = self._mono() + self.refresh_seconds
        self._refresh_worker()

    @work(thread=True, exclusive=False, group="fleet", exit_on_error=False)
    def _refresh_worker(self) -> None:
        """Waits for one refresh run on a daemon thread of its own. The worker's thread
        belongs to the event loop's executor, which the interpreter joins at exit: a
        query to a Prometheus that does not answer would hold ``q`` for its whole
        timeout. Quitting abandons the daemon thread instead."""
        view = (self.filter_text, self.group)
        done = threading.Event()
        box: list[Refreshed] = []

        def job() -> None:
            try:
                box.append(self._refresh(view))
            finally:
                self._querying.clear()
                done.set()
                if self._unmounted:
                    self.watcher.close()

        self._querying.set()
        threading.Thread(target=job, name="setui-fleet-query", daemon=True).start()
        while not done.wait(0.25):
            if self._unmounted:
                return
        if box and not self._unmounted:
            self.post_message(box[0])

    def _refresh(self, view: tuple[str, FleetGroup | None]) -> Refreshed:
        lines: list[Line] = []
        hidden = 0
        try:
            update = self.watcher.refresh()
            lines, hidden = lines_for(update, *view)
        except Exception as exc:  # never lose the view to a bug: say it, keep the last
            last = self.watcher.last
            update = FleetUpdate(last.fleet, LinkState.ERROR,
                                 f"the refresh failed: {type(exc).__name__}: {exc}",
                                 last.answered_mono, last.failures + 1)
        return Refreshed(update, view, lines, hidden)

    def on_refreshed(self, message: Refreshed) -> None:
        self._busy = False
        self.update = message.update
        self.refreshes += 1
        if message.view == (self.filter_text, self.group) and message.update.fleet is not None:
            self._hidden = message.hidden
            self._show(message.lines)
        else:  # the filter changed while the query ran, or nothing came: build them here
            self._redraw()

    # -- drawing ------------------------------------------------------------------------------
    def _restyle(self) -> None:
        self.palette = Palette.from_variables(self.get_css_variables())
        self._redraw()

    def _redraw(self) -> None:
        lines, self._hidden = lines_for(self.update, self.filter_text, self.group)
        self._show(lines)

    def _show(self, lines: list[Line]) -> None:
        """The table and the status drawn again; nothing once they are gone (an answer
        that comes while the app closes: its widgets are removed before its messages
        stop)."""
        tables = self.query(FleetTable)
        if tables:
            tables.first().show(lines, self.palette)
            self._draw_status()

    def _draw_status(self) -> None:
        auth = self.watcher.client.auth.described
        statuses = self.query(FleetStatus)
        if not statuses:
            return
        statuses.first().show(FleetStatusView(
            now=self.now(), url=self.watcher.client.url, auth=auth, update=self.update,
            answer_age=self.answer_age(), stale_after=3 * self.refresh_seconds + 5,
            next_in=max(0.0, self._next_at - self._mono()) if not self._busy else None,
            filter_text=self.filter_text, group=self.group, hidden=self._hidden),
            self.palette)

    @property
    def lines(self) -> list[Line]:
        return list(self.query_one(FleetTable).lines)

    # -- keys ---------------------------------------------------------------------------------
    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.value = self.filter_text
        box.focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value[:200]
        self._redraw()

    @on(Input.Submitted, "#filter")
    def _filter_kept(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = bool(self.filter_text)
        self.query_one(FleetTable).focus()

    def action_clear(self) -> None:
        box = self.query_one("#filter", Input)
        box.value = ""
        box.display = False
        self.filter_text = ""
        self.query_one(FleetTable).focus()
        self._redraw()

    def action_group(self) -> None:
        if self.group is not None:
            self.group = None
        else:
            chosen = self.query_one(FleetTable).selected
            if chosen is None:
                return
            self.group = chosen.group
        self._redraw()

    def action_help(self) -> None:
        self.push_screen(HelpScreen(fleet_help()))

    @on(FleetTable.Chosen)
    def _chosen(self, message: FleetTable.Chosen) -> None:
        fleet = self.update.fleet
        if fleet is None:
            return
        line = message.line
        self.push_screen(FleetDetailsScreen(lambda: details_text(line, fleet, self.now())))
