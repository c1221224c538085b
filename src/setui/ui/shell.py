"""What every setui app does the same way in a terminal, whatever it shows.

The live dashboard and the replay are different apps over the same screens; an operator
expects both to quit on Ctrl+C, to send no colour at all under NO_COLOR, and to say
plainly when the terminal is too small. One base class keeps those rules in one place.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import App
from textual.binding import Binding, BindingType
from textual.events import Resize
from textual.filter import Monochrome, NoColor
from textual.geometry import Size

from setui.ui.nocolor import WithoutColor
from setui.ui.screens.small import TooSmallScreen, too_small

__all__ = ["TerminalApp"]


class TerminalApp(App[None]):
    """An app that behaves in a terminal as the README promises (see the module)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # Textual's own Ctrl+C only says "press ctrl+q to quit"; in a terminal Ctrl+C
        # is how a program is stopped. The same quit as q (the dashboard's asks first
        # while an approval is in flight); priority: it quits from the filter box too.
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
    ]

    def __init__(self) -> None:
        super().__init__()
        if self.no_color:  # Textual's own filter still sends greys (38;5;244) or defaults
            self._filters = [f for f in self._filters
                             if not isinstance(f, (Monochrome, NoColor))] + [WithoutColor()]

    def on_resize(self, event: Resize) -> None:
        self._check_size(event.size)  # self.size follows a moment later

    def _check_size(self, size: Size | None = None) -> None:
        """Cover every screen with the size it needs while the terminal is too small."""
        size = size or self.size
        small = too_small(size.width, size.height)
        covered = isinstance(self.screen, TooSmallScreen)
        if small and not covered:
            self.push_screen(TooSmallScreen())
        elif covered and not small:
            self.pop_screen()
