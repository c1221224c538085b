"""Every shipped theme reads in truecolor, in 256 colours and in 16.

The dashboard is drawn by the real app (the busy scenario, several screens), and every
cell's colours are brought down to 256 and 16 colours the way Rich does it for such a
terminal (``Color.downgrade``); 16-colour cells take the RGB of Rich's default terminal
palette. Each cell's contrast is WCAG 2's ratio between its foreground and background:

- text (letters, digits, punctuation, the countdown's signs) at least 3:1: WCAG's floor
  for large text and for the parts of an interface one must see; the neighbours' dimmed
  rows and muted notes are meant to be quieter than the rest, never unreadable;
- separators and bars (box drawing, blocks) at least 1.5:1: they need only be seen,
  as a line, not read, but colour 231 on 231 is no line at all.

A theme that fails names the theme, the colour system, the cell and both colours.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator

import pytest
from rich.color import Color, ColorSystem
from rich.style import Style
from rich.terminal_theme import DEFAULT_TERMINAL_THEME

from setui.ui.themes import load_themes
from tests.support.dashboard import NARROW, Dashboard, MakeDashboard, event_of, select, start

TEXT_RATIO = 3.0
SEPARATOR_RATIO = 1.5
SYSTEMS = {"truecolor": None, "256": ColorSystem.EIGHT_BIT, "16": ColorSystem.STANDARD}
THEMES = sorted(theme.name for theme in load_themes().themes)

RGB = tuple[int, int, int]


def _luminance(rgb: RGB) -> float:
    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    red, green, blue = rgb
    return 0.2126 * channel(red) + 0.7152 * channel(green) + 0.0722 * channel(blue)


def contrast(a: RGB, b: RGB) -> float:
    """WCAG 2's contrast ratio, 1 (none) to 21 (black on white)."""
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def _rgb(color: Color | None, system: ColorSystem | None, default: RGB) -> RGB:
    if color is None or color.is_default:
        return default
    if system is not None:
        color = color.downgrade(system)
    triplet = color.get_truecolor(DEFAULT_TERMINAL_THEME)
    return triplet.red, triplet.green, triplet.blue


def _kind(char: str) -> str | None:
    """"text", "separator", or None for what carries no meaning of its own (blanks)."""
    if char.isspace() or not char.isprintable():
        return None
    code = ord(char)
    if 0x2500 <= code <= 0x259F:  # box drawing and blocks: rules, bars, the timeline
        return "separator"
    if unicodedata.category(char).startswith(("L", "N", "P", "S")):
        return "text"
    return None


def cells(d: Dashboard) -> Iterator[tuple[int, int, str, Style]]:
    """(x, y, character, style) of every cell on the screen as the app drew it."""
    for y, strip in enumerate(d.app.screen._compositor.render_strips()):
        x = 0
        for segment in strip:
            style = segment.style or Style()
            for char in segment.text:
                yield x, y, char, style
                x += 1


def problems(d: Dashboard, where: str) -> list[str]:
    theme = d.app.current_theme
    found: dict[tuple[str, str, str], str] = {}
    defaults = (_hex_rgb(theme.foreground or "#000000"), _hex_rgb(theme.background or "#000000"))
    for x, y, char, style in cells(d):
        kind = _kind(char)
        if kind is None:
            continue
        for system_name, system in SYSTEMS.items():
            fg = _rgb(style.color, system, defaults[0])
            bg = _rgb(style.bgcolor, system, defaults[1])
            if style.reverse:
                fg, bg = bg, fg
            ratio = contrast(fg, bg)
            wanted = TEXT_RATIO if kind == "text" else SEPARATOR_RATIO
            if ratio < wanted:
                key = (system_name, kind, f"{fg}/{bg}")
                drawn = (f"{_hex(style.color, defaults[0])} on "
                         f"{_hex(style.bgcolor, defaults[1])}")
                found.setdefault(key, f"{theme.name} {where} {system_name} colours: {kind} "
                                      f"{char!r} at {x},{y} is {fg} on {bg} (drawn {drawn}), "
                                      f"{ratio:.2f}:1 < {wanted}:1")
    return list(found.values())


def _hex(color: Color | None, default: RGB) -> str:
    red, green, blue = _rgb(color, None, default)
    return f"#{red:02X}{green:02X}{blue:02X}"


def _hex_rgb(text: str) -> RGB:
    color = Color.parse(text).get_truecolor()
    return color.red, color.green, color.blue


def test_contrast_ratio_matches_wcag() -> None:
    assert contrast((0, 0, 0), (255, 255, 255)) == pytest.approx(21.0)
    assert contrast((119, 119, 119), (255, 255, 255)) == pytest.approx(4.48, abs=0.01)
    assert contrast((240, 240, 240), (240, 240, 240)) == 1.0


@pytest.mark.parametrize("theme", THEMES)
async def test_every_theme_reads_in_truecolor_256_and_16_colours(
        make_dashboard: MakeDashboard, theme: str) -> None:
    d = make_dashboard(at=200, theme=theme)
    found: list[str] = []
    async with d.app.run_test(size=NARROW) as pilot:
        await start(d, pilot)
        await d.advance(pilot, 240, step=20)  # current, started, completed, cancelled
        d.app.clear_notifications()
        await pilot.pause()
        found += problems(d, "dashboard")
        await select(d, pilot, event_of(d, "Reboot", "web-0"))  # the selected row too
        found += problems(d, "dashboard, Reboot selected")
        for keys, where in ((("question_mark",), "help"), (("escape", "h"), "history"),
                            (("escape", "enter"), "details")):
            await pilot.press(*keys)
            await pilot.pause()
            found += problems(d, where)
    assert not found, "\n".join(found)
