"""Lines of text that repaint only the cells that changed.

A ``Static`` repaints its whole region on every ``update``: the status line's clock, a
ticking note on the timeline or an "approving… 3 s" rewrote every line of the widget each
second, and over SSH that is most of what the dashboard writes. :class:`ChangedLines`
keeps each line rendered (exactly as ``Static`` would render it) and, given new lines,
compares them cell by cell with what is on the screen and marks only the changed span of
each line for repainting: a tick of ``10:00:01`` to ``10:00:02`` costs one cell (and
one cell is what reaches the terminal, with :func:`setui.ui.compat.install`).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain

from rich.cells import cell_len
from rich.segment import Segment
from rich.text import Text
from textual.geometry import Region
from textual.strip import Strip
from textual.visual import Visual, visualize
from textual.widget import Widget

__all__ = ["ChangedLines", "changed_span", "characters_only", "left_and_right", "respliced",
           "same_shape"]

_Cell = tuple[str, object]


def _cells(segments: Sequence[Segment]) -> list[_Cell]:
    """(character, style) per terminal cell; a wide character's second cell is ''."""
    cells: list[_Cell] = []
    for text, style, control in segments:
        if control:
            continue
        if text.isascii():
            cells.extend((char, style) for char in text)
            continue
        for char in text:
            cells.append((char, style))
            if cell_len(char) == 2:
                cells.append(("", style))
    return cells


def _first_difference(a: Sequence[Segment], b: Sequence[Segment],
                      reverse: bool = False) -> int | None:
    """Cells from the start (or from the end) to the first cell that differs in character
    or style, or None if none does. Segments of one-cell characters only: one style
    comparison per overlapping stretch, then the characters compared as strings."""
    if reverse:
        a = [Segment(seg.text[::-1], seg.style) for seg in reversed(a)]
        b = [Segment(seg.text[::-1], seg.style) for seg in reversed(b)]
    i = j = at_a = at_b = position = 0
    while i < len(a) and j < len(b):
        text_a, style_a = a[i].text, a[i].style
        text_b, style_b = b[j].text, b[j].style
        size = min(len(text_a) - at_a, len(text_b) - at_b)
        if style_a is not style_b and style_a != style_b:
            return position
        chunk_a = text_a[at_a:at_a + size]
        chunk_b = text_b[at_b:at_b + size]
        if chunk_a != chunk_b:
            return position + next(k for k in range(size) if chunk_a[k] != chunk_b[k])
        position += size
        at_a += size
        at_b += size
        if at_a == len(text_a):
            i, at_a = i + 1, 0
        if at_b == len(text_b):
            j, at_b = j + 1, 0
    if i == len(a) and j == len(b):
        return None
    return position


def changed_span(before: Strip | None, after: Strip) -> tuple[int, int] | None:
    """The cells ``[x1, x2)`` where two renders of a line differ, or None if they do not."""
    if before is None:
        return (0, after.cell_length) if after.cell_length else None
    # Compared at the same columns: a line that got shorter leaves cells to clear, and
    # what follows a shorter word moved left (the screen pads lines to the widget).
    length = max(before.cell_length, after.cell_length)
    old = [segment for segment in before.adjust_cell_length(length) if not segment.control]
    new = [segment for segment in after.adjust_cell_length(length) if not segment.control]
    if old == new:
        return None
    if all(cell_len(s.text) == len(s.text) for s in chain(old, new)):
        first = _first_difference(old, new)
        if first is None:  # the same cells, cut into segments differently
            return None
        last = _first_difference(old, new, reverse=True) or 0
        end = max(sum(len(s.text) for s in old), sum(len(s.text) for s in new)) - last
        return first, max(end, first + 1)
    # Double-width characters: compare cell by cell.
    old_cells, new_cells = _cells(old), _cells(new)
    shortest = min(len(old_cells), len(new_cells))
    start = 0
    while start < shortest and old_cells[start] == new_cells[start]:
        start += 1
    end_old, end_new = len(old_cells), len(new_cells)
    while end_old > start and end_new > start and old_cells[end_old - 1] == new_cells[end_new - 1]:
        end_old -= 1
        end_new -= 1
    if start == end_old == end_new:
        return None
    if 0 < start < len(new_cells) and new_cells[start][0] == "":
        start -= 1  # the second half of a wide character: repaint the character
    end = max(end_old, end_new, start + 1)
    if end < len(new_cells) and new_cells[end][0] == "":
        end += 1  # the first half of a wide character: repaint the character
    return start, end


def same_shape(strip: Strip, before: Text, after: Text) -> Strip | None:
    """The render of ``after`` from ``strip``, the render of ``before``, when only
    characters changed in place (the clock: same length, one cell each, same styles at
    the same places) and ``strip`` holds exactly the text. Its segments are then the same
    but for those characters; None when that cannot be known."""
    if not characters_only(before, after):
        return None
    segments = list(strip)
    if any(s.control for s in segments) or "".join(s.text for s in segments) != before.plain:
        return None  # cut, padded or decorated: not just the text
    return Strip(respliced(segments, after.plain), strip.cell_length)


def characters_only(before: Text, after: Text) -> bool:
    """Only characters changed: same length, one cell each, same styles at same places."""
    old, new = before.plain, after.plain
    return (len(old) == len(new) == cell_len(old) == cell_len(new)
            and before.spans == after.spans and before.style == after.style)


def respliced(segments: Sequence[Segment], text: str) -> list[Segment]:
    """``segments`` holding ``text`` (as long as theirs), each with its style and length."""
    result = []
    at = 0
    for segment in segments:
        size = len(segment.text)
        result.append(Segment(text[at:at + size], segment.style))
        at += size
    return result


class ChangedLines(Widget):
    """Shows a list of rich ``Text`` lines, one per line of the widget (no wrapping).

    :meth:`set_lines` repaints only the cells that changed; a change in the number of
    lines is the one thing that lays the screen out again.
    """

    DEFAULT_CSS = """
    ChangedLines { height: auto; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._texts: list[Text] = []
        self._strips: list[Strip | None] = []
        self._rendered_for: tuple[int, object] | None = None  # (width, visual style)

    # -- what the screen shows ------------------------------------------------------------
    def set_lines(self, lines: Sequence[Text]) -> bool:
        """Show ``lines``; repaint only what differs. True if anything was repainted."""
        lines = list(lines)
        if lines == self._texts:
            return False
        relayout = len(lines) != len(self._texts)
        old_texts, old_strips = self._texts, self._strips
        self._texts = lines
        key = self._render_key()
        if relayout or key is None or key != self._rendered_for:
            # Drawn afresh from the new texts, lazily, by render_line.
            self._strips = [None] * len(lines)
            self._rendered_for = key
            self.refresh(layout=relayout)
            return True
        regions: list[Region] = []
        strips: list[Strip | None] = []
        for y, text in enumerate(lines):
            before = old_strips[y] if y < len(old_strips) else None
            if before is not None and y < len(old_texts) and text == old_texts[y]:
                strips.append(before)
                continue
            after = None
            if before is not None and y < len(old_texts):
                after = same_shape(before, old_texts[y], text)
            if after is None:
                after = self._render_text(text)
            strips.append(after)
            span = changed_span(before, after)
            if span is not None:
                regions.append(Region(span[0], y, span[1] - span[0], 1))
        self._strips = strips
        if regions:
            self.refresh(*regions)
        return bool(regions)

    @property
    def texts(self) -> list[Text]:
        return list(self._texts)

    def plain(self) -> str:
        """The lines as plain text (for tests and screen readers)."""
        return "\n".join(line.plain for line in self._texts)

    # -- rendering --------------------------------------------------------------------------
    def render(self) -> Text:
        """All the lines as one text: what sizes the widget and what a mouse selects."""
        return Text("\n").join(self._texts)

    def render_line(self, y: int) -> Strip:
        if self.text_selection is not None:  # drawn with the selection, as Static does
            return super().render_line(y)
        key = self._render_key()
        if key != self._rendered_for:
            self._strips = [None] * len(self._texts)
            self._rendered_for = key
        if not 0 <= y < len(self._texts):
            return Strip.blank(self.size.width, self.visual_style.rich_style)
        strip = self._strips[y]
        if strip is None:
            strip = self._strips[y] = self._render_text(self._texts[y])
        return strip

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._rendered_for = None  # a theme or CSS change: every line drawn again

    def _render_key(self) -> tuple[int, object] | None:
        width = self.size.width
        if not width or not self.is_mounted:
            return None
        return width, self.visual_style

    def _render_text(self, text: Text) -> Strip:
        """One line, rendered as ``Static`` renders its content."""
        width = self.size.width
        visual: Visual = visualize(self, text, markup=False)
        strips = Visual.to_strips(self, visual, width, 1, self.visual_style)
        if not strips:
            return Strip([Segment(" " * width)], width)
        return strips[0]


def left_and_right(left: Text, right: Text, width: int) -> Text:
    """One status line: ``left`` cut with an ellipsis where it would reach ``right`` (the
    clock, which must stay whole), padded so ``right`` ends at ``width``."""
    room = width - right.cell_len - 1
    if left.cell_len > room:
        left.truncate(max(room, 0), overflow="ellipsis")
    left.pad_right(width - left.cell_len - right.cell_len)
    line = left + right
    line.truncate(width, overflow="ellipsis")
    return line
