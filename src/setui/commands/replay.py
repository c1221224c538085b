"""``setui replay``: the dashboard as it was, from the record, with a time cursor: the
agent's, through its API when it answers, else the store.

It opens the UI, so it reaches it only through :mod:`setui.commands.dashboard`, like
``setui demo``; nothing in it can approve.
"""

from __future__ import annotations

import argparse
import sys

from setui.commands.common import READS_THE_AGENT
from setui.commands.history import parse_since

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = READS_THE_AGENT
    parser.add_argument("--from", dest="since", type=parse_since, metavar="TIME",
                        help="start the cursor here: 2h, 30m, 7d ago, or an ISO 8601 time "
                             "in UTC (default: the first recorded incarnation)")
    parser.add_argument("--to", dest="until", type=parse_since, metavar="TIME",
                        help="the cursor stops here (default: the end of the record)")


def run(args: argparse.Namespace) -> int:
    from setui.commands.dashboard import open_replay

    since, until = getattr(args, "since", None), getattr(args, "until", None)
    if since is not None and until is not None and since > until:
        print("setui replay: --from is after --to", file=sys.stderr)
        return 2
    return open_replay(args, since=since, until=until)
