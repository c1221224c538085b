"""The layers stay apart: the protocol core, store and emulator never load the UI,
and the UI never speaks HTTP itself."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).parent.parent / "src" / "setui"


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.add(node.module.split(".")[0])
    return names


def test_headless_layers_do_not_load_textual() -> None:
    code = (
        "import sys\n"
        "import setui.core.model, setui.core.tracker, setui.core.client, setui.core.poller\n"
        "import setui.store, setui.emulator.server, setui.approval\n"
        "import setui.commands.watch, setui.cli\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich'))\n"
        "print(bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_ui_never_imports_httpx() -> None:
    files = list((SRC / "ui").rglob("*.py"))
    assert files, "the UI package has no modules"
    offenders = [str(f) for f in files if "httpx" in _imports(f)]
    assert offenders == []


def test_core_store_emulator_never_import_the_ui() -> None:
    checked = 0
    for layer in ("core", "store", "emulator"):
        for path in (SRC / layer).rglob("*.py"):
            checked += 1
            imported = _imports(path)
            assert "textual" not in imported, path
            assert not any(name.startswith("setui.ui") for name in imported), path
    assert checked >= 8


def test_version_does_not_load_heavy_modules() -> None:
    code = (
        "import sys, runpy\n"
        "sys.argv = ['setui', '--version']\n"
        "from setui import cli\n"
        "try:\n"
        "    cli.main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = sorted(m for m in ('textual', 'httpx', 'sqlite3') if m in sys.modules)\n"
        "print(heavy, file=sys.stderr)\n"
        "sys.exit(1 if heavy else 0)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("setui ")


def test_reading_the_history_does_not_load_httpx(tmp_path: Path) -> None:
    """Every command reads the config, which checks the endpoint: with the client's own
    checks, but not its HTTP library."""
    code = (
        "import sys, io, contextlib\n"
        "from setui import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    cli.main(['history', '--limit', '1', '--data-dir', {str(tmp_path)!r}])\n"
        "print(sorted(m for m in ('httpx', 'textual') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]", done.stderr
