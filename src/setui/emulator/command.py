"""``setui emulator``: serve a scenario over HTTP until interrupted.

The first line on stdout is the URL (flushed at once) so that scripts and tests can
start it with ``--port 0`` and read where it listens; everything else is a log on stderr.
"""

from __future__ import annotations

import argparse
import math
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from setui.emulator.faults import Faults, parse_faults
from setui.emulator.scenario import ScenarioError, builtin_scenarios, load_scenario
from setui.system.loopback import is_loopback

if TYPE_CHECKING:
    from setui.emulator.server import Emulator

__all__ = ["add_arguments", "run"]

EXIT_USAGE = 2
EXIT_CANNOT_LISTEN = 1
_WATCH_INTERVAL = 0.1  # seconds between checks for state changes to log


# The VM's identity beyond its name, as IMDS compute metadata serves it.
_IDENTITY_FLAGS = (
    ("--vm-id", "vmId", "id of the VM, a GUID (setui keys its claims and holds by it: two "
     "emulators with one id are one VM)"),
    ("--scale-set", "vmScaleSetName", "name of the VM's scale set"),
    ("--placement-group", "placementGroupId", "id of the VM's placement group"),
    ("--resource-group", "resourceGroupName", "name of the VM's resource group"),
    ("--subscription", "subscriptionId", "id of the VM's subscription"),
    ("--zone", "zone", "zone of the VM"),
    ("--location", "location", "location (region) of the VM"),
)


def identity_of(args: argparse.Namespace) -> dict[str, str]:
    """The compute metadata fields given on the command line."""
    return {field: getattr(args, field.lower(), None) or "" for _, field, _ in _IDENTITY_FLAGS}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the emulator's options to ``parser`` (``setui emulator`` or ``-m``)."""
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1; keep it on loopback)")
    parser.add_argument("--port", type=int, default=0,
                        help="port to listen on; 0 picks a free one (default 0)")
    parser.add_argument("--scenario", default="live-migration", metavar="NAME|FILE",
                        help="built-in scenario name or a .toml/.json file "
                             "(default live-migration; see --list-scenarios)")
    parser.add_argument("--speed", type=float, default=1.0, metavar="X",
                        help="run the scenario X times faster than real time (default 1)")
    parser.add_argument("--vm-name", metavar="NAME",
                        help="this VM's name: answered by /metadata/instance/compute/name "
                             "and put in place of the scenario's vm_name in every event's "
                             "Resources (default: the scenario's vm_name)")
    for flag, field, what in _IDENTITY_FLAGS:
        parser.add_argument(flag, metavar=what.split()[0].upper(), dest=field.lower(),
                            help=f"{what}, served as compute metadata {field} (default \"\")")
    parser.add_argument("--faults", metavar="SPEC", default="",
                        help="inject faults, e.g. 'first-delay=5,500=0.1,seed=1' "
                             "(keys: first-delay, 400, 404, 410, 429, 500, 503, "
                             "approve-CODE, compute-CODE, notjson, notdoc, truncate, hang, "
                             "retry-after, slow, big, trickle, idle-close, idle-drop, skew, "
                             "seed)")
    parser.add_argument("--etag", action="store_true",
                        help="send ETag and answer 304 to a matching If-None-Match")
    parser.add_argument("--list-scenarios", action="store_true",
                        help="list the built-in scenarios and exit")


def run(args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None,
        stop: threading.Event | None = None) -> int:
    """Serve until SIGINT/SIGTERM (or ``stop`` is set); 0 on a clean stop, 2 on bad input."""
    from setui.emulator.server import Emulator

    out = out or sys.stdout
    err = err or sys.stderr
    if args.list_scenarios:
        for name in builtin_scenarios():
            print(f"{name:20} {load_scenario(name).description}", file=out)
        return 0
    problem, faults = _check(args)
    if problem:
        print(f"setui emulator: {problem}", file=err)
        return EXIT_USAGE
    try:
        scenario = load_scenario(args.scenario)
    except ScenarioError as exc:
        print(f"setui emulator: {exc}", file=err)
        return EXIT_USAGE

    def log(line: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        print(f"{stamp} {line}", file=err, flush=True)

    emulator = Emulator(scenario, host=args.host, port=args.port, speed=args.speed,
                        vm_name=args.vm_name, faults=faults, etag=args.etag, log=log,
                        identity=identity_of(args))
    try:
        url = emulator.start()
    except OSError as exc:
        print(f"setui emulator: {exc}", file=err)
        return EXIT_CANNOT_LISTEN
    print(url, file=out, flush=True)
    log(f"serving scenario {scenario.name!r} ({scenario.source}) at speed {args.speed:g}, "
        f"vm {emulator.vm_name!r}, faults {emulator.faults.describe()}"
        + (", ETag on" if args.etag else ""))
    if not is_loopback(args.host):
        log(f"warning: listening on {args.host}, reachable from other machines")
    stop = stop or threading.Event()
    restore = _install_signal_handlers(stop)
    try:
        _watch(emulator, stop, log)
    except KeyboardInterrupt:
        pass
    finally:
        # Stop before restoring the handlers: a second Ctrl+C while stopping is absorbed.
        emulator.stop()
        log("stopped")
        restore()
    return 0


def _check(args: argparse.Namespace) -> tuple[str, Faults | None]:
    if not (math.isfinite(args.speed) and args.speed > 0):
        return f"--speed must be a positive number, got {args.speed:g}", None
    if not 0 <= args.port <= 65535:
        return f"--port must be from 0 to 65535, got {args.port}", None
    if args.vm_name is not None and not args.vm_name.strip():
        return "--vm-name must not be empty", None
    try:
        faults = parse_faults(args.faults) if args.faults else None
    except ValueError as exc:
        return f"--faults: {exc}", None
    return "", faults


def _watch(emulator: Emulator, stop: threading.Event, log: Callable[[str], None]) -> None:
    """Log every new incarnation as it happens, whether or not anyone polls."""
    last: int | None = None
    finished = False
    while True:
        document = emulator.document()
        incarnation = document["DocumentIncarnation"]
        if incarnation != last:
            last = incarnation
            summary = "; ".join(
                f"{e['EventId']} {e['EventType']} {e['EventStatus']}"
                + (f" NotBefore {e['NotBefore']}" if e["NotBefore"] else "")
                + f" on {', '.join(e['Resources'])}"
                for e in document["Events"]) or "no events"
            log(f"incarnation {incarnation}: {summary}")
        if not finished and emulator.played_out():
            finished = True
            log("the scenario has played out; the document will not change any more")
        if stop.wait(_WATCH_INTERVAL):
            return


def _install_signal_handlers(stop: threading.Event) -> Callable[[], None]:
    """SIGINT and SIGTERM end the run cleanly; returns a function restoring the old ones."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None  # signals can only be handled on the main thread
    previous: dict[int, Any] = {}

    def handler(signum: int, frame: object) -> None:
        stop.set()

    for name in ("SIGINT", "SIGTERM", "SIGBREAK"):  # SIGBREAK: Ctrl+Break on Windows
        signum = getattr(signal, name, None)
        if signum is None:
            continue
        try:
            previous[signum] = signal.signal(signum, handler)
        except (OSError, ValueError):
            continue

    def restore() -> None:
        for signum, old in previous.items():
            signal.signal(signum, old)

    return restore
