"""The events table: one row per event, keyed by EventId.

:meth:`EventsTable.sync` takes the rows the screen wants and changes as little as it can:
when the same events are in the same order it updates only the cells whose text changed
(a countdown, once a second); otherwise it rebuilds the rows and puts the cursor back on
the same EventId. Columns depend on the width (:func:`columns_for`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.widgets import DataTable

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


def columns_for(tier: str) -> list[tuple[str, str]]:
    """(key, label) of the columns shown at that tier, left to right."""
    index = {"wide": 2, "medium": 3, "narrow": 4}[tier]
    labels = _NARROW_LABELS if tier == "narrow" else {}
    return [(key, labels.get(key, label)) for key, label, *shown in COLUMNS
            if (key, label, *shown)[index]]


@dataclass(frozen=True)
class Row:
    """One row: its EventId and a Text per column key."""

    key: str
    cells: dict[str, Text]


class EventsTable(DataTable[Text]):
    """The events, most urgent first; the cursor follows its EventId."""

    DEFAULT_CSS = """
    EventsTable { height: auto; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=False, cell_padding=1)
        self._columns: list[tuple[str, str]] = []
        self._keys: list[str] = []
        self._cells: dict[str, dict[str, Text]] = {}
        self.rebuilds = 0  # how often rows were rebuilt rather than updated (for tests)
        self.cell_updates = 0  # how many cells were repainted one by one (for tests)

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
        else:
            for row in rows:
                old = self._cells.get(row.key, {})
                for key, _ in columns:
                    cell = row.cells.get(key, Text())
                    before = old.get(key)
                    if before != cell:
                        # Measuring the column again relayouts the whole table: only when
                        # the width changed (a ticking countdown keeps its width).
                        resize = before is None or before.cell_len != cell.cell_len
                        self.update_cell(row.key, key, cell, update_width=resize)
                        self.cell_updates += 1
                self._cells[row.key] = dict(row.cells)

    def _rebuild(self, columns: list[tuple[str, str]], rows: Sequence[Row]) -> None:
        selected = self.selected_key
        old_index = self.cursor_row
        old_keys = list(self._keys)
        self.rebuilds += 1
        # The columns too: a column only ever widens as rows are added, so widths
        # measured for rows that are gone would stay.
        self.clear(columns=True)
        for key, label in columns:
            self.add_column(Text(label, style="bold"), key=key)
        self._columns = columns
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

