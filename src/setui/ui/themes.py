"""setui's colour themes: the shipped ones and the user's, as Textual themes.

Shipped themes are TOML files in ``themes/`` at the top of the repository, installed as
the package ``setui.themes``; users add their own to ``config_dir() / "themes"``.
Every file is checked (TOML, types, every colour and text style) and a bad one is a line
in :attr:`ThemeLoadResult.problems`, never an exception: one notification at start-up
lists them all. A user theme with the name of a shipped one replaces it.

setui's own CSS variables (``$setui-urgent`` and friends, see :data:`SETUI_VARIABLES`
and ``themes/README.md``) are always present in a loaded theme: the ones a file leaves
out are derived from its colours by :func:`variable_defaults`.

The command palette's theme list (:func:`theme_provider`) offers these themes only:
Textual registers about twenty built-in ones that would bury setui's four, and they are
not tuned for the dashboard (a built-in still works when named with ``--theme``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual.color import Color, ColorParseError
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.css.constants import VALID_STYLE_FLAGS
from textual.message import Message
from textual.theme import Theme

from setui.core.textsafe import preview
from setui.settings.tomlread import TomlError, parse_toml

if TYPE_CHECKING:
    from textual.app import App

__all__ = [
    "COLOR_KEYS",
    "DEFAULT_THEME",
    "MONO_THEME",
    "SETUI_VARIABLES",
    "ThemeChosen",
    "ThemeError",
    "ThemeLoadResult",
    "install_themes",
    "load_theme_file",
    "load_themes",
    "parse_theme",
    "shipped_theme_files",
    "theme_names",
    "theme_provider",
    "variable_defaults",
]

DEFAULT_THEME = "setui-dark"
MONO_THEME = "setui-mono"

# Textual's Theme colours, in the order a theme file usually lists them.
COLOR_KEYS = ("primary", "secondary", "accent", "foreground", "background", "surface",
              "panel", "boost", "success", "warning", "error")
_REQUIRED = ("name", "primary")
_NUMBERS = {"luminosity-spread": "luminosity_spread", "text-alpha": "text_alpha"}

# The CSS variables setui's stylesheets use. Names ending in "-style" are text styles
# (bold, italic, reverse, ...); the others are colours.
SETUI_VARIABLES: Mapping[str, str] = {
    "setui-urgent": "events that affect this VM with under a minute to NotBefore, or past it",
    "setui-urgent-style": "text style of those events",
    "setui-soon": "events that affect this VM with under 5 minutes to NotBefore",
    "setui-soon-style": "text style of those events",
    "setui-started": "events under way (EventStatus Started)",
    "setui-started-style": "text style of events under way",
    "setui-secondary-row": "events that do not affect this VM (a neighbour's)",
    "setui-secondary-row-style": "text style of those events: without colour, the only "
                                 "difference from this VM's rows",
    "setui-gone": "completed or cancelled events, still listed for a while",
    "setui-gone-style": "text style of completed or cancelled events",
    "setui-ok": "good news: connected, audit chain intact",
    "setui-alarm-foreground": "text of loud banners (audit chain TAMPERED, store lost)",
    "setui-alarm-background": "background of loud banners",
    "setui-alarm-style": "text style of loud banners",
    "setui-rule": "separator lines between the parts of the dashboard, and table lines",
}

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_VARIABLE = re.compile(r"[a-z][a-z0-9-]{0,63}")
_PERCENT = re.compile(r"(\d{1,3}(?:\.\d+)?)%")
_MAX_BYTES = 256 * 1024


class ThemeError(Exception):
    """A theme file that cannot be used; the message says why, for a person."""


@dataclass(frozen=True)
class ThemeLoadResult:
    """The themes that loaded (shipped first, user overrides applied) and the problems."""

    themes: list[Theme] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def names(self) -> list[str]:
        return [theme.name for theme in self.themes]

    def get(self, name: str) -> Theme | None:
        return next((theme for theme in self.themes if theme.name == name), None)

    def notification(self) -> str | None:
        """All problems as one message for ``App.notify(..., markup=False)``, or None."""
        if not self.problems:
            return None
        count = len(self.problems)
        head = "1 theme problem" if count == 1 else f"{count} theme problems"
        return "\n".join([f"{head}:", *(f"- {line}" for line in self.problems)])


def install_themes(app: App[Any], wanted: str, user_dir: Path | None,
                   ) -> tuple[list[str], list[str]]:
    """Register setui's and the user's themes on ``app`` and pick ``wanted`` (the mono
    theme when NO_COLOR asks for no colour and nothing else was chosen). Returns the
    names setui offers, and the problems in words, for the caller to show."""
    loaded = load_themes(user_dir)
    problems = list(loaded.problems)
    for theme in loaded.themes:
        app.register_theme(theme)
    # no-color.org: set and not empty.
    if os.environ.get("NO_COLOR") and wanted == DEFAULT_THEME:
        wanted = MONO_THEME  # no colour asked for: the theme made for that
    if wanted not in app.available_themes:
        fallback = DEFAULT_THEME if DEFAULT_THEME in app.available_themes else "textual-dark"
        problems.append(f"theme {wanted!r} is not known, so {fallback} is used (known: "
                        f"{', '.join(sorted(loaded.names()))})")
        wanted = fallback
    app.theme = wanted
    return loaded.names(), problems


def load_themes(user_dir: Path | None = None) -> ThemeLoadResult:
    """Load the shipped themes, then the user's ``*.toml`` in ``user_dir`` (if given)."""
    loaded: dict[str, Theme] = {}
    problems: list[str] = []
    for label, read in shipped_theme_files():
        try:
            theme = parse_theme(_decode(read(), label), label)
        except ThemeError as exc:
            problems.append(f"{label}: {exc}")
            continue
        loaded[theme.name] = theme
    if user_dir is not None:
        _load_user_dir(Path(user_dir), loaded, problems)
    return ThemeLoadResult(list(loaded.values()), problems)


def _load_user_dir(user_dir: Path, loaded: dict[str, Theme], problems: list[str]) -> None:
    try:
        if not user_dir.exists():
            return  # nobody has written a theme yet: nothing to say
        if not user_dir.is_dir():
            problems.append(f"{user_dir}: not a directory, so no user themes were loaded")
            return
        paths = sorted(p for p in user_dir.iterdir() if p.suffix.lower() == ".toml")
    except OSError as exc:
        problems.append(f"{user_dir}: cannot list the directory ({exc.strerror or exc})")
        return
    seen: dict[str, Path] = {}
    for path in paths:
        try:
            theme = load_theme_file(path)
        except ThemeError as exc:
            problems.append(f"{path}: {exc}")
            continue
        if theme.name in seen:
            problems.append(f"{path}: theme {theme.name!r} is already defined in "
                            f"{seen[theme.name].name}; this file was skipped")
            continue
        seen[theme.name] = path
        loaded[theme.name] = theme  # a user theme replaces a shipped one of the same name


def load_theme_file(path: Path) -> Theme:
    """Read and check one theme file; raises :class:`ThemeError` and nothing else."""
    try:
        if path.stat().st_size > _MAX_BYTES:
            raise ThemeError(f"too large for a theme file (over {_MAX_BYTES // 1024} KiB)")
        data = path.read_bytes()
    except OSError as exc:
        raise ThemeError(f"cannot read the file ({exc.strerror or exc})") from None
    return parse_theme(_decode(data, str(path)), str(path))


def _decode(data: bytes, label: str) -> dict[str, Any]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ThemeError("not UTF-8 text") from None
    try:
        return parse_toml(text)
    except TomlError as exc:
        raise ThemeError(f"not valid TOML ({exc})") from None


def parse_theme(data: Mapping[str, Any], source: str = "theme") -> Theme:
    """Turn the decoded TOML of a theme file into a Textual Theme, checking everything."""
    values = {str(key).replace("_", "-"): value for key, value in data.items()}
    for key in _REQUIRED:
        if key not in values:
            raise ThemeError(f"{key} is missing")
    name = values["name"]
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ThemeError(
            f"name must be letters, digits, '-', '_' or '.' (at most 64), got {_show(name)}")
    colors: dict[str, str] = {}
    for key in COLOR_KEYS:
        if key in values:
            colors[key] = _color(values[key], key)
    dark = values.get("dark", True)
    if not isinstance(dark, bool):
        raise ThemeError(f"dark must be true or false, got {_show(dark)}")
    numbers: dict[str, float] = {}
    for key, attribute in _NUMBERS.items():
        if key in values:
            numbers[attribute] = _fraction(values[key], key)
    declared = values.get("variables", {})
    if not isinstance(declared, Mapping):
        raise ThemeError(f"[variables] must be a table, got {_show(declared)}")
    variables = {str(k): _variable(str(k), v) for k, v in declared.items()}
    unknown = sorted(set(values) - {*_REQUIRED, *COLOR_KEYS, *_NUMBERS, "dark", "variables"})
    if unknown:
        raise ThemeError(f"unknown setting {_show(unknown[0])} "
                         f"(known: name, dark, {', '.join(COLOR_KEYS)}, "
                         f"{', '.join(_NUMBERS)}, [variables])")
    try:
        # colors' keys are COLOR_KEYS, numbers' the float fields of _NUMBERS: Theme's own
        # names, chosen by data, which mypy cannot follow from a dict[str, ...].
        theme = Theme(name=name, dark=dark, variables=variables,
                      **colors, **numbers)  # type: ignore[arg-type]
        defaults = variable_defaults(theme)
    except (ColorParseError, ValueError, TypeError, ArithmeticError) as exc:
        raise ThemeError(f"Textual cannot build a theme from it ({exc})") from None
    theme.variables = {**defaults, **variables}
    return theme


def _color(value: Any, key: str) -> str:
    if not isinstance(value, str):
        raise ThemeError(f"{key} must be a colour string such as \"#1E90FF\", got {_show(value)}")
    try:
        Color.parse(value)
    except ColorParseError:
        raise ThemeError(f"{key} is not a colour: {_show(value)}") from None
    return value


def _fraction(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ThemeError(f"{key} must be a number from 0 to 1, got {_show(value)}")
    return float(value)


def _variable(name: str, value: Any) -> str:
    if not _VARIABLE.fullmatch(name):
        raise ThemeError(f"[variables] {_show(name)} is not a CSS variable name "
                         "(lower-case letters, digits and '-')")
    if not isinstance(value, str):
        raise ThemeError(f"[variables] {name} must be a string, got {_show(value)}")
    if name.endswith("-style"):
        words = value.split()
        bad = [word for word in words if word not in VALID_STYLE_FLAGS]
        if not words or bad:
            raise ThemeError(
                f"[variables] {name} must be text styles such as \"bold reverse\", "
                f"got {_show(value)}")
        return value
    # A colour, optionally with an opacity ("#FFFFFF 35%"), or "auto" (contrasting text).
    parts = value.split()
    if len(parts) == 2 and _PERCENT.fullmatch(parts[1]) and float(parts[1][:-1]) <= 100:
        parts = parts[:1]
    if len(parts) == 1 and parts[0] == "auto":
        return value
    try:
        if len(parts) != 1:
            raise ColorParseError("")
        Color.parse(parts[0])
    except ColorParseError:
        raise ThemeError(f"[variables] {name} is not a colour: {_show(value)}") from None
    return value


def variable_defaults(theme: Theme) -> dict[str, str]:
    """setui's CSS variables derived from a theme's colours (for themes that omit them).

    The app returns this from ``App.get_theme_variable_defaults`` so that Textual's
    built-in themes (nord, gruvbox, ...) work with setui's stylesheets too.
    """
    colors = theme.to_color_system().generate()
    error = colors["error"]
    return {
        "setui-urgent": error,
        "setui-urgent-style": "bold",
        "setui-soon": colors["warning"],
        "setui-soon-style": "none",
        "setui-started": error,
        "setui-started-style": "bold reverse",
        "setui-secondary-row": colors["foreground-darken-2" if theme.dark
                                      else "foreground-lighten-3"],
        # The dimmer colour says it in a colour theme; dim on top would fade it too far.
        "setui-secondary-row-style": "none",
        "setui-gone": colors["foreground-disabled"],
        "setui-gone-style": "italic",
        "setui-ok": colors["success"],
        "setui-alarm-foreground": Color.parse(error).get_contrast_text(1.0).hex,
        "setui-alarm-background": error,
        "setui-alarm-style": "bold",
        # Quiet, yet a line in 256 and 16 colours too (tests/ui/test_contrast.py).
        "setui-rule": Color.parse(colors["background"]).blend(
            Color.parse(colors["foreground"]), 0.3).hex,
    }


def shipped_theme_files() -> list[tuple[str, Any]]:
    """(label, reader) for each shipped ``*.toml``, from the package ``setui.themes``."""
    return sorted(_package_files(), key=lambda item: item[0])


def _package_files() -> Iterator[tuple[str, Any]]:
    try:
        root = resources.files("setui.themes")
    except (ModuleNotFoundError, TypeError):
        return  # setui is not installed as a package (it always is, editable included)
    for entry in _walk(root):
        yield f"setui.themes/{entry.name}", entry.read_bytes


def _walk(root: Any) -> Iterable[Any]:  # an importlib Traversable
    try:
        return [e for e in root.iterdir() if e.name.endswith(".toml") and e.is_file()]
    except (OSError, FileNotFoundError):
        return []


def theme_names(user_dir: Path | None = None) -> list[str]:
    """The names of every theme that loads, shipped and the user's, sorted."""
    return sorted(load_themes(user_dir).names())


def theme_provider(names: Iterable[str]) -> type[Provider]:
    """A command-palette provider offering only ``names`` (setui's and the user's themes,
    as :meth:`ThemeLoadResult.names` gives them), the default first.

    Pass it to ``CommandPalette(providers=[...])`` from ``App.search_themes``, which is
    what the palette's "Change theme" command calls. A theme named but not registered
    is left out; the current theme is offered too when it is not among ``names`` (say
    ``--theme nord``), so the list always shows where the operator is.
    """
    chosen = list(dict.fromkeys(names))
    if DEFAULT_THEME in chosen:
        chosen.remove(DEFAULT_THEME)
        chosen.insert(0, DEFAULT_THEME)
    return type("SetuiThemeProvider", (_SetuiThemeProvider,), {"NAMES": tuple(chosen)})


class ThemeChosen(Message):
    """The operator picked a theme in the palette: the app saves it to the config file
    (a theme set at start-up, by ``--theme`` or NO_COLOR, is not saved)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name


class _SetuiThemeProvider(Provider):
    """Textual's ThemeProvider, limited to :attr:`NAMES` and kept in that order."""

    NAMES: ClassVar[tuple[str, ...]] = ()

    @property
    def commands(self) -> list[tuple[str, Callable[[], None]]]:
        available = self.app.available_themes
        names = [name for name in self.NAMES if name in available]
        current = self.app.theme
        if current in available and current not in names:
            names.append(current)
        return [(name, partial(self._use, name)) for name in names]

    def _use(self, name: str) -> None:
        self.app.theme = name
        self.app.post_message(ThemeChosen(name))

    async def discover(self) -> Hits:
        for name, command in self.commands:  # in order: discovery hits are not re-sorted
            yield DiscoveryHit(name, command, help=self._help(name))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, command in self.commands:
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), command, help=self._help(name))

    def _help(self, name: str) -> str | None:
        return "the current theme" if name == self.app.theme else None


def _show(value: Any) -> str:
    return preview(value, 60)
