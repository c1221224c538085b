"""Notices: what just happened, on lines of the screen above the keys, never over anything.

Textual's toasts float over the screen: they would cover the help, the details, the
history, the timeline's lanes and the "needs at least 60x20" message, show news of the
live dashboard over a replay of the past, and at 80x24 run a long one under the key bar. A
screen that has news to give has a :class:`NoticeLine` in its layout instead, docked
above its keys: it takes the lines it needs and pushes the screen's content up.

A notice's time on the screen counts from when it is first seen: news that arrives while
another screen is on top waits on the dashboard, whole, until the operator is back. The
newest :data:`MAX_NOTICES` are shown, in at most a third of the screen's height (and
eight lines): the table keeps the rest.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.text import Text
from textual.css.query import NoMatches
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer

from setui.ui.format import Palette, safe
from setui.ui.widgets.lines import ChangedLines

__all__ = ["MAX_NOTICES", "Notice", "NoticeLine", "Noticed", "Notices", "give_notice"]

MAX_NOTICES = 2  # notices on the screen at once: the newest
DEFAULT_TIMEOUT = 5.0  # seconds on the screen when the caller gives none (as Textual's)
_MARK = {"error": "!! ", "warning": "! "}  # severity in words, not in colour alone
# Rich's wrap needs a console; only its measuring is used.
_MEASURE = Console(width=200, color_system=None, force_terminal=False, file=None)


@dataclass
class Notice:
    """One notice: its words, how loud, how long it stays once seen."""

    message: str
    title: str = ""
    severity: str = "information"
    timeout: float = DEFAULT_TIMEOUT
    markup: bool = False
    seen_at: float | None = None  # when it was first on the screen

    @property
    def text(self) -> str:
        """``title: message``, as the app keeps it."""
        return f"{self.title}: {self.message}" if self.title else self.message


class Notices:
    """The notices of one screen, oldest first, and when each leaves."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.shown: list[Notice] = []

    def add(self, notice: Notice, *, visible: bool) -> None:
        """Keep ``notice``; only the newest few stay."""
        if visible:
            notice.seen_at = self._clock()
        self.shown = [*self.shown, notice][-MAX_NOTICES:]

    def tick(self, *, visible: bool) -> bool:
        """Start the time of what is now seen, drop what has been seen long enough;
        True if a notice left."""
        now = self._clock()
        kept = []
        for notice in self.shown:
            if notice.seen_at is None and visible:
                notice.seen_at = now
            if notice.seen_at is None or now - notice.seen_at < notice.timeout:
                kept.append(notice)
        left = len(kept) != len(self.shown)
        self.shown = kept
        return left

    def clear(self) -> None:
        self.shown = []


def notice_lines(notices: list[Notice], width: int, max_lines: int,
                 palette: Palette) -> list[Text]:
    """The notices as lines of ``width`` cells, the newest last and given the room
    first; an older one that does not fit is shortened to what does, marked ``…``."""
    width = max(width, 10)
    blocks: list[list[Text]] = []
    room = max_lines
    for notice in reversed(notices):
        if room <= 0:
            break
        lines = _wrapped(notice, width, palette)
        if len(lines) > room:
            lines = lines[:room]
            last = lines[-1]
            last.truncate(width - 1)
            last.append("…")
        blocks.append(lines)
        room -= len(lines)
    return [line for block in reversed(blocks) for line in block]


def _wrapped(notice: Notice, width: int, palette: Palette) -> list[Text]:
    loud = {"error": palette.urgent, "warning": palette.soon}.get(notice.severity, "")
    text = Text(_MARK.get(notice.severity, ""), style=loud or "bold")
    if notice.title:
        text.append(safe(notice.title, 200) + ": ", style=f"bold {loud}".strip())
    # Each line made printable here too: a notice may quote what the network said.
    message = "\n".join(safe(line, 2000) for line in notice.message.split("\n")[:50])
    if notice.markup:
        try:
            text.append_text(Text.from_markup(message))
        except Exception:  # Textual's markup errors are not setui's to raise
            text.append(message)
    else:
        text.append(message)
    lines: list[Text] = []
    for paragraph in text.split("\n"):
        for line in paragraph.wrap(_MEASURE, width, overflow="fold"):
            line.rstrip()
            lines.append(line)
    return lines


class Noticed(Message):
    """A screen gave a notice of its own (an answer to a key): the app keeps a record of
    every notice, as one may be gone before anyone reads it."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


def give_notice(screen: Screen[Any], notices: Notices, message: str, *, title: str,
                severity: str, timeout: float | None, markup: bool, own: bool) -> None:
    """Put a notice on ``screen``'s notice line (``notices`` is what it shows). ``own``:
    the screen's answer to a key, which it tells the app about (:class:`Noticed`); the
    app's news it already knows."""
    notice = Notice(message, title, severity,
                    DEFAULT_TIMEOUT if timeout is None else timeout, markup)
    notices.add(notice, visible=screen.is_active)
    if screen.is_mounted:
        with contextlib.suppress(NoMatches):  # not composed yet: shown when it is
            screen.query_one(NoticeLine).show()
    if own:
        screen.post_message(Noticed(notice.text))


class NoticeLine(ChangedLines):
    """The screen's notices, docked above its keys (see the module)."""

    DEFAULT_CSS = """
    NoticeLine {
        dock: bottom;
        margin-bottom: 1;  /* the key bar's line */
        padding: 0 1;
        background: $panel;
        display: none;
    }
    NoticeLine.-shown { display: block; }
    """

    class Resized(Message):
        """The notices take another number of lines: the screen lays itself out again."""

    def __init__(self, notices: Notices, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.notices = notices
        self._timer: Timer | None = None

    def on_mount(self) -> None:
        # Ticks only while a notice waits to be seen or to leave: an idle dashboard's
        # loop is not woken twice a second for nothing (bench/, "attached").
        self._timer = self.set_interval(0.5, self._tick, name="notices", pause=True)
        self.show()

    def on_resize(self) -> None:
        self.show()  # wrapped again to the new width

    def _tick(self) -> None:
        if self.notices.tick(visible=self.screen.is_active):
            self.show()

    @property
    def lines(self) -> int:
        """Lines the notices take on the screen now."""
        return len(self.texts)

    def show(self) -> None:
        """Draw the notices as they are; say so when that takes other lines."""
        if not self.is_mounted:
            return
        before = len(self.texts)
        height = self.screen.size.height or self.app.size.height
        width = self.size.width or (self.screen.size.width or self.app.size.width) - 2
        lines = notice_lines(self.notices.shown, width, max(2, min(8, height // 3)),
                             Palette.from_variables(self.app.theme_variables))
        self.set_class(bool(lines), "-shown")
        self.set_lines(lines)
        if self._timer is not None:
            (self._timer.resume if self.notices.shown else self._timer.pause)()
        if len(lines) != before:
            self.post_message(self.Resized())
