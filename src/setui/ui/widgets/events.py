"""The events table: one row per event, keyed by EventId.

:meth:`EventsTable.sync` takes the rows the screen wants and changes as little as it can:
when the same events are in the same order it updates only the cells whose text changed
(a countdown, once a second); otherwise it rebuilds the rows and puts the cursor back on
the same EventId. Columns depend on the width (:func:`columns_for`).

Textual's ``DataTable.update_cell`` repaints the whole table and throws away every
rendered cell: ten ticking countdowns made the table re-render all its cells and rewrite
all its rows every second. A cell whose column keeps its width is updated here in place
instead: only its own rendering is dropped and only the characters that changed are
repainted. And where DataTable renders a repainted row again cell by cell (two walks of
the style tree and nine cache look-ups a row, ~0.5 ms), :class:`EventsTable` keeps each
row's line and each cell's segments until they change; a row whose changed cells changed
only characters in place (a countdown's tick) takes its last line with those characters
replaced, rendering no cell and joining nothing.

Both rely on DataTable's internals as textual 8.2 has them, reached only through
:mod:`setui.ui.compat` (which says why, and what was measured); :meth:`EventsTable._fast_path`
checks for them once and the table falls back to DataTable's own ways when they are not
there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import NamedTuple

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import PseudoClasses
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey

from setui.system.gctune import freeze_heap_once
from setui.ui import compat
from setui.ui.widgets.lines import characters_only, respliced

__all__ = ["COLUMNS", "EventsTable", "Row", "columns_for", "tier_for"]

# key, label, wide, medium, narrow (shown in that tier or not)
COLUMNS: tuple[tuple[str, str, bool, bool, bool], ...] = (
    ("type", "Type", True, True, True),
    ("status", "Status", True, True, False),
    ("countdown", "Countdown", True, True, True),
    ("utc", "NotBefore UTC", True, True, True),
    ("local", "Local", True, False, False),
    ("impact", "Impact", True, True, True),
    ("source", "Source", True, False, False),
    ("resources", "Resources", True, True, True),
    ("approved", "Approved here", True, True, True),
)
WIDE = 120
MEDIUM = 100


def tier_for(width: int) -> str:
    """``wide`` from 120 columns, ``medium`` from 100, else ``narrow``."""
    if width >= WIDE:
        return "wide"
    if width >= MEDIUM:
        return "medium"
    return "narrow"


_NARROW_LABELS = {"approved": "Approved"}


def columns_for(tier: str, *, local: bool = True,
                here: bool = True) -> list[tuple[str, str]]:
    """(key, label) of the columns shown at that tier, left to right; without the Local
    column when ``local`` is false (this machine keeps UTC: it would repeat NotBefore).
    ``here``: the rows show only the approvals this dashboard made ("Approved here");
    otherwise anyone's, each with its approver (attached: the agent's audit log), and
    the column says "Approved"."""
    index = {"wide": 2, "medium": 3, "narrow": 4}[tier]
    labels = _NARROW_LABELS if tier == "narrow" or not here else {}
    return [(key, labels.get(key, label)) for key, label, *shown in COLUMNS
            if (key, label, *shown)[index] and (local or key != "local")]


class _Change(NamedTuple):
    """One cell whose text changed."""

    row: str
    column: str
    before: Text | None
    after: Text


def _changed_characters(before: Text | None, after: Text) -> tuple[int, int] | None:
    """The cells ``[start, stop)`` of a cell's text that differ, when only characters
    changed in place (same width, same styles at the same places); else None."""
    if (before is None or before.cell_len != after.cell_len or before.style != after.style
            or before.spans != after.spans or len(before.plain) != len(after.plain)):
        return None
    old, new = before.plain, after.plain
    diff = [i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b]
    if not diff:
        return None
    first, last = diff[0], diff[-1] + 1
    if cell_len(old[:first]) != cell_len(new[:first]):  # a wide character moved
        return None
    return cell_len(new[:first]), cell_len(new[:last])


def _same_shape(segments: list[Segment], before: Text, after: Text,
                padding: int) -> list[Segment] | None:
    """A cell's rendered segments for ``after``, from those rendered for ``before``, when
    only characters changed: same length, one cell each, same styles at the same places,
    nothing cut. The segments are then the same but for those characters, and rendering
    the cell again through Rich (a fifth of a millisecond) is not needed. None otherwise.
    """
    if not characters_only(before, after):
        return None
    whole = "".join(segment.text for segment in segments)
    shown = " " * padding + before.plain
    rest = whole[len(shown):]
    if not whole.startswith(shown) or rest.strip(" ") or any(s.control for s in segments):
        return None  # cut, wrapped or decorated: not the plain text and spaces
    return respliced(segments, " " * padding + after.plain + rest)


def _patched_row(line: Strip, before: Sequence[Text], after: Sequence[Text],
                 changed: Sequence[int], frame: _Frame, padding: int, *,
                 one_cell_each: bool) -> Strip | None:
    """A row's line for the cells ``after``, from ``line``, its line for ``before`` in the
    same frame, when every cell of ``changed`` (column indexes) changed only characters
    in place (a countdown's tick: same length, one cell each, same styles at the same
    places) and ``line`` shows each such cell's old text where its column puts it. Its
    segments are then the same but for those characters: the row is neither rendered
    cell by cell nor simplified again (most of a tick's cost in the table).
    ``one_cell_each``: every character of ``line`` takes one cell (else its cells and
    characters differ). None when that cannot be known."""
    if frame.scroll_x or sum(frame.widths) > frame.width or not one_cell_each:
        return None  # cut, scrolled or wide: the columns are not where the widths say
    text = line.text
    edits: list[tuple[int, int]] = []
    for index in changed:
        old, new = before[index], after[index]
        plain = new.plain
        start = sum(frame.widths[:index]) + padding
        stop = start + len(plain)
        if (len(old.plain) != len(plain) or old.spans != new.spans
                or old.style != new.style or cell_len(plain) != len(plain)
                or len(plain) > frame.widths[index] - 2 * padding
                or text[start:stop] != old.plain):
            return None
        text = text[:start] + plain + text[stop:]
        edits.append((start, stop))
    if not edits:
        return None
    segments = []
    at = 0
    for segment in line:
        end = at + len(segment.text)
        if any(start < end and at < stop for start, stop in edits):
            segment = Segment(text[at:end], segment.style, segment.control)
        segments.append(segment)
        at = end
    return Strip(segments, line.cell_length)


_EMPTY = Text()
_STATES_KEPT = 4  # states remembered per cell (see EventsTable._cell_lines)


@dataclass(frozen=True)
class Row:
    """One row: its EventId and a Text per column key."""

    key: str
    cells: dict[str, Text]


class _Frame(NamedTuple):
    """What every line of one repaint shares: anything in it changing redraws them all."""

    base_style: Style
    width: int
    scroll_x: int
    widths: tuple[int, ...]
    cursor_row: int
    hover_row: int
    show_cursor: bool
    show_hover: bool
    pseudo: PseudoClasses
    update_count: int


class EventsTable(DataTable[Text]):
    """The events, most urgent first; the cursor follows its EventId."""

    DEFAULT_CSS = """
    EventsTable { height: auto; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=False, cell_padding=1)
        self._columns: list[tuple[str, str]] = []
        self._keys: list[str] = []
        self._column_keys: list[str] = []
        self._cells: dict[str, dict[str, Text]] = {}
        self._fast: bool | None = None  # see _fast_path
        # Rendered rows and cells, with what they were rendered for (see render_line).
        self._frame: _Frame | None = None
        self._place: tuple[bool, int, int, int] | None = None  # see _lines_place
        self._versions: dict[tuple[str, str], int] = {}  # (row, column): bumped on change
        # Per row: what its line was drawn for, the line, and the cells' texts it shows.
        # A line changed in place keeps one cell per character if the line it came from
        # did (its new characters are checked to): that is measured once per render.
        self._row_lines: dict[str, tuple[tuple[_Frame, int, tuple[int, ...]], Strip,
                                         tuple[Text, ...], bool]] = {}
        # Per cell, its segments in the last few states it was drawn in (focused or
        # not, under the cursor or not): a dialog that blurs the table and gives the
        # focus back does not make every cell render through Rich again.
        self._cell_lines: dict[tuple[str, str],
                               dict[tuple[object, ...], tuple[Text, list[Segment]]]] = {}
        self.rebuilds = 0  # how often rows were rebuilt rather than updated (for tests)
        self.cell_updates = 0  # how many cells were updated one by one (for tests)
        self.cells_rendered = 0  # cells rendered for a line (for tests)
        self.rows_patched = 0  # lines drawn by changing characters of the last (for tests)

    def on_mount(self) -> None:
        # The dashboard is up once this table has drawn: its heap leaves the collector.
        self.call_after_refresh(freeze_heap_once)

    @property
    def selected_key(self) -> str | None:
        """The EventId under the cursor, or None for an empty table."""
        if not self._keys or not 0 <= self.cursor_row < len(self._keys):
            return None
        return self._keys[self.cursor_row]

    @property
    def keys(self) -> list[str]:
        return list(self._keys)

    def select_key(self, key: str) -> bool:
        if key not in self._keys:
            return False
        self.move_cursor(row=self._keys.index(key), animate=False)
        return True

    def sync(self, columns: Sequence[tuple[str, str]], rows: Sequence[Row]) -> None:
        """Show ``rows`` under ``columns``, touching only what changed."""
        columns = list(columns)
        keys = [row.key for row in rows]
        if columns != self._columns or keys != self._keys:
            self._rebuild(columns, rows)
            return
        changed: list[_Change] = []
        for row in rows:
            old = self._cells[row.key]
            if old == row.cells:
                continue
            for key in self._column_keys:
                cell = row.cells.get(key, _EMPTY)
                before = old.get(key)
                if before is not cell and before != cell:
                    changed.append(_Change(row.key, key, before, cell))
            self._cells[row.key] = dict(row.cells)
        if changed:
            self._update_cells(changed)

    # -- a change of a few cells ------------------------------------------------------------
    def _update_cells(self, changed: list[_Change]) -> None:
        """Put new texts in cells, repainting as little as the column widths allow."""
        self.cell_updates += len(changed)
        resized = {column for column in {change.column for change in changed}
                   if self._column_width_changes(column)}
        if resized or not self._fast_path():
            # Measuring a column again relayouts the whole table: only when its width
            # changes (a ticking countdown keeps its width nearly always).
            for change in changed:
                self.update_cell(change.row, change.column, change.after,
                                 update_width=change.column in resized)
            return
        versions = self._versions
        for change in changed:
            compat.put_cell(self, change.row, change.column, change.after)
            where = (change.row, change.column)
            versions[where] = versions.get(where, 0) + 1
        self._forget_rendering({(change.row, change.column) for change in changed})
        offsets = self._column_offsets()
        header = self.header_height if self.show_header else 0
        window = self.window_region
        scroll = self.scroll_offset
        regions = []
        for change in changed:
            x, width = offsets[self._column_keys.index(change.column)]
            region = Region(x, header + self._keys.index(change.row), width, 1)
            span = _changed_characters(change.before, change.after)
            if span is not None:  # only these characters: "T-14:32" to "T-14:31" is one
                start, stop = span
                region = Region(x + self.cell_padding + start, region.y, stop - start, 1)
            if window.overlaps(region):
                regions.append(region.translate(-scroll))
        if regions:
            self.refresh(*regions)

    def _column_offsets(self) -> list[tuple[int, int]]:
        """(x, width) of each column, padding included."""
        offsets = []
        x = 0
        for column in self.ordered_columns:
            width = column.get_render_width(self)
            offsets.append((x, width))
            x += width
        return offsets

    def cell_region(self, row: str, column: str) -> Region:
        """Where a cell is in the table (header included, before scrolling), padding
        included: what a change of its text may repaint at most."""
        x, width = self._column_offsets()[self._column_keys.index(column)]
        header = self.header_height if self.show_header else 0
        return Region(x, header + self._keys.index(row), width, 1)

    def _column_width_changes(self, column: str) -> bool:
        """Whether the column's width after the update differs from what it is now (the
        widest of its label and its cells, as DataTable measures it)."""
        current = self.columns.get(ColumnKey(column))
        if current is None:
            return True
        widest = max([current.label.cell_len,
                      *(cells[column].cell_len for cells in self._cells.values()
                        if column in cells)])
        return widest != current.content_width

    def _fast_path(self) -> bool:
        """Whether this Textual's DataTable has the internals the in-place updates and
        the line cache use (textual 8.2), and the table is as this module builds it; if
        not, DataTable's own update_cell and render_line do it the slow, sure way."""
        if self._fast is None:
            self._fast = compat.table_internals(self)
        return (self._fast and self.cursor_type == "row" and not self.zebra_stripes
                and not self.fixed_rows and not self.fixed_columns
                and not compat.labelled_rows(self))

    def _forget_rendering(self, cells: set[tuple[str, str]]) -> None:
        """Drop what DataTable rendered of these cells and of the lines that hold them
        (the header is line 0), and nothing else."""
        rows = {row for row, _ in cells}
        indexes = {self._keys.index(row) for row in rows}
        header = self.header_height if self.show_header else 0
        ys = {index + header for index in indexes}  # every row is one line high
        compat.forget_rendered(self, cells, rows, indexes, ys)

    # -- lines ---------------------------------------------------------------------------------
    def render_lines(self, crop: Region) -> list[Strip]:
        self._frame = self._place = None  # what the lines share is taken once per repaint
        return super().render_lines(crop)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._forget_lines()

    def _forget_lines(self) -> None:
        self._frame = self._place = None
        self._row_lines.clear()
        self._cell_lines.clear()

    def render_line(self, y: int) -> Strip:
        """DataTable's line for a row, from the row's line and the cells' segments as last
        rendered, unless something they depend on changed since."""
        place = self._place
        if place is None:
            place = self._place = self._lines_place()
        fast, header, scroll_y, row_count = place
        if y < header or not fast:
            return super().render_line(y)
        index = y - header + scroll_y
        if not 0 <= index < len(self._keys) or row_count != len(self._keys):
            return super().render_line(y)
        frame = self._frame
        if frame is None:
            frame = self._frame = self._current_frame()
        row = self._keys[index]
        versions = self._versions
        key = (frame, index, tuple(versions.get((row, column), 0)
                                   for column in self._column_keys))
        cached = self._row_lines.get(row)
        if cached is not None and cached[0] == key:
            return cached[1]
        texts = tuple(self._cells[row].get(column) or _EMPTY for column in self._column_keys)
        strip = None
        if cached is not None and cached[0][:2] == key[:2]:
            changed = [i for i, (was, now) in enumerate(zip(cached[0][2], key[2], strict=True))
                       if was != now]
            strip = _patched_row(cached[1], cached[2], texts, changed, frame,
                                 self.cell_padding, one_cell_each=cached[3])
            self.rows_patched += strip is not None
        if strip is not None:
            self._row_lines[row] = (key, strip, texts, True)
            return strip
        strip = self._render_row(row, index, frame)
        whole = strip.text
        self._row_lines[row] = (key, strip, texts, cell_len(whole) == len(whole))
        return strip

    def _lines_place(self) -> tuple[bool, int, int, int]:
        """Whether rows are drawn here (:meth:`_fast_path`), the header's height, the
        scroll and the row count: read once per repaint, not once per line (each is a
        reactive or a walk of the table's state)."""
        return (self._fast_path(), self.header_height if self.show_header else 0,
                self.scroll_offset.y, self.row_count)

    def _current_frame(self) -> _Frame:
        show_hover, pseudo, update_count = compat.table_state(self)
        return _Frame(
            base_style=self.rich_style, width=self.size.width, scroll_x=self.scroll_offset.x,
            widths=tuple(column.get_render_width(self) for column in self.ordered_columns),
            cursor_row=self.cursor_coordinate.row, hover_row=self.hover_coordinate.row,
            show_cursor=self.show_cursor, show_hover=show_hover, pseudo=pseudo,
            update_count=update_count)

    def _render_row(self, row: str, index: int, frame: _Frame) -> Strip:
        """One row's line, as DataTable's _render_line_in_row and _render_line make it
        (textual 8.2: no row labels, no fixed rows or columns, no zebra stripes), each
        cell rendered again only if its text, its width or its highlight changed."""
        base_style = frame.base_style
        cursor = index == frame.cursor_row
        hover = index == frame.hover_row
        cells: list[list[Segment]] = []
        texts = self._cells[row]
        for column_index, column in enumerate(self._column_keys):
            where = (row, column)
            text = texts.get(column) or _EMPTY
            state = (frame.base_style, frame.widths[column_index], cursor, hover,
                     frame.show_cursor, frame.show_hover, frame.pseudo, frame.update_count)
            states = self._cell_lines.setdefault(where, {})
            cached = states.get(state)
            segments: list[Segment] | None
            if cached is not None and cached[0] == text:
                segments = cached[1]
            else:
                segments = None
                if cached is not None:
                    segments = _same_shape(cached[1], cached[0], text, self.cell_padding)
                if segments is None:
                    segments = compat.render_cell(self, index, column_index, base_style,
                                                  frame.widths[column_index], cursor=cursor,
                                                  hover=hover)
                    self.cells_rendered += 1
                    # Kept here, not in DataTable's cell cache: that one then holds only
                    # what DataTable renders itself (the header), and stays small to purge.
                    compat.discard_cell_render(
                        self, (row, column, base_style, cursor, hover, frame.show_hover,
                               frame.update_count, frame.pseudo))
                if state not in states and len(states) >= _STATES_KEPT:
                    del states[next(iter(states))]  # the oldest
                states[state] = (text, segments)
            cells.append(segments)
        # What is right of the last column takes the row's highlight, as in DataTable.
        extend_style = compat.row_end_style(self, hover=hover, cursor=cursor,
                                            show_cursor=frame.show_cursor,
                                            show_hover=frame.show_hover)
        extend_style = (base_style + extend_style
                        + Style.from_meta({"row": index, "column": 0, "out_of_bounds": True}))
        table_width = sum(frame.widths)
        remaining = max(0, frame.width - table_width)
        segments = list(chain.from_iterable(cells))
        segments.append(Segment(" " * remaining, extend_style))
        if frame.scroll_x == 0 and table_width <= frame.width:  # exactly the width: as is
            return Strip(segments, frame.width).simplify()
        line = Strip(segments).crop(frame.scroll_x, frame.scroll_x + frame.width)
        return line.adjust_cell_length(frame.width, base_style).simplify()

    def _rebuild(self, columns: list[tuple[str, str]], rows: Sequence[Row]) -> None:
        selected = self.selected_key
        old_index = self.cursor_row
        old_keys = list(self._keys)
        self.rebuilds += 1
        self._forget_lines()
        self._versions.clear()
        # The columns too: a column only ever widens as rows are added, so widths
        # measured for rows that are gone would stay.
        self.clear(columns=True)
        for key, label in columns:
            self.add_column(Text(label, style="bold"), key=key)
        self._columns = columns
        self._column_keys = [key for key, _ in columns]
        self._keys = [row.key for row in rows]
        self._cells = {}
        for row in rows:
            self.add_row(*(row.cells.get(key, Text()) for key, _ in columns), key=row.key)
            self._cells[row.key] = dict(row.cells)
        if not rows:
            return
        if selected is not None and selected in self._keys:
            target = self._keys.index(selected)
        else:
            # The selected event left: stay near where the cursor was, on a neighbour
            # that is still there.
            target = min(max(old_index, 0), len(rows) - 1)
            for key in old_keys[old_index + 1:] + old_keys[:old_index][::-1]:
                if key in self._keys:
                    target = self._keys.index(key)
                    break
        self.move_cursor(row=target, animate=False)

    def cell_text(self, key: str, column: str) -> str:
        """The plain text of one cell (for tests)."""
        return self.get_cell(key, column).plain

    def fit(self, lines: int) -> None:
        """Grow with the rows up to ``lines`` lines, then scroll."""
        lines = max(lines, 3)
        if self.styles.max_height is None or self.styles.max_height.value != lines:
            self.styles.max_height = lines

