"""Every source folder is a declared package, so an install ships all of it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


def test_every_source_package_is_listed() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    found = {
        ".".join(path.parent.relative_to(ROOT / "src").parts)
        for path in (ROOT / "src").rglob("*.py")
    }
    assert found - listed == set()
    assert "setui.themes" in listed
    assert list((ROOT / "themes").glob("*.toml")), "no shipped themes"


def test_a_command_builds_only_its_own_arguments() -> None:
    """`setui watch` does not import the emulator's or the history command's modules to
    parse its arguments (start-up CPU on a VM that runs it as a service)."""
    code = ("import sys; from setui.cli import build_parser; "
            "build_parser(['watch', '--json']).parse_args(['watch', '--json']); "
            "print(sorted(m for m in ('setui.emulator.command', 'setui.commands.history', "
            "'setui.commands.audit', 'setui.commands.approve', 'setui.commands.fleet', "
            "'setui.fleet') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


def test_every_command_still_parses_its_own_options() -> None:
    from setui.cli import build_parser

    for argv in (["history", "--limit", "3"], ["audit", "verify"],
                 ["emulator", "--port", "0"], ["approve", "X", "--yes"], ["events", "--json"],
                 ["fleet", "--prometheus", "http://prom:9090", "--refresh", "10"],
                 ["--vm-name", "watch", "history", "--json"]):
        args = build_parser(argv).parse_args(argv)
        assert args.command == ("history" if argv[0] == "--vm-name" else argv[0])
