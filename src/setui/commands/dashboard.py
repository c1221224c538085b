"""``setui`` and ``setui replay``: the two doors to the dashboard.

``setui`` attaches to the agent when its socket answers (setui.api.attach): then the
dashboard asks IMDS nothing and keeps no store (ui.attached); otherwise, or with
``--standalone``, it polls and records itself, and says why. ``setui demo`` never attaches:
it plays its own emulator."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING

from setui.settings.config import Config

if TYPE_CHECKING:
    from setui.fleet import PrometheusAuth
    from setui.store import Store
    from setui.ui.app import SetuiApp

__all__ = ["EXIT_USAGE", "live_app", "not_a_terminal", "open_dashboard", "open_fleet",
           "open_replay", "read_only_why", "run"]

EXIT_USAGE = 2


def not_a_terminal(stdin: IO[str], stdout: IO[str], *, demo: bool = False) -> str | None:
    """Why the dashboard cannot run on these streams, in words, or None when it can.

    Redirected to a file or a pipe, a full-screen app writes escape codes no reader
    wants; the headless commands are made for that."""
    def is_tty(stream: IO[str]) -> bool:
        try:
            return stream.isatty()
        except (AttributeError, ValueError, OSError):  # closed or not a real stream
            return False

    if is_tty(stdout) and is_tty(stdin):
        return None
    which = "standard output" if not is_tty(stdout) else "standard input"
    command = "setui demo" if demo else "setui"
    instead = ("`setui demo --headless` (add --json for JSON lines)" if demo else
               "`setui watch` (one line per change; --json for scripts) or `setui events` "
               "(the events now)")
    return (f"{command}: the dashboard needs a terminal, and {which} is not one. "
            f"For a file, a pipe or a script use {instead}.")


def open_dashboard(config: Config, *, demo: bool = False, zoom: int | None = None,
                   config_path: Path | None = None, read_only_why: str | None = None) -> int:
    """Run the dashboard; ``config_path`` is the file a theme picked in it is saved to
    (the default config file when None); ``read_only_why`` where read-only came from."""
    why = not_a_terminal(sys.stdin, sys.stdout, demo=demo)
    if why is not None:
        print(why, file=sys.stderr)
        return EXIT_USAGE
    from setui.settings.config import config_dir, default_config_path

    themes, saved = config_dir() / "themes", config_path or default_config_path()
    app, store = live_app(config, demo=demo, user_themes=themes, zoom=zoom, config_path=saved,
                          read_only_why=read_only_why)
    try:
        app.run()
    finally:
        if store is not None:
            store.close()
    return app.return_code or 0


def live_app(config: Config, *, demo: bool = False, user_themes: Path | None = None,
             zoom: int | None = None, config_path: Path | None = None,
             read_only_why: str | None = None) -> tuple[SetuiApp, Store | None]:
    """The live dashboard, not yet running: attached to the agent when it answers (the
    app closes its client), else standalone with the store it records in (the caller
    closes it), approving only where that goes around no agent (setui.api.attach)."""
    standalone: str | None = None
    no_approvals: str | None = None
    if not demo:
        from setui.commands.common import reach_agent

        found = reach_agent(config)  # a connect and a hello, before any event loop
        if found.client is not None:
            from setui.ui.attached import AttachedApp

            return AttachedApp(agent=found.client, config=config, user_themes=user_themes,
                               zoom=zoom, config_path=config_path,
                               read_only_why=read_only_why), None
        standalone = "" if found.told else found.words
        if found.told and (found.given or found.service is not None):
            standalone = ("standalone (--standalone): approvals made here are recorded in "
                          "your own audit log, not in the agent's")
        no_approvals = found.around
    from setui.session import make_client, open_store
    from setui.ui.app import SetuiApp

    store, problem = open_store(config, or_read=True)
    return SetuiApp(client=make_client(config), config=config, store=store,
                    store_problem=problem, demo=demo, user_themes=user_themes, zoom=zoom,
                    config_path=config_path, read_only_why=read_only_why,
                    standalone=standalone, no_approvals=no_approvals), store


def open_fleet(config: Config, *, url: str, auth: PrometheusAuth, refresh: float,
               stale_after: float) -> int:
    """``setui fleet``: the fleet view's app, through the same door as the dashboard."""
    if not_a_terminal(sys.stdin, sys.stdout) is not None:
        print("setui fleet: the fleet view needs a terminal, and standard input or output "
              "is not one. For a script, ask Prometheus itself (docs/fleet.md).",
              file=sys.stderr)
        return EXIT_USAGE
    from setui.fleet import FleetWatcher, PrometheusClient
    from setui.settings.config import config_dir
    from setui.ui.fleet.app import FleetApp

    watcher = FleetWatcher(PrometheusClient(url, auth), stale_after=stale_after)
    app = FleetApp(watcher, refresh=refresh, theme=config.theme,
                   user_themes=config_dir() / "themes")
    app.run()
    return app.return_code or 0


def read_only_why(args: argparse.Namespace) -> str | None:
    """Where read-only came from, for the dashboard to say when `a` is pressed."""
    if not args.config_resolved.read_only:
        return None
    if getattr(args, "read_only", None):
        return "the --read-only option"
    return "read-only = true in the config file"


def run(args: argparse.Namespace) -> int:
    return open_dashboard(args.config_resolved, config_path=getattr(args, "config", None),
                          read_only_why=read_only_why(args))


def open_replay(args: argparse.Namespace, *, since: datetime | None = None,
                until: datetime | None = None) -> int:
    """``setui replay``: the dashboard over the record (the agent's, through its API,
    else the store read-only); the other door to the UI."""
    why = not_a_terminal(sys.stdin, sys.stdout)
    if why is not None:
        print(why, file=sys.stderr)
        return EXIT_USAGE
    from setui.commands.common import read_record
    from setui.settings.config import config_dir
    from setui.store.errors import RecordError
    from setui.ui.replay_app import ReplayApp

    record = None
    problem: str | None = None
    try:  # read-only: reviewing never changes the record
        record = read_record(args, sys.stderr, "setui replay")
        if record is None:
            problem = "nothing has been recorded yet"
    except RecordError as exc:
        problem = str(exc)
    app = ReplayApp(config=args.config_resolved, store=record, store_problem=problem,
                    since=since, until=until, user_themes=config_dir() / "themes")
    try:
        app.run()
    finally:
        if record is not None:
            record.close()
    return app.return_code or 0
