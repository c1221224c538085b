"""The smallest app that hosts one of setui's screens, with setui's themes: for tests of a
screen without the dashboard around it (history, audit, replay)."""

from __future__ import annotations

from typing import Any

from textual.app import App
from textual.screen import Screen

from setui.ui.themes import DEFAULT_THEME, load_themes, variable_defaults


class ScreenApp(App[None]):
    """Opens on ``screen``, in setui's default theme."""

    def __init__(self, screen: Screen[Any]) -> None:
        super().__init__()
        self._first = screen

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return variable_defaults(self.current_theme)

    def on_mount(self) -> None:
        for theme in load_themes().themes:
            self.register_theme(theme)
        self.theme = DEFAULT_THEME
        self.push_screen(self._first)
