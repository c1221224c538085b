"""``?``: every key, from the packaged ``help.md``, in a modal."""

from __future__ import annotations

from importlib import resources
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown, Static

from setui.ui.screens.scrolled import SCROLL_KEYS, ScrolledPage
from setui.ui.widgets.keys import KeyBar

__all__ = ["HelpScreen", "help_text", "read_only_help"]


def help_text() -> str:
    """The help file shipped with setui (package data ``setui/help.md``)."""
    try:
        return resources.files("setui").joinpath("help.md").read_text(encoding="utf-8")
    except (OSError, FileNotFoundError):
        return "# setui\n\nThe help file is missing from this installation."


def read_only_help(text: str) -> str:
    """The help of a read-only dashboard: no approve key, and why."""
    lines = [line for line in text.splitlines() if not line.startswith("| `a` |")]
    note = ("**Approvals are off**: this dashboard runs read-only (`--read-only`, or "
            "`read-only = true` in the config file), so `a` approves nothing.\n")
    heading = next((i for i, line in enumerate(lines) if line.startswith("## ")), len(lines))
    return "\n".join([*lines[:heading], note, *lines[heading:]]) + "\n"


class HelpScreen(ScrolledPage, ModalScreen[None]):
    """The keys, and how to read the dashboard."""

    SCROLLED = "#help"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close"),
        Binding("q", "close", "Close", show=False),
        Binding("question_mark", "close", "Close", show=False),
        *SCROLL_KEYS,
        Binding("g", "top", "Top", show=False),
        Binding("G", "bottom", "End", show=False),
        # PgUp/PgDn, Home/End and the arrows: the scroll container's own keys.
    ]

    def __init__(self, text: str | None = None, *, read_only: bool = False) -> None:
        super().__init__()
        self._text = text  # another help file (the fleet view's); default: help.md
        self.read_only = read_only  # the dashboard approves nothing: no approve key in it

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Static("Help  (Escape closes)", id="help-title")
            text = self._text if self._text is not None else help_text()
            yield Markdown(read_only_help(text) if self.read_only else text, id="help-body")
        yield KeyBar()

    def on_mount(self) -> None:
        self.page().focus()
