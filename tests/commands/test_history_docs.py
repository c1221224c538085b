"""The reference says every option the parser has: docs/history.md for history, replay and
report, the README's command table for watch."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from setui.cli import build_parser

ROOT = Path(__file__).parents[2]
# What every command shares, said once in the README ("Options shared by the commands").
SHARED = {"--help", "--endpoint", "--api-version", "--config", "--data-dir", "--interval",
          "--vm-name", "--theme", "--no-bell", "--read-only"}


def _command(*path: str) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in path:
        subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = subs.choices[name]
    return parser


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {option for action in parser._actions if action.help != argparse.SUPPRESS
            for option in action.option_strings
            if option.startswith("--") and option not in SHARED}


@pytest.mark.parametrize("path", [("history",), ("history", "show"),
                                  ("history", "export-scenario"), ("replay",), ("report",)])
def test_docs_history_names_every_option(path: tuple[str, ...]) -> None:
    text = (ROOT / "docs" / "history.md").read_text(encoding="utf-8")
    usage = next(line for line in text.splitlines()
                 if line.startswith("setui " + " ".join(path) + " ") or
                 line == "setui " + " ".join(path))
    missing = [o for o in sorted(_options(_command(*path)))
               if not re.search(re.escape(o) + r"\b", usage)]
    assert not missing, f"{' '.join(path)}: {missing} not in {usage!r}"


def test_the_readme_names_every_option_of_watch() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith("| `setui watch"))
    missing = [o for o in sorted(_options(_command("watch"))) if o not in row]
    assert not missing, f"{missing} not in {row!r}"
