"""The one way setui writes time, for every front end (dashboard, details, history,
audit, watch, report).

- countdowns: ``T-9:58``, ``T-1:02:03``, ``T-1d 09h`` (a clock face under a day);
- clock times: UTC, with the local time beside them only when the zone differs:
  ``2026-11-24 03:12:05 UTC (04:12:05 CET)``;
- durations: ``42s``, ``3m 05s``, ``2h 05m``, ``1d 09h``.

Lines that are read in columns or by machines-and-people alike (``setui watch``, the
``history`` and ``audit`` lists) give the UTC time alone, at a fixed width; what people
read in the dashboard, the details and the report has the local time beside it. Pure
functions, no clock of their own: the caller says what "now" is.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone, tzinfo

__all__ = ["age", "clock", "countdown", "duration", "local_beside", "local_differs",
           "signed_countdown", "stamp", "time_of_day", "utc_and_local", "utc_time",
           "zone_name"]


def _parts(whole_seconds: int) -> tuple[int, int, int, int]:
    """Days, hours, minutes and seconds of a span (none below zero)."""
    days, rest = divmod(max(0, whole_seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return days, hours, minutes, secs


def clock(seconds: float) -> str:
    """A span as a clock face: ``0:42``, ``14:32``, ``1:02:03``; a day or more:
    ``6d 23h``. What countdowns and "started ... ago" count in."""
    days, hours, minutes, secs = _parts(int(seconds))
    if days:
        return f"{days}d {hours:02d}h"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def countdown(seconds: float) -> str:
    """``T-9:58``: time left to a moment, rounded up (T-0:01 until it is there)."""
    return f"T-{clock(math.ceil(seconds))}"


def signed_countdown(seconds: float) -> str:
    """``T-4:59`` ahead, ``T+0:05`` once passed: for lines read after the moment too."""
    return countdown(seconds) if seconds >= 0 else f"T+{clock(-seconds)}"


def duration(seconds: float) -> str:
    """``42s``, ``3m 05s``, ``2h 05m``, ``1d 09h``: how long something took or waited."""
    days, hours, minutes, secs = _parts(round(seconds))
    if days:
        return f"{days}d {hours:02d}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


def age(seconds: float) -> str:
    """A calm age, a duration that does not flicker under two seconds: ``<2s``, ``14s``,
    ``3m 05s``."""
    return "<2s" if seconds < 2 else duration(seconds)


def zone_name(moment: datetime) -> str:
    """The local zone's abbreviation (``CET``), or ``local`` when it has none."""
    name = moment.astimezone().tzname() or ""
    return name if name and len(name) <= 6 and name.isprintable() else "local"


def local_differs(moment: datetime) -> bool:
    """Whether this machine's clock reads otherwise than UTC at ``moment``: the one test
    for showing local time beside UTC (a second column that repeats the first is noise)."""
    return moment.astimezone().utcoffset() != timezone.utc.utcoffset(None)


def local_beside(moment: datetime, *, with_date: bool = False) -> str:
    """`` (04:12:05 CET)`` when this machine's zone is not UTC at ``moment``; else ``""``.
    The date is added when it differs from the UTC one (or ``with_date``)."""
    if not local_differs(moment):
        return ""
    utc = moment.astimezone(timezone.utc)
    local = moment.astimezone()
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


def utc_time(moment: datetime) -> str:
    """``10:02:11``: the UTC time of day, for a cell that says UTC in its heading."""
    return moment.astimezone(timezone.utc).strftime("%H:%M:%S")


def time_of_day(moment: datetime, now: datetime, tz: tzinfo | None = timezone.utc) -> str:
    """``10:14:32`` on the same day as ``now`` (in ``tz``), else ``Nov 29 10:14``;
    ``tz=None``: this machine's zone."""
    here = moment.astimezone(tz)
    today = now.astimezone(tz)
    if here.date() == today.date():
        return here.strftime("%H:%M:%S")
    return here.strftime("%b %d %H:%M")


def utc_and_local(moment: datetime, now: datetime | None = None) -> str:
    """``Sun 22 Nov 2026 10:14:32 UTC (11:14:32 CET)``: for details and dialogs."""
    del now  # the day is always written: a notice may be days ahead
    utc = moment.astimezone(timezone.utc)
    return utc.strftime("%a %d %b %Y %H:%M:%S UTC") + _local_short(moment)


def _local_short(moment: datetime) -> str:
    if not local_differs(moment):
        return ""
    utc = moment.astimezone(timezone.utc)
    local = moment.astimezone()
    shown = local.strftime("%H:%M:%S" if local.date() == utc.date() else "%a %d %b %H:%M:%S")
    return f" ({shown} {zone_name(local)})"
