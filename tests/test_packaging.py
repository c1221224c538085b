"""What a wheel holds, and that it runs on its own: the package, its data, nothing else."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support.children import Lines, python_command

ROOT = Path(__file__).parent.parent

@pytest.mark.slow
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


def _packages_in_tree() -> list[str]:
    """Every package of the source tree: src/setui and its subpackages, and themes/."""
    found = [".".join(path.parent.relative_to(ROOT / "src").parts)
             for path in (ROOT / "src" / "setui").rglob("__init__.py")]
    return sorted([*found, "setui.themes"])


def test_the_package_list_names_every_package_in_the_tree() -> None:
    """pyproject.toml lists the packages (setui.themes lives outside src/, where find
    cannot see it): a package added to the tree and not to the list would be left out
    of the wheel."""
    from setui.settings.tomlread import parse_toml

    project = parse_toml((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    setuptools = project["tool"]["setuptools"]
    assert sorted(setuptools["packages"]) == _packages_in_tree()
    assert setuptools["package-dir"] == {"": "src", "setui.themes": "themes"}
    assert (ROOT / "themes" / "__init__.py").is_file()


def test_every_package_data_pattern_matches_a_file() -> None:
    """A pattern that matches nothing says the wheel ships a file it does not."""
    from setui.settings.tomlread import parse_toml

    setuptools = parse_toml((ROOT / "pyproject.toml").read_text(encoding="utf-8"))[
        "tool"]["setuptools"]
    for package, patterns in setuptools["package-data"].items():
        where = (ROOT / setuptools["package-dir"][package] if package in
                 setuptools["package-dir"] else ROOT / "src" / package.replace(".", "/"))
        for pattern in patterns:
            assert list(where.glob(pattern)), f"{package}: {pattern} matches no file"


def test_every_command_still_parses_its_own_options() -> None:
    from setui.cli import build_parser

    for argv in (["history", "--limit", "3"], ["audit", "verify"],
                 ["emulator", "--port", "0"], ["approve", "X", "--yes"], ["events", "--json"],
                 ["fleet", "--prometheus", "http://prom:9090", "--refresh", "10"],
                 ["--vm-name", "watch", "history", "--json"]):
        args = build_parser(argv).parse_args(argv)
        assert args.command == ("history" if argv[0] == "--vm-name" else argv[0])


@pytest.mark.slow
def test_the_wheel_installs_alone_and_runs(tmp_path: Path) -> None:
    """The wheel holds the package and its data, no tests, bench or tools; installed into a
    fresh venv (its dependencies from the index) it runs `--version` and the headless demo."""
    from setui import __version__

    built = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w",
                    str(built), str(ROOT)], check=True, timeout=600)
    [wheel] = built.glob("setui-*.whl")
    assert wheel.name.startswith(f"setui-{__version__}-py3-none-any")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    tops = {name.split("/", 1)[0] for name in names}
    assert tops == {"setui", f"setui-{__version__}.dist-info"}, tops
    for wanted in ("setui/themes/setui-dark.toml", "setui/themes/README.md", "setui/help.md",
                   "setui/py.typed", "setui/data/setui-agent.service",
                   "setui/emulator/scenarios/busy.toml", "setui/ui/app.tcss",
                   "setui/ui/fleet/help.md", f"setui-{__version__}.dist-info/licenses/LICENSE"):
        assert wanted in names, wanted
    assert not [n for n in names if "/tests/" in n or "/bench/" in n or "__pycache__" in n]
    assert set(_packages_in_tree()) - {name.rsplit("/", 1)[0].replace("/", ".")
                                       for name in names} == set()

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "--quiet", str(wheel)],
                   check=True, timeout=900)
    setui = str(bin_dir / "setui")
    shown = subprocess.run([setui, "--version"], capture_output=True, text=True, check=True,
                           timeout=60, cwd=tmp_path)
    assert shown.stdout.strip() == f"setui {__version__}"
    # From tmp_path, not the checkout: what runs is the installed package, not src/.
    demo = subprocess.Popen([*python_command(str(bin_dir / "python")), "-m", "setui.cli",
                             "demo", "--headless"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path)
    try:
        lines = Lines(demo)
        lines.until(lambda line: "connection" in line and "live" in line, 120,
                    "the demo's first answer")
        lines.until(lambda line: "appeared" in line, 120, "an event from the scenario")
    finally:
        demo.send_signal(signal.SIGINT)
        code = demo.wait(timeout=60)
    assert code == 0, demo.stderr.read() if demo.stderr else code
