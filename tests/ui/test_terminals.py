"""The dashboard in the terminals an SSH session gives: narrow, small, keys as expected,
the connection in one sentence, the raw JSON copied, the theme remembered."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from textual.command import CommandList, CommandPalette
from textual.containers import VerticalScroll
from textual.widgets._footer import FooterKey

from setui.ui.screens.details import DetailsScreen, clipboard_problem, event_json
from setui.ui.screens.help import HelpScreen
from setui.ui.screens.main import MainScreen
from setui.ui.screens.small import TooSmallScreen
from setui.ui.widgets.keys import KeyBar, Shown, fit_keys
from setui.ui.widgets.summary import EventSummary
from tests.support.dashboard import (
    NARROW,
    Dashboard,
    MakeDashboard,
    event_of,
    screen_text,
    select,
    start,
    status,
)

SMALLEST = (60, 20)
HUGE = (250, 70)


def keys_shown(d: Dashboard) -> list[str]:
    """The key bar of the screen on top, as "key description" items."""
    bar = d.app.screen.query_one(KeyBar)
    return [f"{k.key_display} {k.description}".strip() for k in bar.query(FooterKey)]


def fits(d: Dashboard) -> bool:
    """Every key of the bar lies inside the screen."""
    bar = d.app.screen.query_one(KeyBar)
    return all(k.region.right <= d.app.size.width for k in bar.query(FooterKey))


def _shown(key: str, description: str, action: str) -> Shown:
    return Shown(key, key, description, action, True, "")


def test_fit_keys_drops_whole_keys_from_the_right_and_never_the_essential_ones() -> None:
    keys = [_shown("a", "Approve", "approve"), _shown("m", "This VM", "this_vm"),
            _shown("h", "History", "history"), _shown("?", "Help", "help"),
            _shown("q", "Quit", "quit")]
    assert fit_keys(keys, 200) == keys
    assert [k.key for k in fit_keys(keys, 35)] == ["a", "m", "?", "q"]
    assert [k.key for k in fit_keys(keys, 10)] == ["a", "?", "q"]  # even when they do not fit


@pytest.mark.parametrize("size", [SMALLEST, NARROW, HUGE], ids=["60x20", "80x24", "250x70"])
async def test_the_keys_that_matter_and_this_vm_stay_on_screen(
        make_dashboard: MakeDashboard, size: tuple[int, int]) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=size) as pilot:
        await start(d, pilot)
        await select(d, pilot, event_of(d, "Freeze", "web-0", "web-1"))
        await d.wait_for(pilot, lambda: "? Help" in keys_shown(d))
        shown = keys_shown(d)
        assert {"a Approve", "? Help", "q Quit"} <= set(shown), shown
        assert fits(d), shown
        summary = d.app.main_screen.query_one(EventSummary).plain().splitlines()[0]
        assert "web-0 (this VM)" in summary
        assert not any(line.rstrip().endswith("…") and "(this VM" in line and
                       "(this VM)" not in line for line in screen_text(d).splitlines())
        # Escape is offered while it has something to do: the filter.
        assert not any(s.startswith("esc") for s in shown)
        await pilot.press("slash")
        await d.wait_for(pilot, lambda: "esc Clear filter" in keys_shown(d))
        assert fits(d)
        # On every other screen Escape is the way back, and stays on screen too.
        await pilot.press("escape", "question_mark")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, HelpScreen))
        await d.wait_for(pilot, lambda: "esc Close" in keys_shown(d))


async def test_the_key_bar_is_rebuilt_only_when_its_keys_change(
        make_dashboard: MakeDashboard, monkeypatch: pytest.MonkeyPatch) -> None:
    composed: list[int] = []
    original = KeyBar.compose

    def counting(self: KeyBar) -> Any:
        composed.append(1)
        return original(self)

    monkeypatch.setattr(KeyBar, "compose", counting)
    d = make_dashboard()
    async with d.app.run_test(size=NARROW) as pilot:
        await start(d, pilot)
        await pilot.press("slash")
        await d.wait_for(pilot, lambda: "esc Clear filter" in keys_shown(d))
        before = len(composed)
        await pilot.press(*"reboot")  # each keystroke refreshes the screen's bindings
        await pilot.pause()
        assert len(composed) == before
        await pilot.press("escape")
        await d.wait_for(pilot, lambda: "esc Clear filter" not in keys_shown(d))
        assert len(composed) == before + 1


async def test_below_60x20_the_dashboard_says_what_it_needs(
        make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=(59, 20)) as pilot:
        await start(d, pilot)
        assert isinstance(d.app.screen, TooSmallScreen)
        assert "setui needs at least 60x20" in screen_text(d)
        assert "this terminal is 59x20" in screen_text(d)
        await pilot.resize_terminal(60, 20)
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, MainScreen))
        await pilot.resize_terminal(100, 19)
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, TooSmallScreen))
        await d.wait_for(pilot, lambda: "this terminal is 100x19" in screen_text(d))
        # Help opened over it, the terminal grown meanwhile: closing help shows the dashboard.
        await pilot.press("question_mark")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, HelpScreen))
        await pilot.resize_terminal(100, 30)
        await pilot.pause()
        await pilot.press("escape")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, MainScreen))
        await pilot.resize_terminal(50, 10)
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, TooSmallScreen))
        await pilot.press("q")
        await d.wait_for(pilot, lambda: not d.app.is_running)


async def test_ctrl_c_quits(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=NARROW) as pilot:
        await start(d, pilot)
        await pilot.press("slash", "x")  # from the filter box too
        await pilot.press("ctrl+c")
        await d.wait_for(pilot, lambda: not d.app.is_running)


async def test_help_scrolls_with_the_usual_keys(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard(poll=False)
    d.app.animation_level = "none"  # where each key lands, not the glide there (~0.4 s each)
    async with d.app.run_test(size=NARROW) as pilot:
        await pilot.press("question_mark")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, HelpScreen))
        scroll = d.app.screen.query_one("#help", VerticalScroll)
        await d.wait_for(pilot, lambda: scroll.max_scroll_y > 20)
        for key, where in (("G", lambda: scroll.scroll_y == scroll.max_scroll_y),
                           ("g", lambda: scroll.scroll_y == 0),
                           ("pagedown", lambda: scroll.scroll_y > 10),
                           ("end", lambda: scroll.scroll_y == scroll.max_scroll_y),
                           ("home", lambda: scroll.scroll_y == 0),
                           ("j", lambda: scroll.scroll_y == 1)):
            await pilot.press(key)
            await d.wait_for(pilot, where)


async def test_the_palette_keys_command_opens_setuis_help(
        make_dashboard: MakeDashboard) -> None:
    d = make_dashboard(poll=False)
    async with d.app.run_test(size=NARROW) as pilot:
        commands = {c.title: c.help for c in d.app.get_system_commands(d.app.screen)}
        assert commands["Keys"] == "setui's keys, and how to read the dashboard (?)"
        await pilot.press("ctrl+p")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, CommandPalette))
        await pilot.press(*"keys")

        def first() -> str:
            if not isinstance(d.app.screen, CommandPalette):
                return ""
            found = d.app.screen.query_one(CommandList)  # type: ignore[attr-defined]
            return str(found.get_option_at_index(0).prompt) if found.option_count else ""

        await d.wait_for(pilot, lambda: first().startswith("Keys"))
        await pilot.press("enter")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, HelpScreen))


# -- urgency on the selected row ---------------------------------------------------------------
def _row_background(d: Dashboard, text: str) -> str:
    """The background colour of the first cell of the screen line holding ``text``."""
    for strip in d.app.screen._compositor.render_strips():
        if text in strip.text:
            segment = next(s for s in strip if s.text.strip())
            assert segment.style is not None and segment.style.bgcolor is not None
            return segment.style.bgcolor.get_truecolor().hex.upper()
    raise AssertionError(f"{text!r} is not on the screen")


@pytest.mark.parametrize("theme", ["setui-dark", "setui-light", "setui-mono"])
async def test_the_selected_row_keeps_the_colour_of_its_urgency(
        make_dashboard: MakeDashboard, theme: str) -> None:
    d = make_dashboard(at=440, theme=theme)  # this VM's Reboot: ! T-3:20
    async with d.app.run_test(size=NARROW) as pilot:
        await start(d, pilot)
        reboot = event_of(d, "Reboot", "web-0")
        await select(d, pilot, reboot)
        await pilot.pause()
        soon = d.app.current_theme.variables["setui-soon"].upper()
        colour = _row_background(d, "! T-3:")
        if theme == "setui-mono":  # no colour: reverse marks the selection, `!` the urgency
            assert colour != soon
        else:
            assert colour == soon
        others = [e for e in d.app.session.document.events
                  if not e.affects("web-0")]
        await select(d, pilot, others[0])  # a neighbour's: the usual selection
        await pilot.pause()
        assert _row_background(d, others[0].event_type) != soon


# -- the connection -----------------------------------------------------------------------------
async def test_r_says_what_the_service_answered(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=NARROW) as pilot:
        await start(d, pilot)
        await pilot.press("r")
        await d.wait_for(pilot, lambda: any(n.startswith("Poll: the service answered")
                                            for n in d.notices()))
        said = next(n for n in d.notices() if n.startswith("Poll: the service answered"))
        incarnation = d.app.session.document.incarnation
        assert f"Incarnation {incarnation}, 4 events (2 for this VM)" in said
        d.emulator.stop()
        await d.wait_for(pilot, lambda: "✖ unreachable" in status(d))
        await pilot.press("r")
        await d.wait_for(pilot, lambda: any(n.startswith("Poll: no answer")
                                            for n in d.notices()))
        said = next(n for n in d.notices() if n.startswith("Poll: no answer"))
        assert said.startswith(("Poll: no answer, next try in", "Poll: no answer, trying"))
        assert "connection refused" in said, said


async def test_an_unreachable_service_says_one_thing_with_the_next_try(
        make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    d.emulator.stop()  # nothing answers from the start
    async with d.app.run_test(size=NARROW) as pilot:
        await d.wait_for(pilot, lambda: "✖ unreachable (next try in" in status(d))
        text = screen_text(d)
        assert "No answer from the metadata service yet" in text
        assert "can take up to 2 minutes" not in text
        assert "Waiting for the first answer" not in text


# -- details ------------------------------------------------------------------------------------
async def test_details_raw_json_is_unwrapped_and_c_copies_it(
        make_dashboard: MakeDashboard, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TMUX", "STY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    d = make_dashboard()
    async with d.app.run_test(size=NARROW) as pilot:
        await start(d, pilot)
        freeze = event_of(d, "Freeze", "web-0", "web-1")
        await select(d, pilot, freeze)
        await pilot.press("enter", "r")
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, DetailsScreen)
                         and d.app.screen.showing_raw)  # type: ignore[attr-defined]
        await pilot.pause()
        text = screen_text(d)
        # The Description's line is longer than the screen: cut at the edge, not wrapped.
        description = json.dumps(freeze.raw["Description"])
        assert f'"Description": {description[:30]}' in text
        assert not any(line.strip().startswith(description[40:60]) for line in
                       text.splitlines())
        scroll = d.app.screen.query_one("#details", VerticalScroll)
        assert scroll.max_scroll_x > 0  # it scrolls sideways instead
        await pilot.press("c")
        await d.wait_for(pilot, lambda: any(n.startswith("Copied") for n in d.notices()))
        assert d.app.clipboard == event_json(freeze)
        assert json.loads(d.app.clipboard) == dict(freeze.raw)


def test_the_clipboard_sequence_is_said_to_be_lost_where_it_is_known_to_be() -> None:
    assert clipboard_problem({"TERM": "xterm-256color"}) is None
    assert "set-clipboard on" in (clipboard_problem({"TMUX": "/tmp/x", "TERM": "tmux"}) or "")
    assert "screen" in (clipboard_problem({"TERM": "screen.xterm-256color"}) or "")
    assert "Linux console" in (clipboard_problem({"TERM": "linux"}) or "")


# -- themes -------------------------------------------------------------------------------------
async def test_a_theme_picked_in_the_palette_is_saved_keeping_the_rest(
        make_dashboard: MakeDashboard, tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('# my settings\ninterval = 2.0   # slow\ntheme = "setui-dark"  # night\n'
                      'bell = false\n', encoding="utf-8")
    d = make_dashboard(poll=False)
    d.app.config_path = config
    async with d.app.run_test(size=NARROW) as pilot:
        await pilot.pause()
        d.app.search_themes()
        await d.wait_for(pilot, lambda: isinstance(d.app.screen, CommandPalette))
        await pilot.press(*"setui-light")

        def first() -> str:
            found = d.app.screen.query_one(CommandList)
            return str(found.get_option_at_index(0).prompt) if found.option_count else ""

        await d.wait_for(pilot, lambda: first().startswith("setui-light"))
        await pilot.press("enter")
        await d.wait_for(pilot, lambda: any("saved to" in n for n in d.notices()))
    assert config.read_text(encoding="utf-8") == (
        '# my settings\ninterval = 2.0   # slow\ntheme = "setui-light"  # night\nbell = false\n')


async def test_a_theme_set_at_start_is_not_saved(make_dashboard: MakeDashboard,
                                                 tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    d = make_dashboard(poll=False, theme="setui-mono")
    d.app.config_path = config
    async with d.app.run_test(size=NARROW) as pilot:
        await pilot.pause()
        assert d.app.theme == "setui-mono"
    assert not config.exists()
