"""`setui approve` end to end: a real `setui` process, the real emulator over loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from setui.emulator.scenario import load_scenario, parse_scenario
from setui.emulator.server import Emulator, ManualClock
from setui.store import Store
from tests.support.emulated import freeze_announced, posts

pytestmark = pytest.mark.slow  # starts processes: the slow tier (docs/testing.md)

EVENT_ID = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
SSH = "10.9.8.7 50022 10.0.0.4 22"
POSIX = os.name == "posix"


def setui(*args: str, data_dir: Path, stdin: str | None = None,
          preexec_fn: Callable[[], Any] | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SETUI_DATA_DIR=str(data_dir), SSH_CONNECTION=SSH)
    return subprocess.run(
        [sys.executable, "-m", "setui.cli", *args], input=stdin, capture_output=True,
        text=True, env=env, timeout=60, preexec_fn=preexec_fn,
        stdin=subprocess.DEVNULL if stdin is None else None)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def emulator(clock: ManualClock) -> Iterator[Emulator]:
    with freeze_announced(clock) as emu:
        yield emu


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def audit(data_dir: Path) -> list[Any]:
    with Store.open_dir(data_dir, readonly=True) as store:
        assert store.audit_log.verify().ok
        return store.audit_log.records(oldest_first=True)


def test_yes_approves_and_records_the_outcome(emulator: Emulator, data_dir: Path) -> None:
    done = setui("approve", "--endpoint", emulator.url, EVENT_ID, "--yes", "--allow-other-vms",
                 data_dir=data_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "Approve?" not in out
    assert "type         Freeze (Platform)" in out
    assert "status       Scheduled" in out
    [not_before] = [line for line in out.splitlines() if "NotBefore" in line]
    assert not_before.startswith("  NotBefore    2022-04-11 22:16:00 UTC")
    assert not_before.endswith(", T-14:59")  # its NotBefore is 899 s away
    assert "resources    WestNO_0 (this VM), WestNO_1" in out
    assert "WARNING: approving starts this event for 1 other VM too: WestNO_1" in out
    assert f"{EVENT_ID}: approved: the service answered HTTP 200" in out
    [post] = posts(emulator)
    assert post.path == "/metadata/scheduledevents"
    assert post.query["api-version"] == "2020-07-01"
    assert post.headers["metadata"] == "true"
    assert json.loads(post.body) == {"StartRequests": [{"EventId": EVENT_ID}]}
    attempt, outcome = audit(data_dir)
    assert attempt.action == "approve-attempt" and attempt.ssh_client == "10.9.8.7"
    assert attempt.event["Resources"] == ["WestNO_0", "WestNO_1"]
    assert attempt.incarnation == 2
    assert outcome.action == "approve-outcome" and outcome.status == 200
    assert outcome.attempt_seq == attempt.seq and outcome.latency_ms is not None
    assert f"(audit record {outcome.seq})" in out
    with Store.open_dir(data_dir, readonly=True) as store:  # what it saw is history too
        assert [r.incarnation for r in store.history.incarnations()] == [2]


def test_a_witness_that_cannot_be_written_is_a_warning_not_a_failure(
        emulator: Emulator, data_dir: Path) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "setui.db.audit-head").mkdir()  # nothing can replace a directory with a file
    done = setui("approve", "--endpoint", emulator.url, EVENT_ID, "--yes", "--allow-other-vms",
                 data_dir=data_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{EVENT_ID}: approved" in done.stdout
    assert "setui approve: warning: " in done.stderr and "witness" in done.stderr
    assert "Traceback" not in done.stderr
    assert [r.action for r in audit(data_dir)] == ["approve-attempt", "approve-outcome"]


@pytest.mark.parametrize("answer, approved", [("yes\n", True), ("YES\n", True), ("y\n", False),
                                              ("n\n", False), (None, False)])
def test_the_prompt(emulator: Emulator, data_dir: Path, answer: str | None,
                    approved: bool) -> None:
    """The Freeze also starts for WestNO_1: only the word "yes" approves it."""
    done = setui("approve", "--endpoint", emulator.url, EVENT_ID, data_dir=data_dir,
                 stdin=answer)
    assert "Approve? Type yes to approve:" in done.stdout
    records = audit(data_dir)
    if approved:
        assert done.returncode == 0, done.stdout + done.stderr
        assert len(posts(emulator)) == 1
        assert [r.action for r in records] == ["approve-attempt", "approve-outcome"]
    else:
        assert done.returncode == 3, done.stdout + done.stderr  # declined by the operator
        assert "Cancelled: nothing was approved." in done.stdout
        assert posts(emulator) == []
        assert [(r.action, r.event_id) for r in records] == [("dismissed", EVENT_ID)]


def test_an_unknown_id_is_refused_and_not_recorded(emulator: Emulator, data_dir: Path) -> None:
    """A typo is not an approval attempt: exit 1, nothing posted, nothing in the log."""
    done = setui("approve", "--endpoint", emulator.url, "C7061BAD", data_dir=data_dir,
                 stdin="yes\n")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Approve?" not in done.stdout  # nothing to confirm
    assert "no event with an EventId starting 'C7061BAD'" in done.stderr
    assert f"did you mean {EVENT_ID}? Nothing was approved;" in done.stderr
    assert posts(emulator) == []
    assert audit(data_dir) == []


def test_started_event_is_refused(emulator: Emulator, clock: ManualClock,
                                  data_dir: Path) -> None:
    clock.advance(15 * 60)  # NotBefore passed: Azure started it
    done = setui("approve", "--endpoint", emulator.url, EVENT_ID, "--yes", data_dir=data_dir)
    assert done.returncode == 1
    assert "status       Started" in done.stdout
    assert "has already started" in done.stdout
    assert posts(emulator) == []
    assert [r.action for r in audit(data_dir)] == ["refused"]


def test_one_unknown_among_several_sends_nothing(emulator: Emulator, data_dir: Path) -> None:
    done = setui("approve", "--endpoint", emulator.url, EVENT_ID, "NOPE", "--yes",
                 "--allow-other-vms", data_dir=data_dir)
    assert done.returncode == 1  # what NOPE meant is unknown: nothing is approved
    assert "'NOPE' is too short to name an event" in done.stderr
    assert posts(emulator) == []
    assert audit(data_dir) == []


def test_unwritable_data_dir_refuses_and_posts_nothing(emulator: Emulator,
                                                      tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the data directory should be")
    done = setui("approve", "--endpoint", emulator.url, EVENT_ID, "--yes",
                 data_dir=blocker / "data")
    assert done.returncode == 1
    assert "REFUSED: the audit log cannot be written" in done.stdout
    assert "cannot create the history and audit log" in done.stdout
    assert "setui approves nothing it cannot record" in done.stdout
    assert posts(emulator) == []


@pytest.mark.skipif(not POSIX, reason="RLIMIT_FSIZE is POSIX")
def test_full_disk_refuses_and_posts_nothing(emulator: Emulator, data_dir: Path) -> None:
    """The kernel refuses every write past 1 kB (EFBIG), as a full disk refuses them."""
    import resource

    Store.open_dir(data_dir).close()

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))

    done = setui("approve", "--endpoint", emulator.url, EVENT_ID, "--yes", data_dir=data_dir,
                 preexec_fn=small_files)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "REFUSED: the audit log cannot be written" in done.stdout
    assert "disk may be full" in done.stdout
    assert posts(emulator) == []
    assert audit(data_dir) == []


def test_document_changed_while_deciding_is_refused(emulator: Emulator, clock: ManualClock,
                                                    data_dir: Path) -> None:
    """What the operator confirmed is what gets approved, or nothing is."""
    Store.open_dir(data_dir).close()
    env = dict(os.environ, SETUI_DATA_DIR=str(data_dir))
    proc = subprocess.Popen([sys.executable, "-m", "setui.cli", "approve", "--endpoint",
                             emulator.url, EVENT_ID], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    shown = ""
    while not shown.endswith("Type yes to approve: "):
        char = proc.stdout.read(1)
        assert char, shown + proc.stderr.read()
        shown += char
    clock.advance(15 * 60)  # it starts while the operator reads
    rest, err = proc.communicate("yes\n", timeout=30)
    out = shown + rest
    assert proc.returncode == 1, out + err
    assert "has started since it was shown (incarnation 2 -> 3)" in out
    assert "status: Scheduled -> Started" in out
    assert "The events above were not approved as confirmed" in out
    assert "has already started" in out  # shown again as it is now: nothing to ask
    assert posts(emulator) == []
    assert [r.action for r in audit(data_dir)] == ["refused", "refused"]


HOSTILE = """
name = "hostile"
vm_name = "vm-0"
[[events]]
id = "EVIL\\u001b[2J"
type = "Reboot"
at = 0
notice = "15m"
resources = ["vm-0", "\\u001b]0;owned\\u0007"]
description = "\\u001b[31mred\\u202e text"
"""


def test_network_text_never_reaches_the_terminal_raw(data_dir: Path) -> None:
    clock = ManualClock()
    scenario = parse_scenario(HOSTILE, source="hostile.toml", default_name="hostile")
    with Emulator(scenario, clock=clock) as emulator:
        clock.advance(1)
        done = setui("approve", "--endpoint", emulator.url, "EVIL\x1b[2J", "--yes",
                     "--allow-other-vms", data_dir=data_dir)
        assert done.returncode == 0, done.stdout + done.stderr
        assert len(posts(emulator)) == 1
    for text in (done.stdout, done.stderr):
        assert not any(c in text for c in "\x1b\x07\u202e")
    assert "EVIL\\x1b[2J" in done.stdout
    assert "\\x1b[31mred\\u202e text" in done.stdout
    assert "other VM too: \\x1b]0;owned\\x07" in done.stdout


@pytest.mark.parametrize("args", [["approve"], ["approve", ""], ["approve", "--endpoint",
                                                                  "ftp://x", "A"]])
def test_usage_errors_exit_2(args: list[str], data_dir: Path) -> None:
    done = setui(*args, data_dir=data_dir)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr


def test_no_answer_from_the_service_is_a_refusal(data_dir: Path) -> None:
    emulator = Emulator(load_scenario("live-migration"), clock=ManualClock())
    url = emulator.start()
    emulator.stop()  # nothing listens there any more
    done = setui("approve", "--endpoint", url, EVENT_ID, "--yes", data_dir=data_dir)
    assert done.returncode == 1
    assert "cannot read the events document" in done.stderr
    assert "no current events document" in done.stdout
    assert [r.action for r in audit(data_dir)] == ["refused"]

