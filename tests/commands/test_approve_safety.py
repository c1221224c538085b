"""`setui approve` approves exactly what was shown, once, and only what concerns this VM
unless told: real `setui` processes against the emulator over loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from setui.emulator.scenario import load_scenario
from setui.emulator.server import Emulator, ManualClock
from setui.store import Store
from tests.support.emulated import posts

pytestmark = pytest.mark.slow  # starts processes: the slow tier (docs/testing.md)

MINE = "F02C2EDE-3B1C-4D5E-9F00-0123456789AB"
OTHER = "F02C2EDF-0000-4000-8000-00000000BEEF"
FAR = "Mon, 01 Jan 2035 00:00:00 GMT"


def event(event_id: str, resources: list[str], *, kind: str = "Freeze",
          status: str = "Scheduled") -> dict[str, Any]:
    return {"EventId": event_id, "EventType": kind, "ResourceType": "VirtualMachine",
            "Resources": resources, "EventStatus": status, "NotBefore": FAR,
            "Description": "maintenance", "EventSource": "Platform", "DurationInSeconds": 5}


def document(incarnation: int, *events: dict[str, Any]) -> dict[str, Any]:
    return {"DocumentIncarnation": incarnation, "Events": list(events)}


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with Emulator(load_scenario("quiet"), clock=ManualClock()) as emu:
        emu.pin_document(document(7, event(MINE, ["web-0"]), event(OTHER, ["web-0", "web-1"])))
        yield emu


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def command(emulator: Emulator, *args: str) -> list[str]:
    return [sys.executable, "-m", "setui.cli", *args, "--endpoint", emulator.url,
            "--vm-name", "web-0"]


def setui(emulator: Emulator, *args: str, data_dir: Path,
          stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command(emulator, *args), input=stdin, capture_output=True,
                          text=True, timeout=60, env=dict(os.environ,
                                                          SETUI_DATA_DIR=str(data_dir)),
                          stdin=subprocess.DEVNULL if stdin is None else None)


def posted_ids(emulator: Emulator) -> list[str]:
    return [s["EventId"] for r in posts(emulator) for s in json.loads(r.body)["StartRequests"]]


def audit(data_dir: Path) -> list[Any]:
    with Store.open_dir(data_dir, readonly=True) as store:
        assert store.audit_log.verify().ok
        return store.audit_log.records(oldest_first=True)


def test_yes_alone_refuses_an_event_of_other_vms(emulator: Emulator, data_dir: Path) -> None:
    done = setui(emulator, "approve", OTHER, "--yes", data_dir=data_dir)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "REFUSED: it also starts for 1 other VM: web-1" in done.stdout
    assert "--allow-other-vms" in done.stdout
    assert posts(emulator) == []
    assert [r.action for r in audit(data_dir)] == ["refused"]  # a real event: recorded
    done = setui(emulator, "approve", OTHER, "--yes", "--allow-other-vms", data_dir=data_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert posted_ids(emulator) == [OTHER]


def test_yes_alone_refuses_an_event_that_does_not_list_this_vm(emulator: Emulator,
                                                               data_dir: Path) -> None:
    emulator.pin_document(document(8, event(MINE, ["web-1"])))
    done = setui(emulator, "approve", MINE, "--yes", data_dir=data_dir)
    assert done.returncode == 1 and "it does not list web-0" in done.stdout
    assert posts(emulator) == []


@pytest.mark.parametrize("args, stdin", [(["--yes", "--allow-other-vms"], None),
                                         ([], "yes\n")])
def test_a_repeated_event_id_is_never_posted(emulator: Emulator, data_dir: Path,
                                             args: list[str], stdin: str | None) -> None:
    """A Freeze of this VM and a Redeploy of three under one id: which would start?"""
    emulator.pin_document(document(9, event(MINE, ["web-0"]),
                                   event(MINE, ["web-0", "web-1", "web-2"], kind="Redeploy")))
    done = setui(emulator, "approve", MINE, *args, data_dir=data_dir, stdin=stdin)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "appears 2 times in the document" in done.stdout
    assert posts(emulator) == []
    assert [r.action for r in audit(data_dir)] == ["refused"]


def test_six_concurrent_approvals_post_at_most_once(emulator: Emulator,
                                                    data_dir: Path) -> None:
    Store.open_dir(data_dir).close()
    env = dict(os.environ, SETUI_DATA_DIR=str(data_dir))
    procs = [subprocess.Popen(command(emulator, "approve", MINE, "--yes"), env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              stdin=subprocess.DEVNULL) for _ in range(6)]
    outputs = [p.communicate(timeout=60) for p in procs]
    results = [(p.returncode, out, err) for p, (out, err) in zip(procs, outputs, strict=True)]
    approved = [r for r in results if r[0] == 0]
    assert len(posts(emulator)) <= 1 and len(approved) == len(posts(emulator)) == 1, results
    for code, out, _err in results:
        if code != 0:
            assert "already approved by" in out or "may already have been sent by" in out, out
    records = audit(data_dir)
    assert [r.action for r in records].count("approve-attempt") == 1
    assert [r.action for r in records].count("refused") == 5


def test_a_second_approval_is_refused_unless_again(emulator: Emulator, data_dir: Path) -> None:
    assert setui(emulator, "approve", MINE, "--yes", data_dir=data_dir).returncode == 0
    done = setui(emulator, "approve", MINE, "--yes", data_dir=data_dir)
    assert done.returncode == 1
    outcome = next(r for r in audit(data_dir) if r.action == "approve-outcome")
    assert f"already approved by {outcome.user} on {outcome.host} at " in done.stdout
    assert f"(audit record {outcome.seq})" in done.stdout
    assert len(posts(emulator)) == 1
    done = setui(emulator, "approve", MINE, "--yes", "--again", data_dir=data_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(posts(emulator)) == 2


def test_interactively_a_second_approval_asks_again(emulator: Emulator, data_dir: Path) -> None:
    assert setui(emulator, "approve", MINE, "--yes", data_dir=data_dir).returncode == 0
    done = setui(emulator, "approve", MINE, data_dir=data_dir, stdin="y\n")
    assert "NOTE: already approved by" in done.stdout and "Approve again? [y/N]" in done.stdout
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(posts(emulator)) == 2


def test_a_prefix_posts_the_full_id_and_events_lists_it(emulator: Emulator,
                                                        data_dir: Path) -> None:
    done = setui(emulator, "approve", MINE[:8].lower(), "--yes", data_dir=data_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert posted_ids(emulator) == [MINE]
    listed = setui(emulator, "events", "--json", data_dir=data_dir)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.isascii()
    data = json.loads(listed.stdout)
    assert data["incarnation"] == 7 and data["vm_name"] == "web-0"
    first = data["events"][0]
    assert first["event_id"] == MINE and first["this_vm"] is True
    assert first["approved_by"] and first["approved_record"]
    assert sorted(first) == sorted([
        "event_id", "event_type", "status", "not_before", "seconds_to_not_before", "this_vm",
        "resources", "source", "duration", "description", "approved_by", "approved_at",
        "approved_record", "approval_outcome"])
    assert first["approval_outcome"] == "approved"
    table = setui(emulator, "events", data_dir=data_dir)
    assert table.returncode == 0 and MINE in table.stdout and OTHER in table.stdout
    assert "web-0 (this VM), web-1" in table.stdout


def test_an_ambiguous_prefix_is_refused_with_did_you_mean(emulator: Emulator,
                                                          data_dir: Path) -> None:
    done = setui(emulator, "approve", "F02C2ED", "--yes", data_dir=data_dir)
    assert done.returncode == 1
    assert "is the start of 2 EventIds" in done.stderr
    assert MINE in done.stderr and OTHER in done.stderr
    assert posts(emulator) == []
    assert not (data_dir / "setui.db").exists() or audit(data_dir) == []


def test_the_preview_api_posts_the_confirmed_incarnation(emulator: Emulator,
                                                         data_dir: Path) -> None:
    done = setui(emulator, "approve", MINE, "--yes", "--api-version", "2017-03-01",
                 data_dir=data_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    [post] = posts(emulator)
    assert json.loads(post.body) == {"DocumentIncarnation": 7,
                                     "StartRequests": [{"EventId": MINE}]}


def test_a_change_under_the_prompt_is_shown_and_asked_again(emulator: Emulator,
                                                            data_dir: Path) -> None:
    """The Freeze of this VM becomes, under the same id, a Redeploy of eleven VMs."""
    Store.open_dir(data_dir).close()
    env = dict(os.environ, SETUI_DATA_DIR=str(data_dir))
    proc = subprocess.Popen(command(emulator, "approve", MINE), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None and proc.stdin is not None
    shown = read_until(proc, "[y/N] ")
    eleven = ["web-0", *[f"web-{i}" for i in range(1, 11)]]
    emulator.pin_document(document(8, event(MINE, eleven, kind="Redeploy")))
    proc.stdin.write("y\n")
    proc.stdin.flush()
    shown += read_until(proc, "Type yes to approve: ")
    assert "type: Freeze -> Redeploy" in shown
    assert "resources: web-0 (1 VM) -> web-0, web-1" in shown
    assert posts(emulator) == []  # nothing was sent for what the operator did not see
    rest, err = proc.communicate("n\n", timeout=30)
    assert proc.returncode == 3, shown + rest + err
    assert posts(emulator) == []
    assert [r.action for r in audit(data_dir)] == ["refused", "dismissed"]


def read_until(proc: subprocess.Popen[str], end: str) -> str:
    assert proc.stdout is not None
    text = ""
    while not text.endswith(end):
        char = proc.stdout.read(1)
        assert char, text
        text += char
    return text


def test_events_says_when_the_document_cannot_be_read(data_dir: Path) -> None:
    emulator = Emulator(load_scenario("quiet"), clock=ManualClock())
    url = emulator.start()
    emulator.stop()  # nothing listens there any more
    done = subprocess.run([sys.executable, "-m", "setui.cli", "events", "--endpoint", url,
                           "--vm-name", "web-0"], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, SETUI_DATA_DIR=str(data_dir)),
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    assert "setui events: cannot read the events document" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
