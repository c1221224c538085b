"""Options before or after the command: one test over the whole parser.

docs/configuration.md promises that the options every command takes may come before or
after the command; this walks every command and subcommand the parser has and gives each
such option on both sides of it.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from setui.cli import build_parser

# A valid value for each option the top level takes (None: a flag).
VALUES: dict[str, str | None] = {
    "--endpoint": "http://127.0.0.1:9", "--api-version": "2020-07-01",
    "--config": "/nonexistent/config.toml", "--data-dir": "/nonexistent/data",
    "--socket": "/nonexistent/api.sock", "--standalone": None, "--interval": "2",
    "--vm-name": "web-1", "--theme": "setui-mono", "--no-bell": None, "--read-only": None,
}


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:  # argparse lists its subparsers nowhere public
        if isinstance(action, argparse._SubParsersAction):
            found.update(action.choices)
    return found


def _positionals(parser: argparse.ArgumentParser) -> list[str]:
    """A value for each positional argument the parser requires ("1" parses as any)."""
    return ["1" for action in parser._actions
            if not action.option_strings and action.nargs not in ("?", "*")
            and not isinstance(action, argparse._SubParsersAction)]


def _paths(parser: argparse.ArgumentParser, above: tuple[str, ...] = ()
           ) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser, list[str]]]:
    """Every command line that names a command (and subcommands) completely."""
    for name, sub in _subcommands(parser).items():
        if not any(isinstance(action, argparse._SubParsersAction) and action.required
                   for action in sub._actions):
            yield (*above, name), sub, _positionals(sub)
        yield from _paths(sub, (*above, name))


def _own_meaning(parser: argparse.ArgumentParser, option: str) -> bool:
    """Whether the (sub)command defines ``option`` with a meaning of its own: a default
    of its own, not SUPPRESS, which keeps what was given before the command (the
    emulator's --vm-name names the VM it plays)."""
    action = parser._option_string_actions[option]
    return action.default is not argparse.SUPPRESS


def test_the_walk_finds_the_subcommands() -> None:
    paths = {path for path, _, _ in _paths(build_parser())}
    assert {("approve",), ("history", "show"), ("audit", "verify"),
            ("history", "export-scenario")} <= paths
    assert set(VALUES) == {name for action in build_parser()._actions
                           for name in action.option_strings
                           if name.startswith("--") and name not in ("--help", "--version")}


@pytest.mark.parametrize("option", sorted(VALUES))
def test_every_option_may_come_before_or_after_every_command(option: str) -> None:
    given = [option] if VALUES[option] is None else [option, VALUES[option]]
    for path, parser, positionals in _paths(build_parser()):
        if option in parser._option_string_actions and _own_meaning(parser, option):
            continue
        before = [*given, *path, *positionals]
        after = [*path, *positionals, *given]
        dest = next(action.dest for action in build_parser()._actions
                    if option in action.option_strings)
        parsed_before = build_parser(before).parse_args(before)
        try:
            parsed_after = build_parser(after).parse_args(after)
        except SystemExit:
            pytest.fail(f"setui {' '.join(after)}: refused, though "
                        f"setui {' '.join(before)} is taken")
        assert getattr(parsed_after, dest) == getattr(parsed_before, dest), after
