"""``setui fleet --prometheus URL``: every VM's events, from Prometheus, read-only.

Headless up to the dashboard's door: the URL and the credentials are resolved and checked
here (a bad one is a message, exit 2), then :func:`setui.commands.dashboard.open_fleet`
opens the UI. Credentials come only from the config file or the environment.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable

from setui.settings.config import Config

__all__ = ["add_arguments", "run"]

DEFAULT_STALE_AFTER = 120.0  # seconds: a scrape interval of a minute, and margin


def _seconds(minimum: float) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
        if not math.isfinite(value) or value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum:g} seconds, got {text}")
        return value
    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from setui.fleet.watcher import MIN_REFRESH

    parser.add_argument("--prometheus", metavar="URL",
                        help="Prometheus (or Thanos, Mimir, Azure Managed Prometheus) base "
                             "URL (config prometheus, env SETUI_PROMETHEUS_URL); credentials "
                             "only from the config file or the environment")
    parser.add_argument("--refresh", type=_seconds(MIN_REFRESH), default=MIN_REFRESH,
                        metavar="SECONDS",
                        help=f"seconds between queries (default and minimum {MIN_REFRESH:g})")
    parser.add_argument("--stale-after", type=_seconds(1.0), default=DEFAULT_STALE_AFTER,
                        metavar="SECONDS",
                        help="call a VM stale when its agent's last good answer from IMDS is "
                             f"older than this (default {DEFAULT_STALE_AFTER:g})")


def run(args: argparse.Namespace) -> int:
    from setui.fleet.prometheus import auth_from, check_credentials_safe, check_prometheus_url

    config: Config = args.config_resolved
    url = args.prometheus or config.prometheus
    if not url:
        print("setui fleet: which Prometheus? Give --prometheus URL, or prometheus in the "
              "config file, or SETUI_PROMETHEUS_URL", file=sys.stderr)
        return 2
    try:
        url = check_prometheus_url(url)
    except ValueError as exc:
        print(f"setui fleet: --prometheus: {exc}", file=sys.stderr)
        return 2
    auth = auth_from(config)
    try:
        check_credentials_safe(url, auth)
    except ValueError as exc:
        print(f"setui fleet: {exc}", file=sys.stderr)
        return 2
    from setui.commands.dashboard import open_fleet

    return open_fleet(config, url=url, auth=auth, refresh=args.refresh,
                      stale_after=args.stale_after)
