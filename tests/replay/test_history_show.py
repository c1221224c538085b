"""`setui history show N --diff` over the recorded incident: the diff first, then the
document; and `history export-scenario` to standard output, which the emulator reads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from setui.emulator.scenario import parse_scenario
from setui.store import Store

pytestmark = pytest.mark.slow  # starts processes: the slow tier (docs/testing.md)


def setui(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SETUI_DATA_DIR=str(data_dir))
    return subprocess.run([sys.executable, "-m", "setui.cli", *args], capture_output=True,
                          text=True, env=env, timeout=60, stdin=subprocess.DEVNULL)


def test_show_with_diff_prints_what_changed_before_the_document(recorded: Store) -> None:
    done = setui("history", "show", "5", "--diff", data_dir=recorded.path.parent)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    changes = text.index("Changes since incarnation 4")
    rescheduled = text.index("rescheduled", changes)
    document = text.index('"DocumentIncarnation": 5')
    assert changes < rescheduled < text.index("The document:") < document


def test_show_without_diff_is_the_document_alone(recorded: Store) -> None:
    done = setui("history", "show", "5", data_dir=recorded.path.parent)
    assert done.returncode == 0, done.stderr
    assert "Changes since" not in done.stdout and "The document:" not in done.stdout
    assert '"DocumentIncarnation": 5' in done.stdout


def test_export_to_standard_output_is_a_scenario_the_emulator_reads(recorded: Store) -> None:
    done = setui("history", "export-scenario", "-", "--vm-name", "web-0",
                 data_dir=recorded.path.parent)
    assert done.returncode == 0, done.stderr
    scenario = parse_scenario(done.stdout)
    reboot, freeze, redeploy = scenario.events
    assert (reboot.at, reboot.notice, reboot.approve_at) == (10, 300, 91)
    assert [(r.at, r.notice) for r in freeze.reschedule] == [(60, 300)]
    assert freeze.cancel_at == 200
    assert (redeploy.at, redeploy.notice, redeploy.cancel_at) == (30, 240, None)
    # Gone unseen in the hole, after its NotBefore: it plays as having run then.
    assert "gone unseen after its NotBefore" in done.stdout
    assert "03:04:00 to 03:05:30 UTC" in done.stdout  # the hole, said in a comment


def test_a_window_that_opens_after_a_reschedule_starts_from_the_notbefore_then(
        recorded: Store) -> None:
    done = setui("history", "export-scenario", "-", "--from", "2026-11-24T03:01:10",
                 data_dir=recorded.path.parent)
    assert done.returncode == 0, done.stderr
    events = {e.type: e for e in parse_scenario(done.stdout).events}
    # Times count from 03:01:10; the Freeze was moved at 03:01:00 to 03:06:00, so it
    # starts there, already moved, with nothing left to reschedule.
    freeze = events["Freeze"]
    assert (freeze.at, freeze.notice, freeze.reschedule) == (0, 290, ())
    assert freeze.cancel_at == 130


HOSTILE_IDS = ("EV-\u202e-1", "EV-\u200b\u2066-2")
HOSTILE = f"""
name = "hostile"
vm_name = "web-0"
tail = 30

[[events]]
id = "{HOSTILE_IDS[0].encode("unicode_escape").decode()}"
type = "Reboot"
at = 2
notice = "5m"
resources = ["web-0\\u202e"]
description = "Host \\u202emaintenance\\u0085 \\u2028 bell\\u0007"

[[events]]
id = "{HOSTILE_IDS[1].encode("unicode_escape").decode()}"
type = "Freeze"
at = 3
notice = "4m"
resources = ["web-1"]
"""


def test_an_exported_scenario_holds_no_raw_control_or_bidi_character(tmp_path: Path) -> None:
    """The one escaping rule of every output (setui.core.textsafe) holds in the TOML too: what
    it would escape is written as a TOML escape, so the file is safe to cat, and it still
    plays the very same EventIds, resources and description."""
    from setui.core.textsafe import printable
    from tests.support.recording import record_scenario

    store = record_scenario(tmp_path / "setui.db", HOSTILE, seconds=20)
    store.close()
    done = setui("history", "export-scenario", "-", data_dir=tmp_path)
    assert done.returncode == 0, done.stderr
    unsafe = [c for c in done.stdout if c != "\n" and printable(c) != c]
    assert unsafe == [], unsafe
    assert "\\u202e" in done.stdout and "\\u0085" in done.stdout
    events = parse_scenario(done.stdout).events
    assert [e.id for e in events] == list(HOSTILE_IDS)
    assert events[0].resources == ("web-0\u202e",)
    assert events[0].description == "Host \u202emaintenance\u0085 \u2028 bell\u0007"


def test_a_reschedule_is_told_once_in_the_diff(recorded: Store) -> None:
    done = setui("history", "show", "5", "--diff", data_dir=recorded.path.parent)
    assert done.returncode == 0, done.stderr
    changes = done.stdout.split("The document:")[0]
    moved = [line for line in changes.splitlines() if "NotBefore" in line]
    assert moved == ["      NotBefore: 2026-11-24 03:04:20 UTC -> 2026-11-24 03:06:00 UTC"], moved
    assert "rescheduled" in changes


def test_export_leaves_an_existing_file_alone_without_force(recorded: Store,
                                                            tmp_path: Path) -> None:
    target = tmp_path / "incident.toml"
    target.write_text("# someone's notes\n")
    done = setui("history", "export-scenario", str(target), data_dir=recorded.path.parent)
    assert done.returncode == 1
    assert "already exists; nothing was written (--force replaces it)" in done.stderr
    assert target.read_text() == "# someone's notes\n"
    done = setui("history", "export-scenario", str(target), "--force",
                 data_dir=recorded.path.parent)
    assert done.returncode == 0, done.stderr
    assert parse_scenario(target.read_text()).events
