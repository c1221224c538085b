"""Shipped and user themes: all load, register and style setui's variables; bad files are
reported, never raised."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.color import Color
from textual.command import CommandList, CommandPalette
from textual.screen import Screen
from textual.theme import BUILTIN_THEMES, Theme
from textual.widgets import Static

from setui.ui.format import WARNING_SECONDS, Palette
from setui.ui.themes import (
    COLOR_KEYS,
    DEFAULT_THEME,
    MONO_THEME,
    SETUI_VARIABLES,
    ThemeError,
    load_theme_file,
    load_themes,
    parse_theme,
    theme_names,
    theme_provider,
    variable_defaults,
)
from tests.support.dashboard import wait_for

ROOT = Path(__file__).parent.parent.parent
SHIPPED = {"setui-dark", "setui-light", "setui-mono"}

# Every setui variable in use, so a theme that lacks one fails to parse the stylesheet.
_CSS = "\n".join(
    f".{name} {{ {'text-style' if name.endswith('-style') else 'color'}: ${name}; }}"
    for name in SETUI_VARIABLES
)


class ThemedApp(App[None]):
    CSS = _CSS

    def __init__(self, themes: list[Theme]) -> None:
        super().__init__()
        self._themes = themes

    def on_mount(self) -> None:
        for theme in self._themes:
            self.register_theme(theme)
        self.theme = DEFAULT_THEME

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return variable_defaults(self.current_theme)

    def search_themes(self) -> None:
        # What SetuiApp.search_themes does: the palette offers the loaded themes only.
        self.push_screen(CommandPalette(
            providers=[theme_provider(t.name for t in self._themes)],
            placeholder="Search for themes…"))

    def compose(self) -> ComposeResult:
        for name in SETUI_VARIABLES:
            yield Static(name, classes=name)


def _write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_shipped_themes_load_without_problems() -> None:
    result = load_themes()
    assert result.problems == []
    names = set(result.names())
    assert names >= SHIPPED
    assert len(names) >= 4
    assert DEFAULT_THEME in names and MONO_THEME in names


def test_every_shipped_file_is_complete() -> None:
    for path in sorted((ROOT / "themes").glob("*.toml")):
        theme = load_theme_file(path)
        assert theme.name == path.stem
        for key in COLOR_KEYS:
            assert getattr(theme, key), f"{path.name} leaves out {key}"
        text = path.read_text(encoding="utf-8")
        for name in SETUI_VARIABLES:
            assert re.search(rf"^{name}\s*=", text, re.M), f"{path.name} leaves out {name}"


def test_dark_and_light_flags() -> None:
    result = load_themes()
    assert result.get("setui-dark").dark is True
    assert result.get("setui-light").dark is False


def test_mono_theme_uses_no_hue() -> None:
    mono = load_themes().get(MONO_THEME)
    values = [getattr(mono, key) for key in COLOR_KEYS]
    values += [v.split()[0] for k, v in mono.variables.items() if not k.endswith("-style")]
    for value in values:
        color = Color.parse(value)
        assert color.r == color.g == color.b, f"{value} is not grey"
    assert "reverse" in mono.variables["setui-urgent-style"].split()
    assert "bold" in mono.variables["setui-urgent-style"].split()


def test_mono_tells_a_neighbours_rows_without_colour() -> None:
    """On a monochrome terminal #BCBCBC and #FFFFFF look the same: the style must differ."""
    mono = load_themes().get(MONO_THEME)
    assert mono is not None
    neighbour = set(mono.variables["setui-secondary-row-style"].split())
    assert "dim" in neighbour
    # ... and differ from the other kinds of row too: this VM's (plain) and gone (italic).
    assert neighbour != set(mono.variables["setui-gone-style"].split())
    for name in ("setui-dark", "setui-light"):  # colour themes say it with colour alone
        theme = load_themes().get(name)
        assert theme is not None and theme.variables["setui-secondary-row-style"] == "none"


def test_mono_palette_dims_a_neighbours_rows() -> None:
    mono = load_themes().get(MONO_THEME)
    assert mono is not None
    assert "dim" in Palette.from_variables(mono.variables).secondary.split()


def test_variable_docs_match_the_dashboard() -> None:
    assert WARNING_SECONDS == 5 * 60
    assert "under 5 minutes" in SETUI_VARIABLES["setui-soon"]
    assert "hour" not in SETUI_VARIABLES["setui-soon"]
    # There is no RECORDING indicator: no variable for one, in the code or the README.
    readme = (ROOT / "themes" / "README.md").read_text(encoding="utf-8")
    assert "setui-recording" not in SETUI_VARIABLES and "RECORDING" not in readme
    for path in sorted((ROOT / "themes").glob("*.toml")):
        assert "setui-recording" not in path.read_text(encoding="utf-8"), path.name


async def test_theme_palette_offers_setui_themes_only() -> None:
    result = load_themes()
    app = ThemedApp(result.themes)
    async with app.run_test(size=(80, 24)) as pilot:
        app.action_change_theme()  # the palette's "Theme" command
        await pilot.pause()
        palette: Screen[Any] = app.screen
        assert isinstance(palette, CommandPalette)
        commands = palette.query_one(CommandList)
        await wait_for(pilot, lambda: commands.option_count == len(result.names()))
        offered = [str(commands.get_option_at_index(i).prompt).splitlines()[0]
                   for i in range(commands.option_count)]
        assert offered[0] == DEFAULT_THEME  # the default first
        assert sorted(offered) == sorted(result.names())
        assert not set(offered) & set(BUILTIN_THEMES)
        await pilot.press(*"mono", "enter")
        await pilot.pause()
        assert app.theme == MONO_THEME
        assert "nord" in app.available_themes  # still usable by name (--theme nord)


async def test_theme_palette_keeps_a_builtin_current_theme() -> None:
    app = ThemedApp(load_themes().themes)
    async with app.run_test(size=(80, 24)) as pilot:
        app.theme = "nord"
        await pilot.pause()
        provider = theme_provider(["setui-light", DEFAULT_THEME, "missing"])(app.screen)
        # commands: of the Provider subclass theme_provider makes
        assert [name for name, _ in provider.commands] == [  # type: ignore[attr-defined]
            DEFAULT_THEME, "setui-light", "nord"]


def test_readme_documents_every_variable() -> None:
    readme = (ROOT / "themes" / "README.md").read_text(encoding="utf-8")
    for name in SETUI_VARIABLES:
        assert f"`{name}`" in readme, name
    for name in SHIPPED:
        assert f"`{name}`" in readme, name


async def test_shipped_themes_register_and_apply() -> None:
    result = load_themes()
    app = ThemedApp(result.themes)
    async with app.run_test(size=(80, 24)) as pilot:
        for theme in result.themes:
            app.theme = theme.name
            await pilot.pause()
            assert app.current_theme.name == theme.name
            urgent = app.query_one(".setui-urgent", Static)
            assert urgent.styles.color == Color.parse(theme.variables["setui-urgent"])
        assert set(app.available_themes) >= SHIPPED


async def test_builtin_textual_theme_gets_derived_variables() -> None:
    app = ThemedApp(load_themes().themes)
    async with app.run_test(size=(80, 24)) as pilot:
        app.theme = "nord"  # has none of setui's variables
        await pilot.pause()
        urgent = app.query_one(".setui-urgent", Static)
        nord_error = app.current_theme.to_color_system().generate()["error"]
        assert urgent.styles.color == Color.parse(nord_error)


def test_user_theme_overrides_a_shipped_one(tmp_path: Path) -> None:
    _write(tmp_path, "mine.toml", 'name = "setui-dark"\nprimary = "#112233"\n')
    result = load_themes(tmp_path)
    assert result.problems == []
    dark = result.get("setui-dark")
    assert dark.primary == "#112233"
    assert result.names().count("setui-dark") == 1
    # Left-out setui variables are derived, so the app's CSS still parses.
    assert set(SETUI_VARIABLES) <= set(dark.variables)


def test_user_theme_adds_a_theme(tmp_path: Path) -> None:
    _write(tmp_path, "ocean.toml", (
        'name = "ocean"\ndark = false\nprimary = "rgb(0, 80, 160)"\nbackground = "white"\n'
        'text_alpha = 1\n[variables]\nsetui-urgent = "crimson"\n'
        'setui-urgent-style = "bold underline"\ninput-selection-background = "#0050A0 40%"\n'
    ))
    result = load_themes(tmp_path)
    assert result.problems == []
    ocean = result.get("ocean")
    assert ocean is not None and ocean.dark is False and ocean.text_alpha == 1.0
    assert ocean.variables["setui-urgent"] == "crimson"
    assert "ocean" in theme_names(tmp_path)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("this is = = not toml", "not valid TOML"),
        ('primary = "#112233"\n', "name is missing"),
        ('name = "x"\nbackground = "#000000"\n', "primary is missing"),
        ('name = "x"\nprimary = "#11223"\n', "primary is not a colour"),
        ('name = "x"\nprimary = "#112233"\nerror = "blood"\n', "error is not a colour"),
        ('name = "x"\nprimary = 123\n', "primary must be a colour string"),
        ('name = "x"\nprimary = "#112233"\ndark = "yes"\n', "dark must be true or false"),
        ('name = 7\nprimary = "#112233"\n', "name must be"),
        ('name = "bad name!"\nprimary = "#112233"\n', "name must be"),
        ('name = "x"\nprimary = "#112233"\nvariables = "no"\n', "must be a table"),
        ('name = "x"\nprimary = "#112233"\n[variables]\nsetui-urgent = 5\n',
         "setui-urgent must be a string"),
        ('name = "x"\nprimary = "#112233"\n[variables]\nsetui-urgent = "loud"\n',
         "setui-urgent is not a colour"),
        ('name = "x"\nprimary = "#112233"\n[variables]\nsetui-urgent-style = "shouty"\n',
         "setui-urgent-style must be text styles"),
        ('name = "x"\nprimary = "#112233"\ntext-alpha = 3\n', "text-alpha must be a number"),
        ('name = "x"\nprimary = "#112233"\nbackgroud = "#000000"\n',
         "unknown setting 'backgroud'"),
    ],
)
def test_bad_user_file_is_a_problem_not_an_exception(
        tmp_path: Path, content: str, reason: str) -> None:
    path = _write(tmp_path, "bad.toml", content)
    result = load_themes(tmp_path)
    assert len(result.problems) == 1
    assert str(path) in result.problems[0]
    assert reason in result.problems[0]
    assert set(result.names()) >= SHIPPED  # the shipped ones still load


def test_every_bad_file_is_reported_and_good_ones_still_load(tmp_path: Path) -> None:
    _write(tmp_path, "a.toml", "nonsense [[[")
    _write(tmp_path, "b.toml", 'name = "b"\nprimary = "nope"\n')
    (tmp_path / "c.toml").write_bytes(b'name = "c\xff"\nprimary = "#000"\n')
    _write(tmp_path, "d.toml", 'name = "good"\nprimary = "#445566"\n')
    _write(tmp_path, "notes.txt", "not a theme, ignored")
    result = load_themes(tmp_path)
    assert len(result.problems) == 3
    assert [p.split(": ")[0] for p in result.problems] == [
        str(tmp_path / n) for n in ("a.toml", "b.toml", "c.toml")]
    assert "not UTF-8" in result.problems[2]
    assert "good" in result.names()
    message = result.notification()
    assert message is not None and message.startswith("3 theme problems:")
    assert message.count("\n- ") == 3


def test_duplicate_user_names_keep_the_first(tmp_path: Path) -> None:
    _write(tmp_path, "1.toml", 'name = "twin"\nprimary = "#111111"\n')
    _write(tmp_path, "2.toml", 'name = "twin"\nprimary = "#222222"\n')
    result = load_themes(tmp_path)
    assert result.get("twin").primary == "#111111"
    assert len(result.problems) == 1 and "2.toml" in result.problems[0]


def test_missing_user_dir_is_silent_and_a_file_is_reported(tmp_path: Path) -> None:
    assert load_themes(tmp_path / "absent").problems == []
    not_a_dir = _write(tmp_path, "themes", "")
    result = load_themes(not_a_dir)
    assert len(result.problems) == 1 and "not a directory" in result.problems[0]
    assert load_themes().notification() is None


def test_oversized_and_unreadable_files(tmp_path: Path) -> None:
    _write(tmp_path, "huge.toml", "# " + "x" * 300_000)
    (tmp_path / "dir.toml").mkdir()
    result = load_themes(tmp_path)
    assert len(result.problems) == 2
    assert any("too large" in p for p in result.problems)
    assert any("cannot read" in p for p in result.problems)


def test_parse_theme_raises_only_theme_error() -> None:
    with pytest.raises(ThemeError):
        parse_theme({"name": "x", "primary": ["#000"]})
    theme = parse_theme({"name": "x", "primary": "#000"})
    assert theme.variables["setui-alarm-foreground"] in ("#000000", "#FFFFFF")
