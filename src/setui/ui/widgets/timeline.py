"""The timeline: a time axis around now, one lane per event.

A lane shows NotBefore (``◆``), the expected impact window (``█``; ``?`` when unknown),
a start (``▶``) and the time since (``━``), and the now marker (``│``). Events that left
the document stay for the session, greyed, labelled with their fate. The axis is
relative to now ("-10m", "now", "+30m"), so it does not move every second; a lane only
changes when its marks move by a whole cell.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from rich.text import Text

from setui.core.timefmt import clock
from setui.ui.format import THIS_VM, Palette, Urgency, safe
from setui.ui.widgets.lines import ChangedLines

__all__ = ["ZOOMS", "Lane", "Timeline", "tick_label", "timeline_lines", "until_text"]

# (seconds back, seconds ahead) of each zoom level; "+" moves towards the first.
ZOOMS: tuple[tuple[int, int], ...] = (
    (120, 600),
    (300, 1800),
    (600, 3600),
    (1800, 3 * 3600),
    (3600, 12 * 3600),
    (3 * 3600, 48 * 3600),
    (12 * 3600, 8 * 86400),
)
DEFAULT_ZOOM = 2
_STEPS = (60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800)
LABEL_WIDTH = 15


@dataclass(frozen=True)
class Lane:
    """One event on the timeline."""

    key: str
    event_type: str
    this_vm: bool
    not_before: datetime | None = None
    duration: int | None = None  # seconds; -1 or None unknown, 0 none
    started_at: datetime | None = None
    started_exact: bool = True
    gone_at: datetime | None = None
    fate: str | None = None  # completed / cancelled, for gone events
    urgency: Urgency = Urgency.CALM
    selected: bool = False

    @property
    def gone(self) -> bool:
        return self.fate is not None


def tick_label(offset: int) -> str:
    """``-10m``, ``now``, ``+1h``, ``+1h30``, ``+2d``."""
    if offset == 0:
        return "now"
    sign = "+" if offset > 0 else "-"
    seconds = abs(offset)
    if seconds % 86400 == 0:
        return f"{sign}{seconds // 86400}d"
    if seconds >= 3600:
        hours, rest = divmod(seconds, 3600)
        return f"{sign}{hours}h" + (f"{rest // 60:02d}" if rest else "")
    return f"{sign}{seconds // 60}m"


def _step(span: int, cells: int) -> int:
    for step in _STEPS:
        if step / span * cells >= 9:
            return step
    return _STEPS[-1]


def timeline_lines(lanes: Sequence[Lane], now: datetime, zoom: tuple[int, int], width: int,
                   palette: Palette, max_lanes: int) -> list[Text]:
    """The axis line and up to ``max_lanes`` lanes, each ``width`` cells wide.

    The texts are shared between calls (a lane whose marks did not move is the same
    object): treat them as read-only."""
    back, ahead = zoom
    span = back + ahead
    track = max(width - LABEL_WIDTH - 1, 10)
    start = now - timedelta(seconds=back)

    def col(moment: datetime) -> float:
        return (moment - start).total_seconds() / span * (track - 1)

    now_col = round(col(now))
    axis, grid = _axis(back, ahead, track, palette.muted)
    lines = [axis]
    shown = list(lanes)
    hidden = 0
    if len(shown) > max_lanes:
        hidden = len(shown) - max_lanes + 1
        shown = shown[:max_lanes - 1] if max_lanes > 1 else []
    for lane in shown:
        lines.append(_draw_lane(_plan_lane(lane, now, col, now_col, track, palette), grid,
                                now_col, track, palette.muted))
    if hidden:
        lines.append(Text(f"  … {hidden} more lane{'s' if hidden != 1 else ''}",
                          style=palette.muted))
    return lines


@functools.lru_cache(maxsize=64)
def _axis(back: int, ahead: int, track: int, muted: str) -> tuple[Text, tuple[str, ...]]:
    """The axis line and its tick marks, which every lane shows as a grid. Relative to
    now, so it does not depend on the time."""
    span = back + ahead

    def col(offset: int) -> int:
        return round((back + offset) / span * (track - 1))

    step = _step(span, track)
    ticks = [t for t in range(-(back // step) * step, ahead + 1, step)]
    if 0 not in ticks:
        ticks.append(0)
    axis_chars = [" "] * track
    axis_marks = [" "] * track
    for offset in sorted(ticks, key=lambda t: (t != 0, t)):  # "now" first: it wins
        x = col(offset)
        label = tick_label(offset)
        begin = x if offset != 0 else max(0, x - 1)
        if begin + len(label) > track:
            begin = track - len(label)
        if any(c != " " for c in axis_chars[max(begin - 1, 0):begin + len(label) + 1]):
            continue
        axis_chars[begin:begin + len(label)] = list(label)
        if 0 <= x < track:
            axis_marks[x] = "·"
    zoom_label = f"zoom {tick_label(-back)}…{tick_label(ahead)}"
    axis = Text(f"{zoom_label:<{LABEL_WIDTH}} "[:LABEL_WIDTH + 1], style=muted)
    axis.append("".join(axis_chars), style=muted)
    return axis, tuple(axis_marks)


def until_text(seconds: float) -> str:
    """How long until a NotBefore past the right edge, to the minute (``42m``, ``1h02``;
    from a day on ``6d 23h``). A lane is drawn at the timeline's resolution, a cell being
    20 s or more, so its note does not tick every second (the table's countdown does)."""
    total = max(0, int(seconds))
    if total >= 86400:
        return clock(total)
    hours, minutes = divmod(total // 60, 60)
    return f"{hours}h{minutes:02d}" if hours else f"{minutes}m"


# A lane as drawing steps: ("put", x, char, style) or ("span", first, last, char, style),
# at whole cells, then the note. Equal plans draw equal lanes, so the drawing is cached
# and a lane whose marks did not move costs only its plan.
_Step = tuple[str, int, int, str, str]
_Plan = tuple[tuple[str, bool, bool, str], tuple[_Step, ...], str, str, bool]


def _plan_lane(lane: Lane, now: datetime, to_col: Callable[[datetime], float], now_col: int,
               track: int, palette: Palette) -> _Plan:
    mark_style = palette.for_urgency(lane.urgency) if lane.this_vm else palette.secondary
    base = palette.gone if lane.gone else ("" if lane.this_vm else palette.secondary)
    steps: list[_Step] = []

    def put(x: int, char: str, style: str = "") -> None:
        steps.append(("put", x, x, char, style or base))

    def span(a: float, b: float, char: str, style: str = "") -> None:
        steps.append(("span", max(round(a), 0), min(round(b), track - 1), char, style or base))

    put(now_col, "│", "bold")
    note = ""
    at_end = False  # the note points past the right edge
    if lane.started_at is not None:
        begin = to_col(lane.started_at)
        end_at = lane.gone_at or now
        span(begin, to_col(end_at), "━", base)
        if lane.duration is not None and lane.duration > 0:
            impact_end = lane.started_at + timedelta(seconds=lane.duration)
            span(begin, max(to_col(impact_end), begin + 1), "█",
                 base or mark_style)
        if begin < 0:
            put(0, "◀", base)
        else:
            put(round(begin), "▶", base or mark_style)
    elif lane.not_before is not None:
        x = to_col(lane.not_before)
        if x > track - 1:
            note = f"in {until_text((lane.not_before - now).total_seconds())} →"
            at_end = True
        elif x < 0:
            put(0, "◀", base or mark_style)
        else:
            put(round(x), "◆", base or mark_style)
            if lane.duration is not None and lane.duration > 0:
                impact_end = lane.not_before + timedelta(seconds=lane.duration)
                span(x + 1, max(to_col(impact_end), x + 1), "█",
                     base or mark_style)
            elif lane.duration is None or lane.duration < 0:
                put(round(x) + 1, "?", base or mark_style)
    if lane.gone and lane.gone_at is not None:
        put(round(to_col(lane.gone_at)), "✓" if lane.fate == "completed" else "✗", base)
        note = f"{lane.fate} {lane.gone_at.strftime('%H:%M')}"
    label = (lane.event_type, lane.selected, lane.this_vm, base)
    return label, tuple(steps), note, base or palette.muted, at_end


@functools.lru_cache(maxsize=512)
def _draw_lane(plan: _Plan, grid: tuple[str, ...], now_col: int, track: int,
               muted: str) -> Text:
    (event_type, selected, this_vm, base), steps, note, note_style, at_end = plan
    cells: list[tuple[str, str]] = [(c, muted) for c in grid]
    for kind, first, last, char, style in steps:
        if kind == "put":
            if 0 <= first < track:
                cells[first] = (char, style)
        else:
            for x in range(first, last + 1):
                if 0 <= x < track:
                    cells[x] = (char, style)
    if note:
        _write_note(cells, note, now_col, track, note_style, at_end)

    label = Text()
    marker = "›" if selected else " "
    label.append(marker, style="bold")
    name = safe(event_type, 9)
    label.append(name, style=("bold " if selected else "") + (base or ""))
    if this_vm:
        label.append(f" {THIS_VM}", style=base or None)
    label.truncate(LABEL_WIDTH, overflow="ellipsis")
    label.pad_right(LABEL_WIDTH - label.cell_len)
    line = label
    line.append(" ")
    # One span per run of a style, not per cell: fewer to render, and fewer escape
    # sequences written when the lane is repainted.
    for style, run in itertools.groupby(cells, key=lambda cell: cell[1]):
        line.append("".join(char for char, _ in run), style=style or None)
    return line


def _write_note(cells: list[tuple[str, str]], note: str, now_col: int, track: int,
                style: str, at_end: bool = False) -> None:
    """Put a few words in the lane where they hide no mark: at the right edge when they
    point past it, else right of the marks (and of now) if they fit, else left of them."""
    marks = [x for x, (char, _) in enumerate(cells) if char not in " ·"]
    right = max([*marks, now_col]) + 2
    text = f"{note} "
    if at_end and track - len(note) > now_col + 1:
        begin, text = track - len(note), note
    elif right + len(text) <= track:
        begin = right
    else:
        left = min([*marks, now_col]) - 1 - len(text)
        begin = max(left, 0)
    for i, char in enumerate(text[: max(track - begin, 0)]):
        if cells[begin + i][0] in " ·":
            cells[begin + i] = (char, style)


class Timeline(ChangedLines):
    """Shows :func:`timeline_lines`; repaints only the cells that changed (a mark that
    moved, a note's seconds), and lays the screen out again only when the number of lines
    changed."""

    DEFAULT_CSS = """
    Timeline { height: auto; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.zoom_level = DEFAULT_ZOOM

    @property
    def zoom(self) -> tuple[int, int]:
        return ZOOMS[self.zoom_level]

    def zoom_in(self) -> bool:
        if self.zoom_level == 0:
            return False
        self.zoom_level -= 1
        return True

    def zoom_out(self) -> bool:
        if self.zoom_level == len(ZOOMS) - 1:
            return False
        self.zoom_level += 1
        return True

    def show(self, lanes: Sequence[Lane], now: datetime, palette: Palette,
             max_lanes: int) -> None:
        width = self.size.width or self.app.size.width
        self.set_lines(timeline_lines(lanes, now, self.zoom, width, palette,
                                      max(max_lanes, 1)))

    @property
    def lines(self) -> int:
        return len(self._texts)
