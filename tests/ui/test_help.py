"""The help (``?``) documents every key of every screen, and the signs in the table.

The keys are not a list kept by hand: they come from the screens' own BINDINGS, so a key
added to a screen without a line in ``help.md`` fails here.
"""

from __future__ import annotations

import asyncio
from importlib import resources
from typing import Any

import pytest
from textual.binding import Binding, BindingType
from textual.widgets import Markdown

from setui.ui.app import SetuiApp
from setui.ui.replay_app import ReplayApp
from setui.ui.screens.audit import AuditScreen
from setui.ui.screens.confirm import ConfirmationModal
from setui.ui.screens.details import DetailsScreen
from setui.ui.screens.help import HelpScreen, help_text
from setui.ui.screens.history import DetailScreen, HistoryScreen
from setui.ui.screens.main import MainScreen
from setui.ui.screens.replay import ReplayScreen
from setui.ui.screens.window import WindowScreen
from tests.support.dashboard import wait_for
from tests.support.screenhost import ScreenApp

MakeDashboard = Any  # the conftest fixture, loosely, as in test_app.py

# Each screen, with the heading of the help section that must document its keys. The app's
# own bindings (? and q) work on the dashboard. DetailScreen is the page an incarnation
# (history) or an audit record opens; it shares the history section, which says so.
SECTIONS: list[tuple[str, list[type[Any]]]] = [
    ("Dashboard", [MainScreen, SetuiApp]),
    ("The approval dialog", [ConfirmationModal]),
    ("Event details", [DetailsScreen]),
    ("History", [HistoryScreen, DetailScreen]),
    ("Audit log", [AuditScreen]),
    ("Replay", [ReplayScreen, ReplayApp]),
    ("This help", [HelpScreen]),
    ("The plan and the log", [WindowScreen]),
]
# Keys Textual binds by itself (Ctrl+P, Tab, Ctrl+Q ...) are not in these BINDINGS; the one
# an operator needs is listed here by hand.
EXTRA = {"Dashboard": ["Ctrl+P"]}
# No binding is left out as an alias: a hidden key nobody documents is a key that surprises
# (q goes back on every screen but quits on the dashboard; d closes the details it opened),
# so even show=False bindings must be in the help.
EXCLUDED: set[tuple[str, str]] = set()

_SHOWN = {"slash": "/", "plus": "+", "minus": "-", "question_mark": "?", "escape": "Escape",
          "enter": "Enter", "up": "↑", "down": "↓", "left": "←", "right": "→",
          "left_square_bracket": "[", "right_square_bracket": "]"}


def shown(key: str) -> str:
    """How help.md writes a key: ``/`` for slash, ``Escape``, ``Ctrl+P``, ``G``."""
    if key in _SHOWN:
        return _SHOWN[key]
    if key.startswith("ctrl+"):
        return "Ctrl+" + key.removeprefix("ctrl+").upper()
    return key


def keys_of(screen: type[Any]) -> list[str]:
    """Every key of the class's own BINDINGS (``"j,down"`` is two keys)."""
    found: list[str] = []
    bindings: list[BindingType] = list(screen.__dict__.get("BINDINGS", []))
    for binding in bindings:
        key = binding.key if isinstance(binding, Binding) else binding[0]
        found += [k.strip() for k in key.split(",") if k.strip()]
    return [k for k in found if (screen.__name__, k) not in EXCLUDED]


def sections(text: str, headings: list[str]) -> dict[str, str]:
    """The text under each heading (a line that starts with it), up to the next one."""
    lines = text.splitlines()
    starts = {}
    for heading in headings:
        index = next((i for i, line in enumerate(lines)
                      if line.strip().lstrip("#").strip().startswith(heading)), None)
        assert index is not None, f"no section {heading!r}"
        starts[heading] = index
    order = sorted(starts, key=starts.__getitem__)
    out = {}
    for position, heading in enumerate(order):
        end = starts[order[position + 1]] if position + 1 < len(order) else len(lines)
        out[heading] = "\n".join(lines[starts[heading]:end])
    return out


def expected() -> dict[str, list[str]]:
    wanted: dict[str, list[str]] = {}
    for heading, screens in SECTIONS:
        keys = [shown(k) for screen in screens for k in keys_of(screen)]
        wanted[heading] = list(dict.fromkeys(keys + EXTRA.get(heading, [])))
    return wanted


def test_every_screen_has_keys_to_check() -> None:
    """Guards the derivation: an empty list would pass everything below."""
    wanted = expected()
    assert {"a", "d", "Enter", "/", "m", "r", "h", "l", "+", "-", "?", "q"} <= set(
        wanted["Dashboard"])
    assert wanted["Event details"] == ["Escape", "q", "d", "r", "c", "j", "k"]
    assert {"Enter", "r", "g", "G"} <= set(wanted["History"])
    assert {"Enter", "r", "g", "G"} <= set(wanted["Audit log"])
    assert set(wanted["The approval dialog"]) == {"y", "n", "Escape", "Ctrl+C"}


def test_help_source_lists_every_key_in_its_section() -> None:
    text = help_text()
    parts = sections(text, [heading for heading, _ in SECTIONS])
    for heading, keys in expected().items():
        for key in keys:
            assert f"`{key}`" in parts[heading], f"{key} is not in the help's {heading!r}"


def test_help_explains_the_approval_cells() -> None:
    table = sections(help_text(), ["Reading the table", "Reading the timeline"])
    for sign in ("`approving…`", "`✓ 10:02:11`", "`✗ failed`"):
        assert sign in table["Reading the table"], sign


async def test_rendered_help_shows_every_key(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    # Tall enough that the whole help is on screen at once, so its text can be read back.
    async with d.app.run_test(size=(110, 260)) as pilot:
        await d.settle(pilot)
        await pilot.press("question_mark")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, HelpScreen))
        markdown = d.app.screen.query_one(Markdown)
        await d.wait_for(pilot, lambda: len(markdown.children) > 10)

        def shown() -> str:
            return "\n".join(strip.text.rstrip()
                             for strip in d.app.screen._compositor.render_strips())

        # Laid out once every section's heading is on the screen.
        await d.wait_for(pilot, lambda: all(heading in shown() for heading, _ in SECTIONS))
        rendered = shown()
        assert "`" not in rendered  # rendered as Markdown, not shown as its source
        parts = sections(rendered, [heading for heading, _ in SECTIONS])
        for heading, keys in expected().items():
            for key in keys:
                assert key in parts[heading], f"{key} is not shown under {heading!r}"
        for sign in ("approving…", "✓ 10:02:11", "✗ failed"):
            assert sign in rendered
        await pilot.press("escape")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, MainScreen))


def _help_lines(text: str) -> list[str]:
    """The help as the Markdown widget draws it, every section on one tall screen."""
    async def render() -> list[str]:
        screen = HelpScreen(text)
        app = ScreenApp(screen)
        last = [line.lstrip("#").strip() for line in text.splitlines()
                if line.startswith("#")][-1]

        def lines() -> list[str]:
            return [strip.text.rstrip() for strip in app.screen._compositor.render_strips()]

        async with app.run_test(size=(110, 400)) as pilot:
            # Laid out once the last heading is on the screen.
            await wait_for(pilot, lambda: any(last in line for line in lines()))
            await pilot.pause()
            return lines()

    return asyncio.run(render())


@pytest.mark.parametrize("source", ["dashboard", "fleet"])
def test_the_help_shows_no_markdown_table_syntax(source: str) -> None:
    """A table row that Markdown does not take for a table (no header row, no blank line
    before it) is drawn as its source: ``| `sign` | meaning |``. Every table must render
    as one, in the dashboard's help and in the fleet view's."""
    text = help_text() if source == "dashboard" else (
        resources.files("setui.ui.fleet").joinpath("help.md").read_text(encoding="utf-8"))
    rows = sum(1 for line in text.splitlines() if line.startswith("|"))
    assert rows > 5  # there are tables to render
    lines = _help_lines(text)
    raw = [line for line in lines if "|" in line]
    assert raw == [], "drawn as Markdown source:\n" + "\n".join(raw)
    # Every cell of every table is on the screen: the tables rendered, with their text.
    shown = "\n".join(lines)
    for line in text.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            for cell in line.strip("|").split("|"):
                words = cell.replace("`", "").replace("**", "").split()
                assert all(word in shown for word in words), (line, words)
