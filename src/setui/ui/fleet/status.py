"""The fleet view's status line: which Prometheus, how the link is, how old the news is,
how many VMs and events, and what the filter hides. Pure :func:`status_lines`, shown by
:class:`FleetStatus`, which repaints only the cells that changed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from rich.text import Text

from setui.core.timefmt import age
from setui.fleet import FleetUpdate, LinkState
from setui.fleet.model import FleetGroup
from setui.ui.format import Palette, safe
from setui.ui.widgets.lines import ChangedLines, left_and_right

__all__ = ["FleetStatus", "FleetStatusView", "status_lines"]


@dataclass(frozen=True)
class FleetStatusView:
    now: datetime  # Prometheus's time, carried on the monotonic clock
    url: str
    auth: str  # "bearer token", "user alice", "no credentials"
    update: FleetUpdate
    answer_age: float | None  # seconds since the last good answer
    stale_after: float  # seconds after which the last good answer is called stale
    next_in: float | None = None  # seconds to the next refresh
    filter_text: str = ""
    group: FleetGroup | None = None
    hidden: int = 0


_STATE = {LinkState.LOADING: "◌ asking Prometheus…", LinkState.LIVE: "● live",
          LinkState.ERROR: "✖ Prometheus error", LinkState.REFUSED: "✖ refused",
          LinkState.UNREACHABLE: "✖ unreachable"}


def status_lines(view: FleetStatusView, width: int, palette: Palette) -> list[Text]:
    width = max(width, 20)
    right = Text(view.now.astimezone(timezone.utc).strftime("%H:%M:%S UTC"))
    left = Text("setui fleet ", style="bold")
    left.append(" READ-ONLY ", style="bold reverse")
    left.append(f"  {safe(view.url, 60)} ({view.auth})", style=palette.muted)
    first = left_and_right(left, right, width)

    update = view.update
    state = update.state
    stale = (state is LinkState.LIVE and view.answer_age is not None
             and view.answer_age > view.stale_after)
    word = "◐ stale: waiting for Prometheus's answer" if stale else _STATE[state]
    if state not in (LinkState.LIVE, LinkState.LOADING) and view.next_in is not None:
        word += f" (next try in {max(0, round(view.next_in))} s)"
    style = (palette.ok if state is LinkState.LIVE and not stale else
             "" if state is LinkState.LOADING else palette.soon if stale else palette.urgent)
    second = Text(word, style=style or "")
    parts: list[tuple[str, str]] = []
    view_parts = []
    if view.group is not None:
        view_parts.append(f"{safe(view.group.label, 40)} only (m)")
    if view.filter_text:
        view_parts.append(f"filter “{safe(view.filter_text, 30)}”")
    if view_parts:
        parts.append((", ".join(view_parts) + f": {view.hidden} hidden", "bold"))
    fleet = update.fleet
    if view.answer_age is not None:
        if state is LinkState.LIVE and not stale:
            parts.append((f"answer {age(view.answer_age)} ago", ""))
        else:
            parts.append((f"STALE: showing the last answer, {age(view.answer_age)} old",
                          palette.soon))
    elif state is not LinkState.LOADING:
        parts.append(("no answer yet", ""))
    if fleet is not None:
        bad = len(fleet.problem_vms())
        parts.append((f"{len(fleet.vms)} VMs", ""))
        if bad:
            parts.append((f"{bad} not answering", palette.soon or "bold"))
        parts.append((f"{len(fleet.events)} events", ""))
        if fleet.dropped:
            parts.append((f"{fleet.dropped} series not read (too many)", palette.urgent))
        if not fleet.remembers:
            parts.append(("VMs down before this opened: unknown (no setui recording rule)",
                          palette.muted))
    for text, part_style in parts:
        second.append("  ·  ", style=palette.muted)
        second.append(text, style=part_style)
    second.truncate(width, overflow="ellipsis")
    lines = [first, second]
    reasons = ([update.error] if update.error and state is not LinkState.LIVE else []) + \
        [f"Prometheus warns: {w}" for w in update.warnings[:2]]
    for reason in reasons:
        line = Text("  ↳ ", style=palette.muted)
        line.append(safe(reason, 400), style=style or "")
        line.truncate(width, overflow="ellipsis")
        lines.append(line)
    return lines


class FleetStatus(ChangedLines):
    DEFAULT_CSS = """
    FleetStatus { height: auto; }
    """

    def show(self, view: FleetStatusView, palette: Palette) -> None:
        width = self.size.width or self.app.size.width
        self.set_lines(status_lines(view, width, palette))
