"""What the scrolled pages share (the help, the plan and the log, an event's details, a
history or audit record's page, the fleet's details): closing, and j/k/g/G over the
page's one scroll."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen

__all__ = ["SCROLL_KEYS", "ScrolledPage"]

# For the screens' own BINDINGS (the help is checked against a class's own).
SCROLL_KEYS: list[BindingType] = [
    Binding("j", "scroll(1)", "Down", show=False),
    Binding("k", "scroll(-1)", "Up", show=False),
]


class ScrolledPage(Screen[None]):
    """A page in one ``VerticalScroll``, the one ``SCROLLED`` (a selector) names."""

    SCROLLED: ClassVar[str]

    def page(self) -> VerticalScroll:
        return self.query_one(self.SCROLLED, VerticalScroll)

    def action_close(self) -> None:
        self.dismiss()

    def action_scroll(self, lines: int) -> None:
        self.page().scroll_relative(y=lines, animate=False)

    def action_top(self) -> None:
        self.page().scroll_home(animate=False)

    def action_bottom(self) -> None:
        self.page().scroll_end(animate=False)
