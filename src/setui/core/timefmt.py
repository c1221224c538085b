"""The one way setui writes time, for every front end (dashboard, details, history,
audit, watch, report).

- countdowns: ``T-9:58``, ``T-1:02:03``, ``T-1d 09h`` (a clock face under a day);
- clock times: UTC, with the local time beside them only when the zone differs:
  ``2026-11-24 03:12:05 UTC (04:12:05 CET)``;
- durations: ``42s``, ``3m 05s``, ``2h 05m``, ``1d 09h``.

Pure functions, no clock of their own: the caller says what "now" is.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

__all__ = ["clock", "countdown", "duration", "local_beside", "stamp", "zone_name"]


def clock(seconds: float) -> str:
    """A span as a clock face: ``0:42``, ``14:32``, ``1:02:03``; a day or more:
    ``6d 23h``. What countdowns and "started ... ago" count in."""
    total = max(0, int(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours:02d}h"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def countdown(seconds: float) -> str:
    """``T-9:58``: time left to a moment, rounded up (T-0:01 until it is there)."""
    return f"T-{clock(math.ceil(seconds))}"


def duration(seconds: float) -> str:
    """``42s``, ``3m 05s``, ``2h 05m``, ``1d 09h``: how long something took or waited."""
    total = max(0, round(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours:02d}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


def zone_name(moment: datetime) -> str:
    """The local zone's abbreviation (``CET``), or ``local`` when it has none."""
    name = moment.astimezone().tzname() or ""
    return name if name and len(name) <= 6 and name.isprintable() else "local"


def local_beside(moment: datetime, *, with_date: bool = False) -> str:
    """`` (04:12:05 CET)`` when this machine's zone is not UTC at ``moment``; else ``""``.
    The date is added when it differs from the UTC one (or ``with_date``)."""
    utc = moment.astimezone(timezone.utc)
    local = moment.astimezone()
    if local.utcoffset() == utc.utcoffset():
        return ""
    shown = local.strftime("%Y-%m-%d %H:%M:%S" if with_date or local.date() != utc.date()
                           else "%H:%M:%S")
    return f" ({shown} {zone_name(local)})"


def stamp(moment: datetime | None, *, local: bool = True, date: bool = True) -> str:
    """``2026-11-24 03:12:05 UTC (04:12:05 CET)``; ``date=False``: ``03:12:05 UTC ...``;
    ``local=False``: UTC alone. ``-`` for no moment."""
    if moment is None:
        return "-"
    utc = moment.astimezone(timezone.utc)
    text = utc.strftime("%Y-%m-%d %H:%M:%S UTC" if date else "%H:%M:%S UTC")
    return text + (local_beside(moment) if local else "")
