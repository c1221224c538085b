"""The one way setui writes time, for every front end (dashboard, details, dialogs,
history, audit, watch, events, approve, the agent, the report).

For people:

- clock times: UTC, with the local time beside them only when the zone differs:
  ``2026-11-24 03:12:05 UTC (04:12:05 CET)`` (:func:`stamp`); a time of day
  ``03:12:05`` where the heading or the words say UTC and the day is known, and in a
  narrow cell on another day ``Nov 24 03:12`` (:func:`time_of_day`);
- countdowns: ``T-9:58``, ``T-1:02:03``, ``T-1d 09h`` (a clock face under a day);
- durations: ``42s``, ``3m 05s``, ``2h 05m``, ``1d 09h``.

For machines (JSON, the hooks' environment): ISO 8601 in UTC with ``Z`` (:func:`iso`).
Never the service's RFC 1123 (``Wed, 25 Nov 2026 19:01:03 GMT``): that is the document's
own text, shown only as the document.

Lines that are read in columns or by machines-and-people alike (``setui watch``, the
``history`` and ``audit`` lists) give the UTC time alone, at a fixed width; what people
read in the dashboard, the details and the report has the local time beside it. Pure
functions, no clock of their own: the caller says what "now" is.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone, tzinfo

__all__ = ["age", "clock", "countdown", "duration", "iso", "local_beside", "local_differs",
           "precise", "restate", "signed_countdown", "stamp", "time_of_day", "utc_time",
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


def precise(seconds: float) -> str:
    """``4.8s`` under a minute (a pause is read to the tenth), else :func:`duration`."""
    if abs(seconds) < 59.95:
        return f"{seconds:.1f}s"
    return duration(seconds)


def age(seconds: float, calm: float = 2.0) -> str:
    """A calm age, a duration that does not flicker under ``calm`` seconds (news comes
    that often): ``<2s``, ``14s``, ``3m 05s``."""
    return f"<{calm:g}s" if seconds < calm else duration(seconds)


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


def stamp(moment: datetime | None, *, local: bool = True, date: bool = True,
          tenths: bool = False) -> str:
    """``2026-11-24 03:12:05 UTC (04:12:05 CET)``; ``date=False``: ``03:12:05 UTC ...``;
    ``local=False``: UTC alone; ``tenths``: ``03:12:05.3 UTC``. ``-`` for no moment."""
    if moment is None:
        return "-"
    utc = moment.astimezone(timezone.utc)
    text = utc.strftime("%Y-%m-%d %H:%M:%S" if date else "%H:%M:%S")
    if tenths:
        text += f".{utc.microsecond // 100_000}"
    return f"{text} UTC" + (local_beside(moment) if local else "")


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


def iso(moment: datetime | None) -> str | None:
    """``2026-11-24T03:12:05Z`` (with microseconds when it has them): for machines."""
    if moment is None:
        return None
    return moment.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


# The service's own form, as setui's words once carried it (stored history from before).
_RFC_1123 = re.compile(r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} [A-Z][a-z]{2} \d{4} "
                       r"\d{2}:\d{2}:\d{2} GMT\b")


def restate(text: str) -> str:
    """setui's own words with any RFC 1123 time in them written the one way (stamp,
    UTC alone): what a history recorded by an older setui says, read today."""
    if "GMT" not in text:
        return text
    # Here, not at the top: email.utils costs milliseconds the login line (setui.loginline,
    # which writes its countdowns here) cannot spare, and only this reads RFC 1123.
    from email.utils import parsedate_to_datetime

    def one(match: re.Match[str]) -> str:
        try:
            return stamp(parsedate_to_datetime(match.group(0)), local=False)
        except (TypeError, ValueError, IndexError, OverflowError):
            return match.group(0)

    return _RFC_1123.sub(one, text)
