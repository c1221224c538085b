"""The status line: which VM, which endpoint, how the connection is, how old the news is.

Two lines, and one for each problem, built by :func:`status_lines` (pure, tested on its
own) and shown by :class:`StatusBar`, which repaints only the cells that changed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timezone

from rich.cells import cell_len
from rich.text import Text

from setui.core.health import ConnectionState, Health
from setui.core.timefmt import age, zone_name
from setui.ui.format import Palette, safe
from setui.ui.host import LinkView
from setui.ui.widgets.lines import ChangedLines, left_and_right

__all__ = ["LinkView", "StatusBar", "StatusView", "connection_text", "status_lines"]

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
    link: LinkView | None = None  # attached to the agent, or standalone (None: not said)


@dataclass(frozen=True)
class _Part:
    """One part of the second line: said in full where it fits, else shorter; ``keep``:
    never left out for want of room (what hides rows, what is stale or not recorded)."""

    text: str
    style: str = ""
    short: str = ""
    keep: bool = False


def connection_text(health: Health) -> tuple[str, str]:
    """(state in words, with a symbol that reads without colour; the reason, if any)."""
    return _connection(health)[0].text, safe(health.last_error or "", 400)


def _connection(health: Health) -> tuple[_Part, str]:
    """The state as a part of the line (with its short form), and the reason."""
    state = health.state
    reason = safe(health.last_error or "", 400)
    if state is ConnectionState.LIVE:
        return _Part("● live", keep=True), ""
    if state is ConnectionState.ENABLING:
        return _Part("◌ enabling: first call; the service can take up to 2 minutes to answer",
                     short="◌ enabling (up to 2 min)", keep=True), ""
    if state is ConnectionState.STALE:
        return _Part("◐ stale: waiting for the service's answer", short="◐ stale",
                     keep=True), ""
    word = "↻ retrying" if state is ConnectionState.RETRYING else "✖ unreachable"
    if health.next_attempt_in is not None:
        wait = f"{max(0, round(health.next_attempt_in))} s"
        return _Part(f"{word} (next try in {wait})", short=f"{word} ({wait})",
                     keep=True), reason
    # No wait scheduled: a try is under way (a slow answer, or r).
    return _Part(f"{word} (trying now)", short=word, keep=True), reason


_WIDE, _NARROW = "  ·  ", " · "


def _fit(parts: list[_Part], width: int) -> tuple[list[tuple[_Part, str]], str]:
    """The parts that fit in ``width`` cells with the text each is shown with, and the
    separator: in full with wide separators if they fit; else narrow ones; then, from the
    right, the short forms of the parts after the state, leaving out what may go, and
    the state's short form. A part is never cut."""
    texts = [part.text for part in parts]
    shown = list(range(len(parts)))

    def fits(separator: str = _NARROW) -> bool:
        return sum(cell_len(texts[i]) for i in shown) \
            + cell_len(separator) * (len(shown) - 1) <= width

    if fits(_WIDE):
        return list(zip(parts, texts, strict=True)), _WIDE
    for step in ("shorten", "leave out", "shorten the state"):
        for index in reversed(shown):
            if fits():
                return [(parts[i], texts[i]) for i in shown], _NARROW
            if step == "leave out":
                if not parts[index].keep:
                    shown.remove(index)
            elif (index == 0) == (step == "shorten the state"):
                texts[index] = parts[index].short or texts[index]
    return [(parts[i], texts[i]) for i in shown], _NARROW


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
    connection, reason = _connection(view.health)
    lost = view.link is not None and view.link.lost
    if lost:  # nothing is known since the agent's last word, and the reason is why
        connection = _Part("◐ stale: the agent is not answering", short="◐ stale", keep=True)
        reason = safe(view.health.last_error or "", 400)
    if view.replay and state is ConnectionState.STALE:
        # A hole in the record: nobody was waiting for an answer.
        connection = _Part("◐ not recording", keep=True)
    style = {ConnectionState.LIVE: palette.ok, ConnectionState.ENABLING: "",
             ConnectionState.STALE: palette.soon, ConnectionState.RETRYING: palette.soon,
             ConnectionState.UNREACHABLE: palette.urgent}.get(state, palette.soon)
    parts = [replace(connection, style=style or "")]  # first, and always there
    # What hides rows goes first: cut off at the right edge, it would mislead.
    view_parts, short_parts = [], []
    if view.this_vm_only:
        view_parts.append("this VM only (m)")
        short_parts.append("this VM")
    if view.filter_text:
        view_parts.append(f"filter “{safe(view.filter_text, 30)}”")
        short_parts.append("filter")
    if view_parts:
        hidden = f": {view.hidden} hidden"
        parts.append(_Part(", ".join(view_parts) + hidden, "bold",
                           short=", ".join(short_parts) + hidden, keep=True))
    if view.last_seen is not None:
        calm = view.link.every if view.link is not None and view.link.every else 2.0
        old = age(max(0.0, (view.now - view.last_seen).total_seconds()), calm)
        if view.replay:  # what the record says about the moment, not a connection's age
            parts.append(_Part("recorded live", short="live") if state is ConnectionState.LIVE
                         else _Part(f"last recorded answer {old} before", palette.soon,
                                    short=f"answer {old} before"))
        elif state is ConnectionState.LIVE:
            parts.append(_Part(f"last answer {old} ago", short=f"answer {old} ago"))
        else:
            parts.append(_Part(f"STALE: showing the last answer, {old} old", palette.soon,
                               short=f"STALE: {old} old", keep=True))
    elif state is not ConnectionState.ENABLING:
        parts.append(_Part("no answer yet", keep=True))
    if view.incarnation is not None:
        parts.append(_Part(f"incarnation {view.incarnation}",
                           short=f"incarn. {view.incarnation}"))
    skew = view.health.clock_skew
    if skew is not None and abs(skew) >= SKEW_SHOWN:
        direction = "behind" if skew > 0 else "ahead of"
        parts.append(_Part(f"this VM's clock is {abs(skew):.0f} s {direction} the service's",
                           palette.soon, short=f"clock {abs(skew):.0f} s {direction.split()[0]}"))
    if view.link is not None:
        parts.append(_Part(view.link.text, palette.soon if lost else palette.muted,
                           short=view.link.short, keep=lost))
    if view.store_problem and not view.replay:  # the reason gets a line of its own, below
        parts.append(_Part("history NOT recorded", palette.alarm, short="NOT recorded",
                           keep=True))
    elif view.recorder:
        parts.append(_Part(view.recorder, palette.muted,
                           short=view.recorder.replace(": only ", ": ")))
    shown, separator = _fit(parts, width)
    # The state's style is the line's: the parts without a style of their own take it.
    second = Text(shown[0][1], style=shown[0][0].style)
    for part, text in shown[1:]:
        second.append(separator, style=palette.muted)
        second.append(text, style=part.style)
    second.truncate(width, overflow="ellipsis")  # only a state alone wider than the line
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
