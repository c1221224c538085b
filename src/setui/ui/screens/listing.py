"""What the history and audit screens share: a table to move through and open."""

from __future__ import annotations

from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable

__all__ = ["BACK_KEYS", "CURSOR_KEYS", "TableNavigation"]

# The keys of what TableNavigation does, for the screens' own BINDINGS.
BACK_KEYS: list[BindingType] = [
    Binding("escape", "back", "Back"),
    Binding("q", "back", "Back", show=False),
]
CURSOR_KEYS: list[BindingType] = [
    Binding("j", "cursor_down", "Down", show=False),
    Binding("k", "cursor_up", "Up", show=False),
    Binding("g", "top", "Top", show=False),
    Binding("G", "bottom", "Bottom", show=False),
]


class TableNavigation(Screen[None]):
    """Escape/q back, j/k/g/G over the screen's one DataTable, Enter or a click opens.

    Each screen still lists its keys in its own BINDINGS (the help is checked against
    them), :data:`BACK_KEYS` first and :data:`CURSOR_KEYS` last, and defines
    ``action_open``.
    """

    def action_open(self) -> None:
        raise NotImplementedError

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()  # a mouse click selects too
        self.action_open()

    def action_back(self) -> None:
        self.dismiss()

    def action_cursor_down(self) -> None:
        self.query_one(DataTable).action_cursor_down()

    def action_cursor_up(self) -> None:
        self.query_one(DataTable).action_cursor_up()

    def action_top(self) -> None:
        self.query_one(DataTable).move_cursor(row=0)

    def action_bottom(self) -> None:
        table = self.query_one(DataTable)
        table.move_cursor(row=max(table.row_count - 1, 0))
