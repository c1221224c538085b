"""A page of text whose prose wraps at the width of its view and whose raw JSON never does.

An incarnation of the history and a record of the audit log are prose (what changed,
who approved) followed by the raw document. Wrapped at the screen's edge, a JSON line
goes on under the next key's indentation and can no longer be read, compared or copied
as JSON. :class:`Page` wraps every line to the width of the view it scrolls in, except
the lines :func:`raw` made, which stay whole and scroll sideways (as the event details'
raw JSON does).
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.widget import Widget
from textual.widgets import Static

__all__ = ["Page", "raw"]

_RAW = Style(meta={"setui.raw": True})  # marks a line that is never wrapped


def raw(line: str) -> Text:
    """One line of a raw document, with its newline: :class:`Page` never wraps it."""
    return Text(line + "\n", style=_RAW)


def _is_raw(line: Text) -> bool:
    return any(span.style == _RAW for span in line.spans) or line.style == _RAW


class Page(Static):
    """Shows ``body``: the prose wrapped to the view's width, raw lines whole.

    The view is the parent that scrolls this page; the page is as wide as its widest
    line, so a raw line longer than the view scrolls sideways. What the page says is
    still ``body`` (``visual``), whatever width it is drawn at.
    """

    DEFAULT_CSS = """
    Page { width: auto; min-width: 100%; text-wrap: nowrap; text-overflow: clip; }
    """

    def __init__(self, body: Text, *, id: str | None = None) -> None:
        super().__init__(body, id=id, markup=False)
        self._body = body

    def render(self) -> Text:
        width = self._room()
        out = Text(end="")
        for line in self._body.split("\n", allow_blank=True):
            if _is_raw(line) or line.cell_len <= width:
                out.append_text(line)
                out.append("\n")
                continue
            for part in line.wrap(self.app.console, width, overflow="fold"):
                part.rstrip()
                out.append_text(part)
                out.append("\n")
        out.rstrip()
        return out

    def _room(self) -> int:
        """Cells a line of prose may take: the view's width, less a vertical scrollbar
        (counted whether or not it shows, so prose never makes the page scroll sideways)."""
        view = self.parent
        if isinstance(view, Widget):
            width = view.size.width - view.styles.scrollbar_size_vertical
            if width > 0:
                return max(width, 20)
        return max(self.app.size.width - 4, 20)
