"""`setui report` in a real process over the recorded incident: the Markdown against a
fixed expected file (tests/replay/expected/; SETUI_UPDATE_EXPECTED=1 rewrites it, to be
looked at before committing), the JSON's keys, the words for bad input."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from setui.commands.report import md
from setui.store import Store

EXPECTED = Path(__file__).parent / "expected"


def setui(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SETUI_DATA_DIR=str(data_dir), TZ="Europe/Amsterdam")
    return subprocess.run([sys.executable, "-m", "setui.cli", *args], capture_output=True,
                          text=True, env=env, timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.slow
def test_the_markdown_report_of_the_recorded_incident(recorded: Store) -> None:
    done = setui("report", data_dir=recorded.path.parent)
    assert done.returncode == 0, done.stderr
    expected = (EXPECTED / "report-incident.md").read_text(encoding="utf-8")
    if os.environ.get("SETUI_UPDATE_EXPECTED"):
        (EXPECTED / "report-incident.md").write_text(done.stdout, encoding="utf-8")
    # Nothing has recorded since the incident: that hole runs to when the report ran.
    assert "03:07:00 UTC (04:07:00 CET) to now (" in done.stdout
    assert _until_now(done.stdout) == _until_now(expected)


def _until_now(text: str) -> str:
    return re.sub(r" to now \([^)]*\)", " to now (...)", text)


@pytest.mark.slow
def test_a_window_keeps_the_events_alive_in_it(recorded: Store) -> None:
    # From 03:03:30: the Reboot (gone 03:02:12) and the Freeze (cancelled 03:03:20) are
    # over; the Redeploy is still there, and the hole is inside the window.
    done = setui("report", "--from", "2026-11-24T03:03:30", "--format", "json",
                 data_dir=recorded.path.parent)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert [e["event_type"] for e in data["events"]] == ["Redeploy"]
    closed, still = data["holes"]
    assert closed == {"from": "2026-11-24T03:04:00Z", "to": "2026-11-24T03:05:30Z",
                      "open": False}
    # Read to the record's end, the report says nothing has recorded since then.
    assert (still["from"], still["open"]) == ("2026-11-24T03:07:00Z", True)
    # Cut at a moment, it ends there.
    done = setui("report", "--from", "2026-11-24T03:03:30", "--to", "2026-11-24T03:07:00",
                 "--format", "json", data_dir=recorded.path.parent)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["holes"] == [closed]


@pytest.mark.slow
def test_json_has_stable_keys_and_is_ascii(recorded: Store) -> None:
    done = setui("report", "--format", "json", data_dir=recorded.path.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout.isascii()
    data = json.loads(done.stdout)
    assert list(data) == ["endpoint", "from", "to", "incarnations", "holes_known", "holes",
                          "events", "short_notice", "short_notice_other_vms",
                          "impacts_measured", "impacts_measured_since",
                          "impacts_measured_spans", "impacts_without_event"]
    reboot, freeze, redeploy = data["events"]
    assert list(reboot) == [
        "event_id", "event_type", "resources", "first_seen", "first_incarnation", "initial",
        "appeared_started", "not_before", "reschedules", "approvals", "refusals", "holds",
        "hook_runs", "started_at", "started_certain", "started_before_not_before_seconds",
        "gone_at", "fate", "fate_certain", "fate_detail", "notice", "impacts", "impact_measured"]
    assert list(reboot["notice"]) == ["seconds", "to_started_seconds", "minimum_seconds",
                                      "short", "appeared_started", "unknown", "words"]
    assert (reboot["notice"]["seconds"], reboot["notice"]["minimum_seconds"]) == (300, 900)
    assert reboot["notice"]["short"] is True and reboot["notice"]["to_started_seconds"] == 82
    # The Freeze is of web-1 and web-2 alone: short too, but not this VM's (web-0).
    assert data["short_notice"] == [reboot["event_id"], redeploy["event_id"]]
    assert data["short_notice_other_vms"] == [freeze["event_id"]]
    # Nothing measured the incident: said as not known, never as "none".
    assert (data["impacts_measured"], reboot["impacts"], reboot["impact_measured"]) == \
        (False, [], False)
    assert freeze["impact_measured"] is None  # it never started
    assert reboot["approvals"][0]["user"] == "alice"
    assert reboot["started_before_not_before_seconds"] == 218.0
    assert (freeze["fate"], freeze["fate_certain"]) == ("cancelled", True)
    assert freeze["refusals"][0]["user"] == "bob"
    assert [m["to"] for m in freeze["reschedules"]] == ["2026-11-24T03:06:00Z"]
    assert (redeploy["fate"], redeploy["fate_certain"]) == ("gone", False)


@pytest.mark.slow
def test_nothing_recorded_and_a_backwards_window_are_said_in_words(tmp_path: Path,
                                                                  recorded: Store) -> None:
    done = setui("report", data_dir=tmp_path / "empty")
    assert (done.returncode, done.stdout) == (1, "")
    assert "nothing has been recorded yet" in done.stderr
    done = setui("report", "--from", "1h", "--to", "2h", data_dir=recorded.path.parent)
    assert done.returncode == 2 and "--from is after --to" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("text", ["[click](http://evil)", "**x** `y` <b>", "a|b # c",
                                  "\x1b[2Jbell\x07"])
def test_text_from_the_network_is_not_read_as_markdown(text: str) -> None:
    shown = md(text)
    assert "\x1b" not in shown and "\x07" not in shown
    for special in "[]*`<>|#":
        assert all(shown[i - 1] == "\\" for i, c in enumerate(shown) if c == special)


def test_words_in_parentheses_are_left_as_they_are() -> None:
    """A link needs its brackets, which are escaped: parentheses alone are no markup, and
    an escaped one shows its backslash wherever the Markdown is read as text."""
    assert md("policy:reboot (setui agent, uid 0)") == "policy:reboot (setui agent, uid 0)"
    assert md("[click](http://evil)") == "\\[click\\](http://evil)"


@pytest.mark.slow
def test_json_claims_no_certainty_about_what_did_not_happen(recorded: Store) -> None:
    """An event still there at the end of the report has no fate, and no certainty about
    one; one not seen to start has no certainty about its start."""
    done = setui("report", "--to", "2026-11-24T03:01:00", "--format", "json",
                 data_dir=recorded.path.parent)
    assert done.returncode == 0, done.stderr
    events = json.loads(done.stdout)["events"]
    assert events and all(e["fate"] is None and e["fate_certain"] is None for e in events)
    waiting = [e for e in events if e["started_at"] is None]
    assert waiting and all(e["started_certain"] is None for e in waiting)
