"""``setui demo``: the dashboard against the built-in emulator, on loopback only.

The demo keeps its history and audit log in a temporary directory unless told
otherwise, so fake events never mix with a real VM's record.
"""

from __future__ import annotations

import argparse
import math
import signal
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from setui.settings.config import Config

__all__ = ["run"]


class _HungUp(SystemExit):
    """The terminal closed (SIGHUP): end as on Ctrl-C, so the temporary directory goes."""


def _end_on_hangup() -> None:
    """SIGHUP would end the demo without unwinding, leaving its temporary directory
    behind; unless it is ignored (nohup: the user's choice, kept)."""
    if not hasattr(signal, "SIGHUP") or signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
        return

    def hung_up(signum: int, frame: object) -> None:
        raise _HungUp(128 + signum)

    signal.signal(signal.SIGHUP, hung_up)


def run(args: argparse.Namespace) -> int:
    from setui.emulator.scenario import ScenarioError, load_scenario
    from setui.emulator.server import Emulator

    if getattr(args, "json", False) and not args.headless:
        print("setui demo: --json needs --headless (the dashboard is not JSON)",
              file=sys.stderr)
        return 2
    if not math.isfinite(args.speed) or args.speed <= 0:  # nan compares false to everything
        print(f"setui demo: --speed must be a positive finite number, got {args.speed}",
              file=sys.stderr)
        return 2
    try:
        scenario = load_scenario(args.scenario)
    except ScenarioError as exc:
        print(f"setui demo: {exc}", file=sys.stderr)
        return 2
    config: Config = args.config_resolved
    # Only a --data-dir given to this command: cli.py leaves SETUI_DATA_DIR and the config
    # file's data-dir out of args.data_dir for the demo, and config.data_dir is not used.
    explicit_dir = getattr(args, "data_dir", None)
    with tempfile.TemporaryDirectory(prefix="setui-demo-") as scratch:
        data_dir = Path(explicit_dir) if explicit_dir else Path(scratch)
        _end_on_hangup()
        with Emulator(scenario, speed=args.speed) as emulator:
            # The emulator's own api-version checks apply; the real endpoint is never used.
            demo_config = replace(config, endpoint=emulator.url, data_dir=data_dir)
            if args.headless:
                from setui.commands.watch import watch
                from setui.session import run_until_stopped

                try:
                    return run_until_stopped(watch(demo_config, as_json=args.json, record=True,
                                                    out=sys.stdout, err=sys.stderr))
                except KeyboardInterrupt:
                    return 0
            from setui.commands.dashboard import open_dashboard

            # A sped-up scenario squeezes its notices into minutes: the timeline's closest
            # zoom shows them apart instead of all on "now".
            return open_dashboard(demo_config, demo=True, zoom=0 if args.speed >= 2 else None,
                                  config_path=getattr(args, "config", None))
