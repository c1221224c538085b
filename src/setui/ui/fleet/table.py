"""The fleet's lines in a scrolling list that draws only what is on the screen.

Ten thousand VMs with three events each are thirty thousand lines: a widget per line,
or a table that measures every cell, would take seconds to build. This one keeps the
lines as data (:mod:`setui.ui.fleet.view`) and renders the visible ones on demand, so a
refresh costs the same at any size, and the second's tick repaints one screenful.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import ClassVar

from rich.style import Style
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from setui.ui.fleet.view import EventLine, HeaderLine, Line, line_text
from setui.ui.format import Palette

__all__ = ["FleetTable"]


class FleetTable(ScrollView, can_focus=True):
    """Lines with a cursor that skips the group headers; Enter asks for details."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "choose", "Details"),
        Binding("up,k", "move(-1)", "Up", show=False),
        Binding("down,j", "move(1)", "Down", show=False),
        Binding("pageup", "move(-20)", "Page up", show=False),
        Binding("pagedown", "move(20)", "Page down", show=False),
        Binding("home,g", "edge(-1)", "First", show=False),
        Binding("end,G", "edge(1)", "Last", show=False),
    ]

    class Chosen(Message):
        def __init__(self, line: Line) -> None:
            super().__init__()
            self.line = line

    def __init__(self, *, now: Callable[[], datetime], id: str | None = None) -> None:
        super().__init__(id=id)
        self._now = now
        self.lines: Sequence[Line] = ()
        self.cursor = -1
        self.palette = Palette()
        self._base_style = Style()

    # -- data ---------------------------------------------------------------------------------
    def show(self, lines: Sequence[Line], palette: Palette) -> None:
        """New lines; the cursor stays on the same event or VM when it is still there."""
        chosen = self.selected
        self.lines = lines
        self.palette = palette
        self.cursor = -1
        if chosen is not None:
            key = _identity(chosen)
            self.cursor = next((i for i, line in enumerate(lines)
                                if _identity(line) == key), -1)
        if self.cursor < 0:
            self.cursor = self._next_row(0, 1)
        self.virtual_size = Size(self.size.width, len(lines))
        self._follow()
        self.refresh()

    @property
    def selected(self) -> Line | None:
        if 0 <= self.cursor < len(self.lines):
            return self.lines[self.cursor]
        return None

    def _next_row(self, start: int, step: int) -> int:
        index = start
        while 0 <= index < len(self.lines):
            if not isinstance(self.lines[index], HeaderLine):
                return index
            index += step
        return -1

    # -- keys ---------------------------------------------------------------------------------
    def action_move(self, step: int) -> None:
        if not self.lines:
            return
        target = max(0, min(len(self.lines) - 1, self.cursor + step))
        found = self._next_row(target, 1 if step > 0 else -1)
        if found < 0:
            found = self._next_row(target, -1 if step > 0 else 1)
        if found >= 0:
            self.cursor = found
            self._follow()
            self.refresh()

    def action_edge(self, direction: int) -> None:
        found = (self._next_row(0, 1) if direction < 0
                 else self._next_row(len(self.lines) - 1, -1))
        if found >= 0:
            self.cursor = found
            self._follow()
            self.refresh()

    def action_choose(self) -> None:
        if self.selected is not None:
            self.post_message(self.Chosen(self.selected))

    def _follow(self) -> None:
        if self.cursor < 0:
            return
        height = max(self.scrollable_content_region.height, 1)
        top = round(self.scroll_offset.y)
        if self.cursor < top:
            self.scroll_to(y=max(self.cursor - 1, 0), animate=False, immediate=True)
        elif self.cursor >= top + height:
            self.scroll_to(y=self.cursor - height + 1, animate=False, immediate=True)

    # -- drawing ------------------------------------------------------------------------------
    def render_lines(self, crop: Region) -> list[Strip]:
        # The widget's style walks every ancestor's styles: once per paint, not once per
        # line (it was a fifth of the idle dashboard's second, repainting the countdowns).
        self._base_style = self.rich_style or Style()
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.scrollable_content_region.width
        if not 0 <= index < len(self.lines):
            return Strip.blank(width, self._base_style)
        text = line_text(self.lines[index], self._now(), width, self.palette)
        if index == self.cursor:
            text.stylize("reverse")
        segments = list(text.render(self.app.console))
        strip = Strip(segments).adjust_cell_length(width).crop(scroll_x, scroll_x + width)
        return strip.apply_style(self._base_style)


def _identity(line: Line) -> object:
    if isinstance(line, HeaderLine):
        return ("group", line.group)
    if isinstance(line, EventLine):
        return ("event", line.event.event_id)
    return ("vm", line.vm.key)


