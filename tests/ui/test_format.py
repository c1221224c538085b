"""The dashboard's formatting rules, without an app: countdowns, impact, times, urgency."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from setui.core.model import Event, EventSource, EventStatus, EventType, is_this_vm
from setui.core.order import sort_key
from setui.core.timefmt import age, clock, stamp, time_of_day
from setui.ui.format import (
    Countdown,
    Palette,
    Urgency,
    approved_label,
    countdown,
    impact,
    resources_summary,
    safe,
)

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=timezone.utc)


def ev(event_id: str = "E1", *, status: str = "Scheduled", in_seconds: float | None = 600,
       resources: tuple[str, ...] = ("web-0",), duration: int | None = 5,
       kind: str = "Freeze") -> Event:
    not_before = NOW + timedelta(seconds=in_seconds) if in_seconds is not None else None
    return Event(event_id=event_id, event_type=EventType(kind), status=EventStatus(status),
                 resources=resources, not_before=not_before if status == "Scheduled" else None,
                 source=EventSource.PLATFORM, duration=duration)


@pytest.mark.parametrize(("seconds", "text", "level"), [
    (14 * 60 + 32, "T-14:32", Urgency.CALM),
    (5 * 60, "T-5:00", Urgency.CALM),
    (5 * 60 - 1, "T-4:59", Urgency.WARNING),
    (60, "T-1:00", Urgency.WARNING),
    (59, "T-0:59", Urgency.CRITICAL),
    (0.4, "T-0:01", Urgency.CRITICAL),
    (2 * 3600 + 5, "T-2:00:05", Urgency.CALM),
    (7 * 86400 + 3 * 3600, "T-7d 03h", Urgency.CALM),
])
def test_countdown_to_not_before(seconds: float, text: str, level: Urgency) -> None:
    assert countdown(ev(in_seconds=seconds), NOW) == Countdown(text, level)


def test_countdown_waiting_once_not_before_has_passed() -> None:
    assert countdown(ev(in_seconds=0), NOW) == Countdown("waiting", Urgency.CRITICAL)
    assert countdown(ev(in_seconds=-90), NOW).label() == "!! waiting"


def test_countdown_started() -> None:
    started = ev(status="Started")
    assert countdown(started, NOW, started_at=NOW - timedelta(seconds=42)) == Countdown(
        "started 0:42 ago", Urgency.STARTED, "0:42 ago")
    inexact = countdown(started, NOW, started_at=NOW - timedelta(seconds=42),
                        started_exact=False)
    assert inexact.text == "started ≥0:42 ago"
    assert countdown(started, NOW).text == "started"
    assert countdown(started, NOW, started_at=NOW).label() == "▶ started 0:00 ago"
    # 80 columns: the ▶ says "started", even on a neighbour's (quiet) row.
    assert inexact.label(short=True) == "▶ ≥0:42 ago"
    assert inexact.label(loud=False, short=True) == "▶ ≥0:42 ago"
    assert countdown(started, NOW).label(short=True) == "▶ started"
    # Only started countdowns have a short form.
    assert countdown(ev(in_seconds=90), NOW).label(short=True) == "! T-1:30"


def test_countdown_unknown_status_is_shown_literally() -> None:
    odd = ev(status="Paused\x1b[2J")
    assert countdown(odd, NOW) == Countdown("status Paused\\x1b[2J", Urgency.CALM)


def test_urgency_symbols_never_rely_on_colour() -> None:
    assert countdown(ev(in_seconds=30), NOW).label() == "!! T-0:30"
    assert countdown(ev(in_seconds=200), NOW).label() == "! T-3:20"
    assert countdown(ev(in_seconds=900), NOW).label() == "T-15:00"
    assert countdown(ev(in_seconds=30), NOW).label(loud=False) == "T-0:30"


def test_durations_as_a_clock_face() -> None:
    assert clock(0) == "0:00"
    assert clock(42) == "0:42"
    assert clock(3600) == "1:00:00"
    assert clock(86400 * 2 + 3600 * 5) == "2d 05h"
    assert clock(-5) == "0:00"


@pytest.mark.parametrize(("duration", "text"), [
    (5, "5 s"), (0, "none"), (-1, "unknown"), (None, "unknown"), (600, "10 min"),
])
def test_impact(duration: int | None, text: str) -> None:
    assert impact(ev(duration=duration)) == text


@pytest.mark.parametrize(("kind", "text"), [
    ("Redeploy", "moves host"), ("Preempt", "deleted"), ("Terminate", "deleted"),
    ("Freeze", "none"), ("Reboot", "none"),
])
def test_no_impact_expected_is_not_none_for_an_event_that_moves_or_deletes_the_vm(
        kind: str, text: str) -> None:
    """DurationInSeconds 0 says no interruption is expected; a Redeploy still moves the
    VM to another host (its temporary disk is lost), a Preempt or Terminate deletes it:
    "none" would say the opposite. The documents' words go with it where there is room."""
    event = ev(duration=0, kind=kind)
    assert impact(event) == text
    if kind == "Redeploy":
        assert event.effect == "moved to another host; temporary disks lost"


def test_resources_summary_marks_this_vm() -> None:
    assert resources_summary(["web-0", "web-1", "web-2"], "web-0") == "▲ web-0 +2"
    assert resources_summary(["WEB-0"], "web-0") == "▲ WEB-0"
    assert resources_summary(["_web-0"], "web-0") == "▲ _web-0"
    assert resources_summary(["web-1", "db-0"], "web-0") == "web-1, db-0"
    assert resources_summary(["frontend-instance-1", "frontend-instance-2"], "web-0",
                             limit=18) == "frontend-insta… +1"
    assert resources_summary([f"vm-{i}" for i in range(30)], None, limit=8) == "30 VMs"
    assert resources_summary([], "web-0") == "none listed"


def test_resources_summary_neutralises_names() -> None:
    text = resources_summary(["[red]x[/]\x1b[31m"], None, limit=40)
    assert text == "[red]x[/]\\x1b[31m"


def test_is_this_vm() -> None:
    assert is_this_vm("Web-0", "web-0")
    assert is_this_vm("_web-0", "web-0")
    assert not is_this_vm("web-0", None)
    assert not is_this_vm("web-01", "web-0")


def test_time_of_day_same_day_and_other_days() -> None:
    moment = NOW + timedelta(minutes=14, seconds=32)
    assert time_of_day(moment, NOW) == "10:14:32"
    assert time_of_day(NOW + timedelta(days=7), NOW) == "Nov 29 10:00"


def test_local_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # The conftest fixes TZ=Europe/Amsterdam: UTC+1 in November.
    assert time_of_day(NOW, NOW, None) == "11:00:00"
    assert stamp(NOW) == "2026-11-22 10:00:00 UTC (11:00:00 CET)"


def test_age_is_calm() -> None:
    assert age(0.3) == "<2s"
    assert age(1.9) == "<2s"
    assert age(14) == "14s"
    assert age(185) == "3m 05s"
    assert age(3 * 3600 + 300) == "3h 05m"
    assert age(3 * 86400 + 9 * 3600) == "3d 09h"


def test_approved_label() -> None:
    at = datetime(2026, 11, 22, 10, 2, 11, tzinfo=timezone.utc)
    assert approved_label(at, "oncall") == "approved 10:02:11 by oncall"
    assert approved_label(at, "oncall", short=True) == "✓ 10:02:11"
    assert approved_label(at, "[b]x\x07") == "approved 10:02:11 by [b]x\\x07"


def test_sort_key_most_urgent_first_and_stable_in_time() -> None:
    later = ev("LATER", in_seconds=900)
    sooner = ev("SOONER", in_seconds=120)
    passed = ev("PASSED", in_seconds=-30)
    started = ev("STARTED", status="Started")
    other_same_time = ev("OTHER", in_seconds=120, resources=("web-1",))
    other_started = ev("OTHER-STARTED", status="Started", resources=("db-0",))
    events = [later, other_same_time, other_started, sooner, passed, started]
    ordered = sorted(events, key=lambda e: sort_key(e, "web-0", first_seen=NOW))
    # This VM's events first, however urgent a neighbour's is.
    assert [e.event_id for e in ordered] == ["STARTED", "PASSED", "SOONER", "LATER",
                                             "OTHER-STARTED", "OTHER"]


def test_safe_cuts_and_escapes() -> None:
    assert safe("a\nb", 10) == "a\\x0ab"
    assert safe("x" * 50, 10) == "x" * 9 + "…"
    assert safe(EventType("Freeze")) == "Freeze"


def test_palette_from_theme_variables() -> None:
    palette = Palette.from_variables({
        "setui-urgent": "#FF6B63", "setui-urgent-style": "bold",
        "setui-soon": "#E8B04A", "setui-soon-style": "none",
        "setui-started": "#FF6B63", "setui-started-style": "bold reverse",
        "setui-secondary-row": "#8A94A1", "setui-gone": "#5E6772",
        "setui-gone-style": "italic", "setui-ok": "#5FB878",
        "setui-alarm-foreground": "#FFFFFF", "setui-alarm-background": "#B3261E",
        "setui-alarm-style": "bold",
    })
    assert palette.urgent == "bold #FF6B63"
    assert palette.soon == "#E8B04A"
    assert palette.started == "bold reverse #FF6B63"
    assert palette.secondary == "#8A94A1"
    assert palette.gone == "italic #5E6772"
    assert palette.alarm == "bold #FFFFFF on #B3261E"
    assert palette.for_urgency(Urgency.CRITICAL) == palette.urgent
    assert palette.for_urgency(Urgency.CALM) == ""


def test_palette_survives_bad_values() -> None:
    palette = Palette.from_variables({"setui-urgent": "not a colour",
                                      "setui-urgent-style": "sparkly"})
    assert palette.urgent == "bold"
    assert Palette.from_variables({}).alarm == "bold reverse"


def test_format_offers_only_its_own_names() -> None:
    """A rule of core's is imported from core: one home, not a second door to it."""
    from setui.ui import format as fmt

    borrowed = [name for name in fmt.__all__
                if getattr(getattr(fmt, name), "__module__", fmt.__name__) != fmt.__name__]
    assert borrowed == []
