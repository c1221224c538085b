"""NO_COLOR (no-color.org): no colour at all reaches the terminal, attributes only.

Textual answers NO_COLOR with a filter that turns colours into greys (``38;5;244``) or
into the terminal's default colours (``39``/``49``): colour sequences either way. This
filter drops every colour from every segment and keeps bold, dim, italic, underline and
reverse, which is what the monochrome theme (``setui-mono``, chosen under NO_COLOR) says
everything with.
"""

from __future__ import annotations

from rich.segment import Segment
from textual.color import Color
from textual.filter import LineFilter

__all__ = ["WithoutColor"]


class WithoutColor(LineFilter):
    """Remove colour from every segment, keeping its attributes and links."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        return [Segment(text, None if style is None else style.without_color, control)
                for text, style, control in segments]
