"""The store under stress: locked, corrupted, full. The dashboard keeps showing live
events, says what is wrong, and refuses approvals it cannot record; watch says it on
stderr and keeps printing."""

from __future__ import annotations

import os
import resource
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from setui.session import open_store
from setui.settings.config import Config
from setui.ui.screens.confirm import ConfirmationModal
from setui.ui.widgets.events import EventsTable
from setui.ui.widgets.status import StatusBar
from tests.support.children import SETUI

WIDE = (140, 40)
DEADLINE = 30.0


def status_text(d: Any) -> str:
    return d.app.main_screen.query_one(StatusBar).plain()


async def approve_and_expect_refusal(d: Any, pilot: Any) -> None:
    d.app.confirm_guard = 0.0
    table = d.app.main_screen.query_one(EventsTable)
    scheduled = [e.event_id for e in d.app.session.document.events if e.is_scheduled]
    assert scheduled and table.select_key(scheduled[0])
    await pilot.pause()
    await pilot.press("a")
    await d.wait_for(pilot, lambda: isinstance(d.app.screen, ConfirmationModal)
                     or any("Not approved" in n for n in d.notices()), timeout=DEADLINE)
    if isinstance(d.app.screen, ConfirmationModal):
        await d.wait_for(pilot, lambda: d.app.screen.is_mounted, timeout=DEADLINE)
        await pilot.press("y")
    await d.wait_for(pilot, lambda: any("Not approved" in n for n in d.notices()),
                     timeout=DEADLINE)
    refusal = [n for n in d.notices() if "Not approved" in n][-1]
    assert "audit log" in refusal, refusal
    assert not d.posts()


async def test_a_locked_database(make_dashboard: Any) -> None:
    d = make_dashboard("busy", at=300)
    async with d.app.run_test(size=WIDE) as pilot:
        table = d.app.main_screen.query_one(EventsTable)
        await d.wait_for(pilot, lambda: bool(table.keys), timeout=DEADLINE)
        d.store.timeout = 0.2  # the busy wait is SQLite's; keep the test short
        d.store.database._conn.execute("PRAGMA busy_timeout = 200")
        other = sqlite3.connect(d.store.path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            d.app.session.document = None  # the next answer is news to record
            d.app.poller.tracker.__init__()
            await d.advance(pilot, 10)
            await d.wait_for(pilot, lambda: "NOT recorded" in status_text(d),
                             timeout=DEADLINE)
            # The status line is cut at the path; the notification has the reason whole.
            said = [n for n in d.notices() if "Cannot record the history" in n]
            assert said and ("locked" in said[0] or "busy" in said[0]), said
            assert table.keys  # live events still shown
            await approve_and_expect_refusal(d, pilot)
        finally:
            other.execute("ROLLBACK")
            other.close()


async def test_a_corrupted_database(make_dashboard: Any, tmp_path: Path) -> None:
    data = tmp_path / "corrupt"
    opened, _ = open_store(Config(data_dir=data))
    assert opened is not None
    opened.close()
    with open(data / "setui.db", "r+b") as db:
        db.write(b"this is not SQLite at all, sorry" * 4)
    store, problem = open_store(Config(data_dir=data))
    assert store is None and problem
    d = make_dashboard("busy", at=300, store=False)
    d.app.store_problem = d.app.approver.store_problem = problem
    async with d.app.run_test(size=WIDE) as pilot:
        table = d.app.main_screen.query_one(EventsTable)
        await d.wait_for(pilot, lambda: bool(table.keys), timeout=DEADLINE)
        assert "NOT recorded" in status_text(d)
        assert any(str(data / "setui.db")[:20] in n or "database" in n for n in d.notices())
        await approve_and_expect_refusal(d, pilot)


def _full_disk() -> None:
    """In the child: writes past 192 KB fail with EFBIG instead of killing it (room for
    the schema, 128 KB, not for the 230 KB document in the WAL)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (192 * 1024, 192 * 1024))


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="RLIMIT_FSIZE is POSIX")
def test_watch_on_a_full_disk_says_so_and_keeps_watching(tmp_path: Path) -> None:
    from setui.emulator.scenario import load_scenario
    from setui.emulator.server import Emulator

    env = dict(os.environ, SETUI_DATA_DIR=str(tmp_path / "data"), PYTHONUNBUFFERED="1",
               PYTHONIOENCODING="utf-8")
    # One document bigger than the disk has room for (and under the 256 KB a document is
    # kept whole up to: a bigger one is kept as a summary).
    big = "x" * 230_000
    path = tmp_path / "big.json"
    path.write_text('{"vm_name": "vm-0", "events": [{"type": "Reboot", "notice": 900, '
                    f'"description": "{big}"}}]}}', encoding="utf-8")
    with Emulator(load_scenario(str(path))) as emulator:
        proc = subprocess.Popen([*SETUI, "watch", "--endpoint",
                                 emulator.url, "--interval", "0.2", "--vm-name", "vm-0"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                preexec_fn=_full_disk, text=True)
        assert proc.stdout is not None
        # enabling, live, then the event: watch goes on although nothing is recorded
        line = "".join(proc.stdout.readline() for _ in range(3))
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    assert " appeared " in line, (line, err[-2000:])
    assert "Traceback" not in err
    assert "cannot record the history" in err and "disk may be full" in err, err


@pytest.mark.slow
def test_watch_in_a_read_only_data_dir_says_so_and_keeps_watching(
        unwritable: tuple[Path, Any], tmp_path: Path) -> None:
    from setui.emulator.scenario import load_scenario
    from setui.emulator.server import Emulator
    from tests.support.permissions import lock_up

    data, how = unwritable
    data.mkdir()
    lock_up(data, how)
    env = dict(os.environ, SETUI_DATA_DIR=str(data), PYTHONUNBUFFERED="1",
               PYTHONIOENCODING="utf-8")
    with Emulator(load_scenario("live-migration")) as emulator:
        proc = subprocess.Popen([*SETUI, "watch", "--endpoint",
                                 emulator.url, "--interval", "0.2"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                preexec_fn=how, text=True)
        assert proc.stdout is not None
        lines = "".join(proc.stdout.readline() for _ in range(2))  # enabling, then live
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    assert "live" in lines, (lines, err[-2000:])
    assert proc.returncode == 0, err[-2000:]
    assert "Traceback" not in err
    assert "not recording history" in err and "Permission denied" in err, err
    assert str(data) in err  # where, so the operator can fix it


@pytest.mark.slow
def test_approve_with_a_read_only_data_dir_is_refused_and_nothing_is_sent(
        unwritable: tuple[Path, Any], tmp_path: Path) -> None:
    from setui.emulator.scenario import load_scenario
    from setui.emulator.server import Emulator
    from tests.support.permissions import lock_up

    data, how = unwritable
    data.mkdir()
    lock_up(data, how)
    env = dict(os.environ, SETUI_DATA_DIR=str(data), PYTHONIOENCODING="utf-8")
    scenario = tmp_path / "one.json"
    scenario.write_text('{"vm_name": "vm-0", "events": [{"type": "Reboot", "notice": 900, '
                        '"resources": ["vm-0"]}]}', encoding="utf-8")
    with Emulator(load_scenario(str(scenario))) as emulator:
        import httpx

        document = httpx.get(f"{emulator.url}/metadata/scheduledevents?api-version=2020-07-01",
                             headers={"Metadata": "true"}, trust_env=False).json()
        event_id = document["Events"][0]["EventId"]
        done = subprocess.run([sys.executable, "-m", "setui.cli", "approve", event_id,
                               "--yes", "--endpoint", emulator.url],
                              capture_output=True, text=True, env=env, preexec_fn=how,
                              timeout=60)
        posts = [r for r in emulator.requests if r.method == "POST"]
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert "audit" in (done.stdout + done.stderr)
    assert posts == []
