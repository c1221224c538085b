"""What every setui app does the same way in a terminal, whatever it shows.

The live dashboard, the replay and the fleet view are different apps; an operator
expects each to quit on Ctrl+C, to send no colour at all under NO_COLOR, and to say
plainly when the terminal is too small; setui's stylesheets work under any theme,
Textual's own too. One base class keeps those rules in one place, and installs
Textual's workarounds (setui.ui.compat) when the app starts.

A base class, not a part the apps own, because Textual is used that way: an app is a
subclass of its ``App``, and these rules are hooks only a subclass can answer (the
bindings, the line filters, the CSS variables, the resize handler). It sets what it
keeps itself, in its ``__init__``, and reads nothing its subclasses set.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from textual.app import App
from textual.binding import Binding, BindingType
from textual.events import Resize
from textual.filter import LineFilter
from textual.geometry import Size

from setui.ui import compat
from setui.ui.nocolor import WithoutColor, no_color_styles
from setui.ui.screens.small import TooSmallScreen, too_small
from setui.ui.themes import MONO_THEME, variable_defaults

__all__ = ["TerminalApp"]


class TerminalApp(App[None]):
    """An app that behaves in a terminal as docs/operating.md promises (see the module)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # Textual's own Ctrl+C only says "press ctrl+q to quit"; in a terminal Ctrl+C
        # is how a program is stopped. The same quit as q (the dashboard's asks first
        # while an approval is in flight); priority: it quits from the filter box too.
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
    ]

    def __init__(self) -> None:
        super().__init__()
        compat.install()  # only the cells a repaint asked for reach the terminal
        self.driver_class = compat.quiet_input(self.driver_class)  # no wakes while idle
        self._without_color: tuple[LineFilter, ...] = (WithoutColor(),)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        """setui's CSS variables for any theme, Textual's own too (see themes)."""
        return variable_defaults(self.current_theme)

    def get_line_filters(self) -> Sequence[LineFilter]:
        """Under NO_COLOR, the one filter that drops every colour and keeps every attribute
        (see :mod:`setui.ui.nocolor`): Textual's own sends greys, and its truecolor filter
        turns dim into a blended colour, which leaves nothing once colour is dropped."""
        if self.no_color:
            return self._without_color
        return super().get_line_filters()

    def get_css_variables(self) -> dict[str, str]:
        """Under NO_COLOR, every theme's text styles are the mono theme's: its colours
        never reach the terminal, so its attributes are all that can tell things apart,
        and they must say what the help says (the selection reverse, a neighbour dim)."""
        variables = super().get_css_variables()
        if self.no_color:
            variables.update(no_color_styles(self.get_theme(MONO_THEME)))
        return variables

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
