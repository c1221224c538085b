"""``setui replay``: the dashboard over the record instead of a live monitor.

No IMDS client, no poller, no approver: only the record (a store, or the agent's read
through its API: store.reading.Record), read on a thread by the
:class:`~setui.ui.screens.replay.ReplayScreen` it opens on. Closing that screen quits.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual.binding import Binding, BindingType
from textual.notifications import SeverityLevel
from textual.screen import Screen

from setui.ui.format import Palette, safe
from setui.ui.screens.help import HelpScreen
from setui.ui.screens.replay import ReplayScreen
from setui.ui.shell import TerminalApp
from setui.ui.themes import install_themes

if TYPE_CHECKING:
    from setui.settings.config import Config
    from setui.store.reading import Record

__all__ = ["ReplayApp"]


class ReplayApp(TerminalApp):
    """The dashboard as it was, moment by moment, from the record."""

    CSS_PATH = "app.tcss"
    TITLE = "setui REPLAY"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, *, config: Config, store: Record | None,
                 store_problem: str | None = None, since: datetime | None = None,
                 until: datetime | None = None, at: datetime | None = None,
                 user_themes: Path | None = None) -> None:
        super().__init__()
        self.config = config
        self.palette = Palette()
        self._user_themes = user_themes
        self.replay_screen = ReplayScreen(store, config, vm_name=config.vm_name, since=since,
                                          until=until, at=at, store_problem=store_problem)

    def get_default_screen(self) -> Screen[None]:
        return self.replay_screen

    def on_mount(self) -> None:
        _names, problems = install_themes(self, self.config.theme, self._user_themes)
        self.theme_changed_signal.subscribe(self, lambda _theme: self._restyle())
        self._restyle()
        self._check_size()
        if problems:
            self.notify("\n".join(safe(p, 300) for p in problems), title="Theme problems",
                        severity="warning", timeout=15, markup=False)

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """On the replay's notice line, never over it (see setui.ui.widgets.notices)."""
        self.replay_screen.show_news(message, title=title, severity=severity, timeout=timeout,
                                     markup=markup)

    def _restyle(self) -> None:
        self.palette = Palette.from_variables(self.get_css_variables())
        self.replay_screen.refresh_view()

    def action_help(self) -> None:
        self.push_screen(HelpScreen())
