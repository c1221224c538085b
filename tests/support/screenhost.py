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


def drawn_after(app: App[Any], heading: str) -> list[str]:
    """The lines the screen draws after the one with ``heading`` (all of them when it
    scrolled away above)."""
    lines = [strip.text.rstrip() for strip in app.screen._compositor.render_strips()]
    start = next((i for i, line in enumerate(lines) if heading in line), -1)
    return lines[start + 1:]


def assert_not_wrapped(lines: list[str], start: str, end: str) -> None:
    """A JSON line that starts with ``start`` and ends with ``end`` far past the screen's
    edge is drawn on one line, cut there, and not carried on below."""
    found = [line for line in lines if start in line]
    assert found, "\n".join(lines)  # the value on its key's line
    assert not found[0].endswith(end), found[0]  # cut at the edge
    assert not any(end in line for line in lines), lines  # and not carried on below
