"""Command-line entry point: ``setui`` and its subcommands.

Imports are deferred to the command that needs them, so ``setui --version`` and
``setui watch`` start without loading Textual.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TypeVar

from setui import __version__
from setui.core.apiversions import help_line, limits
from setui.core.endpoint import DEFAULT_API_VERSION, check_api_version, check_endpoint
from setui.core.pace import check_interval
from setui.settings.config import Config, ConfigError, load_config
from setui.system.gctune import collector_paused

__all__ = ["main"]

EXIT_USAGE = 2
_T = TypeVar("_T")


def _checked(check: Callable[[_T], _T], value: _T) -> _T:
    """``check(value)``, with the ValueError it raises said as argparse's."""
    try:
        return check(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    return _checked(check_interval, value)


def _endpoint(text: str) -> str:
    # The client's own check, so nothing passes here that the client then refuses.
    return _checked(check_endpoint, text)


def _api_version(text: str) -> str:
    return _checked(check_api_version, text)


def _speed(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(
            f"must be a positive finite number (10 plays the scenario ten times faster), "
            f"got {text}")
    return value


def _connection_options(default: object = None) -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False, argument_default=default)
    group = parent.add_argument_group("connection and storage")
    group.add_argument("--endpoint", metavar="URL", type=_endpoint,
                       help="metadata service base URL (env SETUI_ENDPOINT; "
                            "default http://169.254.169.254)")
    group.add_argument("--api-version", metavar="V", type=_api_version,
                       help="scheduled events api-version (env SETUI_API_VERSION; "
                            f"default {DEFAULT_API_VERSION}); older ones show less: "
                            f"{help_line()}")
    group.add_argument("--config", metavar="FILE", type=Path,
                       help="config file (default: the user config dir's config.toml)")
    group.add_argument("--data-dir", metavar="DIR", type=Path,
                       help="where history and the audit log live (env SETUI_DATA_DIR)")
    group.add_argument("--socket", metavar="PATH", type=Path,
                       help="the agent's local API: where `setui agent` serves it and the "
                            "other commands attach to it (env SETUI_SOCKET; default "
                            "/run/setui/api.sock)")
    group.add_argument("--standalone", dest="standalone", action="store_const", const=True,
                       help="do not attach to the agent: poll IMDS and keep a history of "
                            "your own (config: standalone = true)")
    return parent


def _poll_options(default: object = None) -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False, argument_default=default)
    group = parent.add_argument_group("polling")
    group.add_argument("--interval", type=_interval, metavar="SECONDS",
                       help="seconds between polls (default 1, at least 0.2)")
    group.add_argument("--vm-name", metavar="NAME",
                       help="this VM's name as it appears in Resources "
                            "(default: asked from IMDS until it answers; never the host "
                            "name)")
    return parent


def _dashboard_options(default: object = None) -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False, argument_default=default)
    group = parent.add_argument_group("dashboard")
    group.add_argument("--theme", metavar="NAME", help="colour theme (setui-dark, setui-light, "
                       "setui-mono, ... or one of yours)")
    group.add_argument("--no-bell", dest="bell", action="store_const", const=False,
                       help="do not ring the terminal bell on new, started or gone events")
    group.add_argument("--read-only", dest="read_only", action="store_const", const=True,
                       help="never approve; for reviewing or for watchers who should not act")
    return parent


COMMANDS = ("watch", "events", "agent", "approve", "history", "audit", "emulator", "demo",
            "service", "replay", "report", "fleet")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser; with ``argv``, only the commands named in it get their own
    arguments (the others are listed with their help), so a command does not pay at
    start-up for importing every other command's module. Any word of ``argv`` that is a
    command's name counts, so an option's value that happens to be one does no harm."""
    named = None if argv is None else set(argv) & set(COMMANDS)

    def wanted(name: str) -> bool:
        return named is None or name in named

    # Options may come before or after the command. The command's copies default to
    # SUPPRESS so that an option given before the command is not reset to None.
    connection, polling, dashboard = (
        _connection_options(argparse.SUPPRESS),
        _poll_options(argparse.SUPPRESS),
        _dashboard_options(argparse.SUPPRESS),
    )
    parser = argparse.ArgumentParser(
        prog="setui",
        description="A terminal dashboard for Azure Scheduled Events. Without a command, "
                    "opens the dashboard against the configured endpoint.",
        parents=[_connection_options(), _poll_options(), _dashboard_options()],
    )
    parser.add_argument("--version", action="version", version=f"setui {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    watch = commands.add_parser(
        "watch", parents=[connection, polling],
        help="print one line per change, headless (the agent's, or polling and recording)",
        description="Print one line per change and per connection state change. Where the "
                    "agent answers, the lines are what it sees (it polls and records; "
                    "watch asks IMDS nothing and records nothing). Standalone, poll the "
                    "service and record what it sees into the history.")
    watch.add_argument("--json", action="store_true",
                       help="one JSON object per line, with stable keys")
    watch.add_argument("--no-record", dest="record", action="store_false",
                       help="do not write the history (standalone; attached to the agent "
                            "watch records nothing anyway)")

    agent = commands.add_parser(
        "agent", parents=[connection, polling],
        help="act on events by a policy: hooks, approvals, notifications, metrics",
        description="Run as the VM's agent: watch and record like `setui watch`, and act on "
                    "the events a policy file names (observe only without one). Needs "
                    "the extra: pip install 'setui[agent]'.")
    if wanted("agent"):
        _command_module("agent").add_arguments(agent)

    for name, help_text in (
        ("events", "the current events, most urgent first, with full EventIds (once)"),
        ("approve", "approve (start) events now, with confirmation and an audit record"),
        ("history", "past incarnations of the events document"),
        ("audit", "the audit log of approvals: list, verify, export"),
    ):
        sub = commands.add_parser(name, parents=[connection], help=help_text,
                                  description=help_text[0].upper() + help_text[1:] + ".")
        if wanted(name):
            _command_module(name).add_arguments(sub)

    emulator = commands.add_parser(
        "emulator", help="run the built-in emulator of the scheduled events service",
        description="Serve a scenario over HTTP on loopback, like the real service.")
    if wanted("emulator"):
        from setui.emulator import command as emulator_command

        emulator_command.add_arguments(emulator)

    demo = commands.add_parser(
        "demo", parents=[polling, dashboard],
        help="open the dashboard against the built-in emulator",
        description="Start the emulator on a free loopback port and open the dashboard "
                    "against it. Nothing touches a real VM.")
    demo.add_argument("--scenario", default="busy", metavar="NAME|FILE",
                      help="scenario to play (default: busy)")
    # 5: busy's first events appear, count down, start and leave within two minutes,
    # and a 10-minute notice still shows its calm, "!" and "!!" stages.
    demo.add_argument("--speed", type=_speed, default=5.0, metavar="X",
                      help="scenario clock speed-up (default: 5)")
    demo.add_argument("--data-dir", metavar="DIR", type=Path, default=argparse.SUPPRESS,
                      help="keep the demo's history and audit log here (default: a temporary "
                           "directory, removed on exit)")
    demo.add_argument("--config", metavar="FILE", type=Path, default=argparse.SUPPRESS,
                      help="config file")
    demo.add_argument("--headless", action="store_true",
                      help="print changes like `setui watch` instead of the dashboard")
    demo.add_argument("--json", action="store_true",
                      help="with --headless: one JSON object per line, like `setui watch "
                           "--json`")

    replay = commands.add_parser(
        "replay", parents=[connection, dashboard],
        help="the dashboard as it was, from the history: a time cursor, no approvals",
        description="Open the dashboard over the recorded history: left/right step one "
                    "incarnation, [ and ] one minute, space plays at 1x, 10x or 60x.")
    replay.add_argument("--vm-name", metavar="NAME", default=argparse.SUPPRESS,
                        help="this VM's name as it appears in Resources")
    if wanted("replay"):
        _command_module("replay").add_arguments(replay)

    report = commands.add_parser(
        "report", parents=[connection],
        help="what happened to each event, from the history and the audit log",
        description="Per event: first seen, NotBefore and its reschedules, approvals, "
                    "when it started and went and how sure that is, refusals, holes.")
    if wanted("report"):
        _command_module("report").add_arguments(report)

    fleet = commands.add_parser(
        "fleet",
        help="every VM's events from Prometheus (read-only), scraped from setui agents",
        description="A read-only dashboard of every VM's scheduled events, from the "
                    "setui agents' metrics in Prometheus: one query per refresh.")
    fleet.add_argument("--theme", metavar="NAME", default=argparse.SUPPRESS,
                       help="colour theme (as for the dashboard)")
    fleet.add_argument("--config", metavar="FILE", type=Path, default=argparse.SUPPRESS,
                       help="config file (Prometheus credentials live there or in the "
                            "environment)")
    if wanted("fleet"):
        _command_module("fleet").add_arguments(fleet)

    service = commands.add_parser(
        "service", help="the agent as the VM's system service (print, install, uninstall)",
        description="The systemd unit that runs `setui agent` as the VM's one service: it "
                    "records the history from boot to shutdown, keeps the audit log, serves "
                    "the local API and acts by the policy.")
    if wanted("service"):
        _command_module("service").add_arguments(service)
    _take_everywhere(parser, (connection, polling, dashboard))
    return parser


def _take_everywhere(parser: argparse.ArgumentParser,
                     shared: Sequence[argparse.ArgumentParser]) -> None:
    """Every option the top level takes, taken after every command and subcommand too
    (``setui history show 6 --standalone`` as ``setui --standalone history show 6``), in
    its own group, unless that parser defines the option itself. The copies default to
    SUPPRESS, so one given before the command is not reset. argparse has no public way
    to list a parser's subparsers or options: ``_actions`` and ``_option_string_actions``
    are what its own ``parents=`` reads."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        for sub in dict.fromkeys(action.choices.values()):
            for parent in shared:
                missing = [option for option in parent._actions
                           if option.option_strings and not any(
                               name in sub._option_string_actions
                               for name in option.option_strings)]
                if not missing:
                    continue
                title = parent._action_groups[-1].title
                group = next((g for g in sub._action_groups if g.title == title), None)
                group = group or sub.add_argument_group(title)
                for option in missing:
                    group._add_action(option)
            _take_everywhere(sub, shared)


def _command_module(name: str) -> ModuleType:
    import importlib

    return importlib.import_module(f"setui.commands.{name}")


def resolve_config(args: argparse.Namespace) -> Config:
    """Defaults < config file < environment < command line."""
    config = load_config(getattr(args, "config", None))
    return config.with_overrides(
        endpoint=getattr(args, "endpoint", None),
        api_version=getattr(args, "api_version", None),
        interval=getattr(args, "interval", None),
        theme=getattr(args, "theme", None),
        vm_name=getattr(args, "vm_name", None),
        bell=getattr(args, "bell", None),
        read_only=getattr(args, "read_only", None),
        data_dir=getattr(args, "data_dir", None),
        policy=getattr(args, "policy", None),
        socket=getattr(args, "socket", None),
        standalone=getattr(args, "standalone", None),
    )


def main(argv: Sequence[str] | None = None) -> int:
    # Start-up makes hundreds of thousands of objects (modules, classes, functions) that
    # live as long as the process: made with the collector off, then frozen out of its
    # reach, and it is back on before the command runs (setui.system.gctune).
    try:
        with collector_paused(freeze=True):
            args, runner = _prepare(argv)
        if runner is None:
            return EXIT_USAGE
        return runner(args)
    except KeyboardInterrupt:
        return 0
    except BrokenPipeError:
        # `setui history | head`: the reader left; that is not an error.
        sys.stderr.close()
        return 0


def _prepare(argv: Sequence[str] | None
             ) -> tuple[argparse.Namespace, Callable[[argparse.Namespace], int] | None]:
    """The parsed command line, and the command's runner with its module loaded (None
    when the config is wrong, which is said here)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv).parse_args(argv)
    # Before the resolved config fills it in from SETUI_DATA_DIR or the config file.
    data_dir_given = getattr(args, "data_dir", None)
    try:
        config = resolve_config(args) if args.command != "emulator" else None
    except ConfigError as exc:
        print(f"setui: {exc}", file=sys.stderr)
        return args, None
    if config is not None:
        # Commands read the resolved settings from the namespace, whatever their source.
        args.config_resolved = config
        # A store named on this command line is the one a reader reads, agent or not.
        args.data_dir_given = data_dir_given
        args.endpoint = config.endpoint
        args.api_version = config.api_version
        args.data_dir = config.data_dir
        if args.command == "demo":
            # Fake events must never reach the operator's real history and audit log: the
            # demo keeps its own unless --data-dir is given on this very command line.
            args.data_dir = data_dir_given
        if args.command in _READ_EVENTS or (args.command == "demo" and args.headless):
            _say_what_the_version_lacks(config.api_version)
    if args.command in _COMMAND_MODULES:
        module = _command_module(args.command)
        return args, module.run
    return args, _run_emulator if args.command == "emulator" else _run_dashboard


# The commands that read the events document and print to a stream; the dashboard says the
# same in a notice (ui/app.py).
_READ_EVENTS = frozenset({"watch", "agent", "events", "approve"})


def _say_what_the_version_lacks(api_version: str) -> None:
    """One line on stderr, at start, when the api-version cannot show every event type and
    field: a Preempt it never shows must not pass for no Preempt at all."""
    lacks = limits(api_version)
    if lacks is None:
        return
    from setui.system.systemd import WARNING, for_journal, under_journal

    line = f"setui: {lacks}"
    print(for_journal(line, WARNING) if under_journal(sys.stderr) else line, file=sys.stderr,
          flush=True)


# The commands whose module in setui.commands has a run(args); the emulator has its own.
_COMMAND_MODULES = frozenset(COMMANDS) - {"emulator"}


def _run_emulator(args: argparse.Namespace) -> int:
    from setui.emulator import command as emulator_command

    return emulator_command.run(args)


def _run_dashboard(args: argparse.Namespace) -> int:
    from setui.commands.dashboard import run

    return run(args)


if __name__ == "__main__":
    sys.exit(main())
