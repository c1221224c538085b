"""What the history and audit screens share: a table to move through and open."""

from __future__ import annotations

from textual.screen import Screen
from textual.widgets import DataTable

__all__ = ["TableNavigation"]


class TableNavigation(Screen[None]):
    """Escape/q back, j/k/g/G over the screen's one DataTable, Enter or a click opens.

    Each screen still lists its keys in its own BINDINGS (the help is checked against
    them) and defines ``action_open``.
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
