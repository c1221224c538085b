"""The pane under the timeline: the agent's plan, then what just happened.

Attached to the agent, the plan for the events it has a rule for (this VM's first):
each rule's steps with their state, what an approval waits for and why, the budget's
answer, and who holds it since when; then the change log (setui.ui.changelog), newest
first. Standalone, the change log alone. The pane takes the lines the table and the
timeline leave and folds to them (:func:`pane_lines`): each event's plan on one line
when its steps do not fit one a line, then fewer events, the log's oldest entries
first to go; ``w`` shows both whole (setui.ui.screens.window). Every text is a
:class:`~rich.text.Text` built from printable words, never markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from rich.text import Text
from textual.events import MouseScrollDown, MouseScrollUp

from setui.agent.plan import NOT_EARLY
from setui.core.textsafe import printable
from setui.core.timefmt import time_of_day
from setui.store.agent import DONE, FAILED, RUNNING, SKIPPED, UNKNOWN, WAITING
from setui.ui.changelog import LogEntry
from setui.ui.format import Palette
from setui.ui.host import PlannedEvent, WindowView
from setui.ui.widgets.lines import ChangedLines

__all__ = ["MIN_LINES", "WindowPane", "log_line", "log_skip", "pane_lines", "plan_head",
           "plan_lines", "plan_part", "whole_lines"]

MIN_LINES = 3  # below this the pane is not shown: its rule, a title and a line
_WHAT = 17  # the log's kind column, as wide as watch's: "appeared at start"
_MARK = {DONE: "✓", FAILED: "✗", RUNNING: "▶", WAITING: "…", SKIPPED: "–", UNKNOWN: "?"}


def _held(item: PlannedEvent, now: datetime) -> str:
    if not item.held:
        return ""
    if item.hold is None:
        return "HELD by a person"
    return f"HELD by {item.hold.user} since {time_of_day(item.hold.since, now)} UTC"


def plan_head(item: PlannedEvent, now: datetime, palette: Palette) -> Text:
    """An event's first line: its name, this VM's or not, its rule, and who holds it."""
    line = Text()
    line.append(item.name, style="bold" if item.mine else palette.secondary)
    if item.mine:
        line.append(" (this VM)")
    if item.plan is not None:
        line.append(f"  rule {printable(item.plan.rule, 60)}")
        if item.plan.let_go is not None:
            line.append(f" {printable(item.plan.let_go, 200)}; nothing more without a "
                        "person", style=palette.soon)
    elif item.held:
        line.append("  no rule of the agent's matches it")
    held = _held(item, now)
    if held:
        line.append("  ")
        line.append(held, style=f"bold {palette.soon}".strip())
    return line


def _step(words: str, state: str | None, palette: Palette) -> Text:
    if words.startswith(NOT_EARLY):  # nothing failed: the platform starts it at NotBefore
        state = SKIPPED
    mark = _MARK.get(state or "", "·")
    style = palette.soon if state in (FAILED, UNKNOWN, WAITING) else ""
    return Text.assemble(f"  {mark} ", (printable(words, 300), style))


def plan_lines(item: PlannedEvent, now: datetime, palette: Palette, *,
               fold: bool) -> list[Text]:
    """The event's plan: a line for it and one a step, or (``fold``) one line in all."""
    head = plan_head(item, now, palette)
    if item.plan is None:
        return [head]
    if fold:
        head.append(": " + ", ".join(printable(s.words, 300) for s in item.plan.steps))
        return [head]
    return [head, *(_step(s.words, s.state, palette) for s in item.plan.steps)]


def log_line(entry: LogEntry, now: datetime, palette: Palette, width: int) -> Text:
    """``12:01:05  approved      Reboot F020BA2E  by root``."""
    line = Text(f"{time_of_day(entry.at, now)}  ", style=palette.secondary)
    what = entry.what if width < 70 else entry.what.ljust(_WHAT)
    line.append(what, style="bold" if entry.mine else "")
    line.append(f" {entry.name}" if width < 70 else f" {entry.name:<17}",
                style="bold" if entry.mine else palette.secondary)
    if entry.text:
        line.append(f" {entry.text}")
    return line


def _title(text: str, palette: Palette, more: str = "") -> Text:
    title = Text(text, style="bold")
    if more:
        title.append(f"  {more}", style=palette.secondary)
    return title


def plan_part(view: WindowView, now: datetime, palette: Palette, lines: int) -> list[Text]:
    """The plan's lines in the pane (attached; none standalone): whole, or each event on
    a line, this VM's first, leaving the log its title and its newest entry at least."""
    if not view.attached:
        return []
    plans = view.plans
    room = max(lines - 1 - 2, 1)  # the plan's title; the log's title and one entry
    whole = sum(1 + (len(p.plan.steps) if p.plan else 0) for p in plans)
    fold = whole > room
    shown: list[Text] = []
    for item in plans:
        shown.extend(plan_lines(item, now, palette, fold=fold))
    left = len(plans) - room if fold and len(plans) > room else 0
    more = (f"{left} more, w shows all" if left else "w shows it whole" if fold else "")
    out = [_title("The agent's plan", palette, more)]
    if not plans:
        out.append(Text("  Nothing planned: no rule of the agent's policy matches an "
                        "event now.", style=palette.secondary))
    out.extend(shown[:room])
    return out


def log_skip(view: WindowView, lines: int, plan: int, skip: int) -> int:
    """How many of the log's newest entries can be scrolled past, at most ``skip``, with
    ``plan`` lines of plan above it in ``lines``."""
    room = lines - plan - 1  # the log's title
    return max(0, min(skip, len(view.log) - room))


def pane_lines(view: WindowView, now: datetime, palette: Palette, lines: int,
               width: int, skip: int = 0) -> list[Text]:
    """What fits in ``lines``: the plan (attached, :func:`plan_part`), then the log's
    newest entries in the lines left (``skip``: past the newest that many). What is
    left out is counted in the titles, for ``w``."""
    entries = view.log.entries()
    out = plan_part(view, now, palette, lines)
    log_room = lines - len(out)
    if log_room < 2:
        return out[:lines]
    skip = log_skip(view, lines, len(out), skip)
    cut_log = len(entries) > log_room - 1
    more = f"{len(entries)} in all: w" if cut_log else ""
    if skip:
        more = f"{skip} newer above (scroll up); {more}"
    out.append(_title("What just happened, newest first", palette, more))
    if not entries:
        out.append(Text("  Nothing has changed since the dashboard opened.",
                        style=palette.secondary))
    out.extend(log_line(e, now, palette, width) for e in entries[skip:skip + log_room - 1])
    return out[:lines]


class WindowPane(ChangedLines):
    """The pane (see the module doc); the screen gives it its view each second, and the
    lines are made again only when the view, the log, the room or the day changed (a
    host hands the same view while nothing in it moves with the clock)."""

    _made: tuple[object, ...] | None = None
    _shown: tuple[WindowView, datetime, Palette, int] | None = None
    skip = 0  # the log's newest entries scrolled past (the mouse wheel over the pane)

    def show(self, view: WindowView | None, now: datetime, palette: Palette,
             lines: int) -> None:
        shown = view is not None and lines >= MIN_LINES
        self.display = shown
        if view is None or not shown:
            self._made = self._shown = None
            self.set_lines([])
            return
        self._shown = (view, now, palette, lines)
        width = self.size.width or self.app.size.width
        made = (view, view.log.version, lines, width, now.date(), palette, self.skip)
        if made == self._made:
            return
        self._made = made
        self.set_lines(pane_lines(view, now, palette, lines - 1, width,  # its rule
                                  self.skip))

    def _scroll(self, by: int) -> None:
        if self._shown is None:
            return
        view, now, palette, lines = self._shown
        plan = len(plan_part(view, now, palette, lines - 1))
        self.skip = log_skip(view, lines - 1, plan, max(0, self.skip + by))
        self.show(*self._shown)

    def on_mouse_scroll_down(self, event: MouseScrollDown) -> None:
        event.stop()
        self._scroll(1)

    def on_mouse_scroll_up(self, event: MouseScrollUp) -> None:
        event.stop()
        self._scroll(-1)


def whole_lines(view: WindowView, now: datetime, palette: Palette,
                width: int) -> Sequence[Text]:
    """Both whole, for ``w``: every step of every plan, every entry of the log."""
    out: list[Text] = []
    if view.attached:
        out.append(_title("The agent's plan", palette))
        if not view.plans:
            out.append(Text("  Nothing planned: no rule of the agent's policy matches "
                            "an event now.", style=palette.secondary))
        for item in view.plans:
            out.extend(plan_lines(item, now, palette, fold=False))
        out.append(Text(""))
    entries = view.log.entries()
    out.append(_title("What just happened, newest first", palette,
                      f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}"))
    if not entries:
        out.append(Text("  Nothing has changed since the dashboard opened.",
                        style=palette.secondary))
    out.extend(log_line(e, now, palette, width) for e in entries)
    return out
