"""NO_COLOR (no-color.org): no colour at all reaches the terminal, attributes only.

Textual answers NO_COLOR with a filter that turns colours into greys (``38;5;244``) or
into the terminal's default colours (``39``/``49``): colour sequences either way. This
filter drops every colour from every segment and keeps bold, dim, italic, underline and
reverse, which is what the monochrome theme (``setui-mono``, chosen under NO_COLOR) says
everything with. Whatever theme is picked, :func:`no_color_styles` gives its text styles
the mono theme's: with no colour shown, a theme is its attributes, and every theme must
show the selection in reverse and a neighbour's events dim.
"""

from __future__ import annotations

from rich.segment import Segment
from textual.color import Color
from textual.filter import LineFilter
from textual.theme import Theme

__all__ = ["WithoutColor", "no_color_styles"]

# The mono theme draws a loud banner (TAMPERED, DEMO) black on white: without colour
# that is plain bold, so under NO_COLOR the banner is reverse as well.
_ALARM = {"setui-alarm-style": "bold reverse"}


def no_color_styles(mono: Theme | None) -> dict[str, str]:
    """The CSS variables that set text styles (``*-style``: bold, dim, reverse...), as the
    mono theme sets them, for any theme shown without colour."""
    if mono is None:
        return dict(_ALARM)
    styles = {name: value for name, value in mono.variables.items()
              if name.endswith("-style")}
    return {**styles, **_ALARM}


class WithoutColor(LineFilter):
    """Remove colour from every segment, keeping its attributes and links."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        return [Segment(text, None if style is None else style.without_color, control)
                for text, style, control in segments]
