"""What the dashboard shows in a terminal too small for it: the size it needs, in words.

Below :data:`MIN_WIDTH` x :data:`MIN_HEIGHT` the table, the summary and the keys cannot
all be read; half a dashboard would be worse than none, because what is cut off (an
event, "(this VM)", the Quit key) is exactly what the operator needs. The app covers
every screen with this one until the terminal is big enough again.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import Static

__all__ = ["MIN_HEIGHT", "MIN_WIDTH", "TooSmallScreen", "too_small", "too_small_text"]

MIN_WIDTH = 60
MIN_HEIGHT = 20


def too_small(width: int, height: int) -> bool:
    return width < MIN_WIDTH or height < MIN_HEIGHT


def too_small_text(width: int, height: int) -> Text:
    """The message, short enough for a terminal of a few lines and columns."""
    text = Text(f"setui needs at least {MIN_WIDTH}x{MIN_HEIGHT}", style="bold")
    text.append(f"\nthis terminal is {width}x{height}.\n"
                "Make the window bigger (or the font smaller).\nq quits.")
    return text


class TooSmallScreen(Screen[None]):
    """Covers the dashboard while the terminal is below the minimum size."""

    DEFAULT_CSS = """
    TooSmallScreen { align: center middle; }
    TooSmallScreen #too-small { width: auto; height: auto; max-width: 100%; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("q", "app.quit", "Quit")]

    def compose(self) -> ComposeResult:
        yield Static(too_small_text(self.app.size.width, self.app.size.height),
                     id="too-small")

    def on_screen_resume(self) -> None:
        # Back on top after a screen opened over it (help, the palette) was closed: the
        # terminal may have grown meanwhile, when this screen was not the one told.
        size = self.app.size
        if not too_small(size.width, size.height):
            self.app.pop_screen()

    def on_resize(self, event: Resize) -> None:
        self.query_one("#too-small", Static).update(
            too_small_text(event.size.width, event.size.height))
