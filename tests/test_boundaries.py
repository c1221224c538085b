"""The layers stay apart at run time, in a fresh interpreter.

The import contracts (``[tool.importlinter]`` in pyproject.toml, run by ``make test``)
check every import statically; these tests prove what the user feels: a headless
command starts without loading the dashboard's libraries."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # starts processes: the slow tier (docs/testing.md)

# What the contracts call headless.
HEADLESS = (
    "setui.core.model", "setui.core.tracker", "setui.core.client", "setui.core.poller",
    "setui.store", "setui.emulator.server", "setui.emulator.command",
    "setui.approval.approver", "setui.session", "setui.system.identity",
    "setui.settings.config", "setui.core.textsafe", "setui.system.auditforward",
    "setui.system.actor", "setui.system.processes", "setui.core.apiversions",
    "setui.system.boot", "setui.core.impact",
    "setui.core.notice", "setui.agent.impact", "setui.agent.notice", "setui.agent.heartbeat",
    "setui.commands.watch", "setui.commands.events", "setui.commands.approve",
    "setui.commands.history", "setui.core.eventids", "setui.core.order",
    "setui.approval.snapshot", "setui.approval.tries", "setui.commands.audit",
    "setui.commands.report", "setui.monitor",
    "setui.monitor.replay", "setui.monitor.report", "setui.core.timefmt", "setui.cli",
    "setui.fleet", "setui.commands.fleet",
    "setui.commands.agent", "setui.agent.agent", "setui.agent.metrics", "setui.store.agent",
    "setui.api.client", "setui.api.server", "setui.api.serve", "setui.agent.lock",
    "setui.approval.outcome", "setui.settings.tomlread", "setui.system.gctune",
    "setui.settings.environment",
)


def test_headless_layers_do_not_load_textual() -> None:
    code = (
        "import importlib, sys\n"
        f"for name in {HEADLESS!r}:\n"
        "    importlib.import_module(name)\n"
        # click is installed here (the dev extra), so this also proves that httpx's own
        # command line, which would load rich, stays unloaded (setui/core/__init__.py).
        "bad = sorted(m for m in sys.modules\n"
        "             if m.split('.')[0] in ('textual', 'rich', 'click')\n"
        "             or m.startswith('setui.ui'))\n"
        "print(bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_api_client_loads_neither_the_approver_nor_the_agent() -> None:
    """What a front end attached to the agent loads (the "api-client" contract checks the
    imports written; the store's package __init__ still loads its modules at run time)."""
    code = (
        "import sys\n"
        "import setui.api.client\n"
        "bad = sorted(m for m in sys.modules if m in ('setui.approval.approver', 'setui.session')\n"
        "             or m.startswith(('setui.agent', 'setui.ui', 'apprise', 'prometheus')))\n"
        "print(bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


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
