"""Write only the cells a refresh asked for, not everything left of them.

Textual (8.2.8; Textualize/textual#5625) turns a refreshed region into terminal output
with ``ChopsUpdate.render_segments``, which writes each widget's part of a line from the
widget's left edge up to the end of the dirty span: a clock digit at column 194 rewrote
the whole status line, a countdown cell the table row up to it, a note at a lane's right
end the whole lane. That was most of the 5-50 KB/s the dashboard wrote every second.

:func:`install` replaces that one method with the same loop, cropped at the start of the
span as well (widened to whole double-width characters, so a cut never splits one). What
reaches the terminal is the same picture; only cells that were not asked for are no
longer sent. The widgets that rely on it install it when they mount; it is idempotent,
and a Textual whose ``ChopsUpdate`` looks different keeps its own method.
"""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.control import Control
from textual.strip import Strip

__all__ = ["install", "installed", "whole_cells"]

_MARK = "_setui_crops_span_start"


def whole_cells(strip: Strip, start: int, stop: int) -> tuple[int, int]:
    """``[start, stop)`` widened so it does not cut a double-width character in two
    (half of one written alone would blank the other half on the terminal)."""
    if strip.text.isascii():
        return start, stop
    position = 0
    for text, _style, control in strip:
        if control:
            continue
        for char in text:
            width = cell_len(char)
            if width == 2:
                if position < start < position + 2:
                    start = position
                if position < stop < position + 2:
                    stop = position + 2
            position += width
            if position >= stop:
                return start, stop
    return start, stop


def _render_segments(self: Any, console: Console) -> str:
    """``ChopsUpdate.render_segments`` of textual 8.2.8, cropped at ``x1`` as well."""
    sequences: list[str] = []
    append = sequences.append
    move_to = Control.move_to
    chops = self.chops
    chop_ends = self.chop_ends
    last_y = self.spans[-1][0]
    for y, x1, x2 in self.spans:
        line = chops[y]
        ends = chop_ends[y]
        for end, (x, strip) in zip(ends, line.items(), strict=False):
            if strip is None or x >= x2 or end <= x1:
                continue
            if x1 <= x and end <= x2:  # the whole chop is in the span
                append(move_to(x, y).segment.text)
                append(strip.render(console))
                continue
            start, stop = whole_cells(strip, max(x1 - x, 0), min(end, x2) - x)
            append(move_to(x + start, y).segment.text)
            append(strip.crop(start, stop).render(console))
        if y != last_y:
            append("\n")
    return "".join(sequences)


def installed() -> bool:
    """Whether partial updates are cropped at the start of their spans."""
    from textual._compositor import ChopsUpdate

    return bool(getattr(ChopsUpdate.render_segments, _MARK, False))


def install() -> bool:
    """Crop partial updates at both ends (once per process). False when this Textual's
    ``ChopsUpdate`` is not the one this was written for (then nothing is changed)."""
    from textual._compositor import ChopsUpdate

    if installed():
        return True
    original = ChopsUpdate.render_segments
    init = getattr(ChopsUpdate.__init__, "__code__", None)
    if init is None or init.co_varnames[1:4] != ("chops", "spans", "chop_ends"):
        return False

    def render_segments(self: Any, console: Console) -> str:
        if not self.spans:
            return original(self, console)
        return _render_segments(self, console)

    render_segments.__doc__ = _render_segments.__doc__
    setattr(render_segments, _MARK, True)
    ChopsUpdate.render_segments = render_segments  # type: ignore[method-assign]
    return True
