"""``w``: the agent's plan and the change log whole, scrollable.

The pane under the timeline folds both to the lines it has; this screen shows every step
of every plan and every entry of the log, redrawn each second from the same view (only
when what it says changed: its texts are compared first).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Static

from setui.ui.format import Palette
from setui.ui.host import WindowView
from setui.ui.screens.scrolled import SCROLL_KEYS, ScrolledPage
from setui.ui.widgets.keys import KeyBar
from setui.ui.widgets.window import whole_lines

__all__ = ["WindowScreen"]


class WindowScreen(ScrolledPage):
    """The plan and the log, whole (see the module doc)."""

    SCROLLED = "#window-whole"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close"),
        Binding("w", "close", "Close", show=False),
        Binding("q", "close", "Close", show=False),
        *SCROLL_KEYS,
        Binding("g", "top", "Newest", show=False),
        Binding("G", "bottom", "Oldest", show=False),
    ]

    def __init__(self, view: Callable[[], WindowView | None], now: Callable[[], datetime],
                 palette: Callable[[], Palette]) -> None:
        super().__init__()
        self._view = view
        self._now = now
        self._palette = palette
        self._shown: list[Text] | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="window-whole"):
            yield Static(id="window-body", markup=False)
        yield KeyBar()

    def on_mount(self) -> None:
        self.page().focus()
        self.redraw()
        self.set_interval(1.0, self.redraw, name="window")

    def redraw(self) -> None:
        view = self._view()
        if view is None:
            lines = [Text("Nothing to show: no agent, and no change log here.")]
        else:
            width = self.size.width or self.app.size.width
            lines = list(whole_lines(view, self._now(), self._palette(), width))
        if lines == self._shown:
            return
        self._shown = lines
        self.query_one("#window-body", Static).update(Text("\n").join(lines))

    def plain(self) -> str:
        return "\n".join(line.plain for line in self._shown or [])
