"""The status line: which VM, which endpoint, how the connection is, how old the news is.

Two lines, and one for each problem, built by :func:`status_lines` (pure, tested on its
own) and shown by :class:`StatusBar`, which repaints only the cells that changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from rich.text import Text

from setui.core.health import ConnectionState, Health
from setui.ui.format import Palette, age, safe, zone_name
from setui.ui.widgets.lines import ChangedLines, left_and_right

__all__ = ["StatusBar", "StatusView", "connection_text", "status_lines"]

SKEW_SHOWN = 2.0  # seconds of clock difference worth telling the operator about


@dataclass(frozen=True)
class StatusView:
    """Everything the status line shows."""

    now: datetime
    endpoint: str
    health: Health
    vm_name: str | None = None
    demo: bool = False
    read_only: bool = False
    incarnation: int | None = None
    last_seen: datetime | None = None
    store_problem: str | None = None  # history/audit not available or failing
    filter_text: str = ""
    this_vm_only: bool = False
    hidden: int = 0  # events the filter or this-VM-only hides
    recorder: str | None = None  # another recorder running, or that none is
    replay: str | None = None  # the REPLAY badge (with the day) instead of live news


def connection_text(health: Health) -> tuple[str, str]:
    """(state in words, with a symbol that reads without colour; the reason, if any)."""
    state = health.state
    reason = safe(health.last_error or "", 400)
    if state is ConnectionState.LIVE:
        return "● live", ""
    if state is ConnectionState.ENABLING:
        return "◌ enabling: first call; the service can take up to 2 minutes to answer", ""
    if state is ConnectionState.STALE:
        return "◐ stale: waiting for the service's answer", ""
    word = "↻ retrying" if state is ConnectionState.RETRYING else "✖ unreachable"
    if health.next_attempt_in is not None:
        word += f" (next try in {max(0, round(health.next_attempt_in))} s)"
    else:  # no wait scheduled: a try is under way (a slow answer, or r)
        word += " (trying now)"
    return word, reason


def status_lines(view: StatusView, width: int, palette: Palette) -> list[Text]:
    """Two lines, and one more for each problem: the connection's reason while it fails,
    the store's while the history is not recorded; each cut to ``width`` cells."""
    width = max(width, 20)
    # Line 1: who and where, with the time on the right.
    right = Text(view.now.astimezone(timezone.utc).strftime("%H:%M:%S UTC"))
    local = view.now.astimezone()
    if local.utcoffset() != timezone.utc.utcoffset(None):
        right.append(f"  {local.strftime('%H:%M:%S')} {zone_name(local)}", style=palette.muted)
    left = Text()
    if view.replay:
        left.append(f" {view.replay} ", style=palette.alarm)
        left.append(" ")
    elif view.demo:
        left.append(" DEMO ", style=palette.alarm)
        left.append(" ")
    left.append("setui ", style="bold")
    left.append("VM ")
    if view.vm_name:
        left.append(safe(view.vm_name, 40), style="bold")
    elif view.replay:
        left.append("(not known)", style=palette.muted)
    else:
        left.append("(asking IMDS…)", style=palette.muted)
    if view.read_only:
        left.append("  ")
        left.append(" READ-ONLY ", style="bold reverse")
    left.append("  ")
    left.append(safe(view.endpoint, 60), style=palette.muted)
    first = left_and_right(left, right, width)

    # Line 2: the connection, the age of the news, the document, the history.
    state = view.health.state
    word, reason = connection_text(view.health)
    if view.replay and state is ConnectionState.STALE:
        word = "◐ not recording"  # a hole in the record: nobody was waiting for an answer
    style = {ConnectionState.LIVE: palette.ok, ConnectionState.ENABLING: "",
             ConnectionState.STALE: palette.soon, ConnectionState.RETRYING: palette.soon,
             ConnectionState.UNREACHABLE: palette.urgent}.get(state, palette.soon)
    second = Text(word, style=style or "")
    parts: list[tuple[str, str]] = []
    # What hides rows goes first: cut off at the right edge, it would mislead.
    view_parts = []
    if view.this_vm_only:
        view_parts.append("this VM only (m)")
    if view.filter_text:
        view_parts.append(f"filter “{safe(view.filter_text, 30)}”")
    if view_parts:
        parts.append((", ".join(view_parts) + f": {view.hidden} hidden", "bold"))
    if view.last_seen is not None:
        seconds = max(0.0, (view.now - view.last_seen).total_seconds())
        if view.replay:  # what the record says about the moment, not a connection's age
            parts.append(("recorded live", "") if state is ConnectionState.LIVE else
                         (f"last recorded answer {age(seconds)} before", palette.soon))
        elif state is ConnectionState.LIVE:
            parts.append((f"last answer {age(seconds)} ago", ""))
        else:
            parts.append((f"STALE: showing the last answer, {age(seconds)} old",
                          palette.soon))
    elif state is not ConnectionState.ENABLING:
        parts.append(("no answer yet", ""))
    if view.incarnation is not None:
        parts.append((f"incarnation {view.incarnation}", ""))
    skew = view.health.clock_skew
    if skew is not None and abs(skew) >= SKEW_SHOWN:
        direction = "behind" if skew > 0 else "ahead of"
        parts.append((f"this VM's clock is {abs(skew):.0f} s {direction} the service's",
                      palette.soon))
    if view.store_problem and not view.replay:  # the reason gets a line of its own, below
        parts.append(("history NOT recorded", palette.alarm))
    elif view.recorder:
        parts.append((view.recorder, palette.muted))
    for text, part_style in parts:
        second.append("  ·  ", style=palette.muted)
        second.append(text, style=part_style)
    second.truncate(width, overflow="ellipsis")
    lines = [first, second]
    if reason:
        lines.append(_reason_line(reason, style, width, palette))
    if view.store_problem:  # in a replay: what the record says about the moment
        lead = "" if view.replay else "history NOT recorded: "
        lines.append(_reason_line(f"{lead}{safe(view.store_problem, 300)}", palette.alarm,
                                  width, palette))
    return lines


def _reason_line(text: str, style: str, width: int, palette: Palette) -> Text:
    line = Text("  ↳ ", style=palette.muted)
    line.append(text, style=style)
    line.truncate(width, overflow="ellipsis")
    return line


class StatusBar(ChangedLines):
    """The lines at the top of the dashboard. The clock ticks every second: only the
    cells of the digits that changed are repainted (see :class:`ChangedLines`)."""

    DEFAULT_CSS = """
    StatusBar { height: auto; }
    """

    def show(self, view: StatusView, palette: Palette) -> None:
        """Show the lines for ``view``; repaint only the cells that changed."""
        width = self.size.width or self.app.size.width
        self.set_lines(status_lines(view, width, palette))

    @property
    def lines(self) -> int:
        return max(len(self._texts), 2)
