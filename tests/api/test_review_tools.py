"""The review tools tell the whole story: a real agent on the emulator with a policy that
prepares, approves after it and recovers; a hold set by one real user through the API
and released by another, an approval refused to a third. Then ``setui report`` (Markdown
and JSON), ``setui history --event`` and the replay (the lives at the record's end and
the details screen drawn from them) each tell the hold (who, from, to), each hook run
(step, start, end, exit) and the refusal: read through the agent's API, and from the
store with no agent running."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from setui.api.client import AgentClient
from setui.core.model import parse_iso
from setui.core.timefmt import stamp
from setui.emulator.server import Emulator
from setui.monitor.replay import load_recording
from setui.store import Store
from setui.store.agent import HOLD, RELEASE, HookRun
from setui.store.records import REFUSED, from_db_time
from setui.ui.screens.details import describe_event
from setui.ui.screens.replay import approval_notes
from tests.support.accounts import Account
from tests.support.api_helpers import EVENT_ID, agent_env, run_as, start_agent, stop
from tests.support.children import SETUI, wait_until
from tests.support.waiting import PATIENCE

pytestmark = pytest.mark.slow

# Each run notes itself; the prepare waits for the test's word.
HOOK = """#!/bin/sh
touch "$HOOK_DIR/$SETUI_HOOK-running"
if [ "$SETUI_HOOK" = prepare ]; then
  while [ ! -e "$HOOK_DIR/go" ]; do sleep 0.05; done
  exit 0
fi
exit 3
"""
POLICY = """
[[rule]]
name = "drain"
event_type = "Reboot"
prepare = "{hook}"
approve = "after-prepare"
recover = "{hook}"
"""


def _setui(base: Path, *args: str, attached: bool) -> str:
    env = agent_env(base)
    if attached:  # its own data directory holds nothing: what it shows came through the API
        env["SETUI_DATA_DIR"] = str(base / "nothing-here")
    else:
        args = (*args, "--standalone")
    done = subprocess.run([*SETUI, *args], capture_output=True, text=True, timeout=120,
                          env=env, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    return done.stdout


def _runs(base: Path) -> list[HookRun]:
    """The hook runs in the agent's store, read with SQL of the test's own."""
    with Store.open_dir(base / "data", readonly=True) as store, \
            store.database.using("read the hook runs") as conn:
        rows = conn.execute(
            "SELECT id, event_id, step, rule, command, started, ended, exit_status, "
            "timed_out, output FROM agent_hook_runs WHERE event_id = ? ORDER BY id",
            (EVENT_ID,)).fetchall()
    return [HookRun(r[0], r[1], r[2], r[3], r[4], from_db_time(r[5]),
                    from_db_time(r[6]) if r[6] else None, r[7], bool(r[8]), r[9])
            for r in rows]


def _time(text: object) -> datetime:
    moment = parse_iso(str(text))
    assert moment is not None, text
    return moment


def _check(base: Path, *, attached: bool) -> None:
    """Every review tool, through the agent (``attached``) or from the store."""
    with Store.open_dir(base / "data", readonly=True) as store:
        audit = store.audit_log.records(oldest_first=True)
    runs = _runs(base)
    hold = next(r for r in audit if r.action == HOLD)
    release = next(r for r in audit if r.action == RELEASE)
    refusal = next(r for r in audit if r.action == REFUSED)
    prepare = next(r for r in runs if r.step == "prepare")
    recover = next(r for r in runs if r.step == "recover")
    assert prepare.ended is not None and recover.ended is not None

    # The report, as JSON.
    report = json.loads(_setui(base, "report", "--format", "json", attached=attached))
    [event] = [e for e in report["events"] if e["event_id"] == EVENT_ID]
    assert [(h["holder"], _time(h["from"]), _time(h["to"]), h["released_by"])
            for h in event["holds"]] == [
        ("sapi-alice", hold.time, release.time, "sapi-bob")], event["holds"]
    assert [(r["step"], _time(r["start"]), _time(r["end"]), r["exit_status"])
            for r in event["hook_runs"]] == [
        ("prepare", prepare.started, prepare.ended, 0),
        ("recover", recover.started, recover.ended, 3)], event["hook_runs"]
    assert [(r["user"], _time(r["time"])) for r in event["refusals"]] == [
        ("sapi-carol", refusal.time)], event["refusals"]

    # The report, as Markdown.
    text = _setui(base, "report", attached=attached)
    held = (f"held by sapi-alice from {stamp(hold.time, local=False)} to "
            f"{stamp(release.time, local=False)}")
    assert held in text and "released by sapi-bob" in text, text
    for run, how in ((prepare, "exit 0"), (recover, "exit 3")):
        assert (f"{run.step} hook (rule drain) ran from {stamp(run.started, local=False)} "
                f"to {stamp(run.ended, local=False)}") in text, text
        assert how in text
    assert "**Refused:** approval by sapi-carol" in text, text

    # history --event, as lines and as JSON.
    lines = _setui(base, "history", "--event", EVENT_ID, attached=attached)
    assert held in lines and "operator sapi-bob" in lines, lines
    assert "prepare hook (rule drain) ran from" in lines and "exit 3" in lines, lines
    assert "refused by setui" in lines and "sapi-carol" in lines, lines
    story = [json.loads(line) for line in
             _setui(base, "history", "--event", EVENT_ID, "--json", attached=attached)
             .splitlines()]
    hooks = [(s["kind"], _time(s["time"]), s["words"]) for s in story
             if s["kind"] == "hook-run"]
    assert [(kind, at) for kind, at, _ in hooks] == [
        ("hook-run", prepare.started), ("hook-run", recover.started)], story
    assert "exit 0" in hooks[0][2] and "exit 3" in hooks[1][2]
    [holding] = [s for s in story if s["kind"] == HOLD]
    assert held in holding["words"] and holding["audit_seq"] == hold.seq, holding


def _replay(base: Path, record: Any) -> None:
    """The replay at the record's end: the event's life holds the hold and each hook run,
    the refusal is among its approval notes, and its details screen shows them."""
    recording = load_recording(record)
    assert recording is not None
    state = recording.state_at(recording.end)
    life = state.lives[EVENT_ID]
    notes = [words for _, words in life.notes]
    assert any(w.startswith("held by sapi-alice from") and "released by sapi-bob" in w
               for w in notes), notes
    assert [w.split(" hook")[0] for w in notes if " hook (rule drain) ran from" in w] == [
        "prepare", "recover"], notes
    refused = [n for n in approval_notes(recording.moment(recording.end).audit) if n.refused]
    assert [n.user for n in refused] == ["sapi-carol"], refused
    gone = state.gone[0].event
    shown = describe_event(gone, vm_name="app-vm-1", now=recording.end, present=False,
                           life=life, story=record.event_story(EVENT_ID), width=200).plain
    assert "held by sapi-alice from" in shown and "recover hook (rule drain) ran" in shown
    assert "refused by setui" in shown, shown


def test_report_history_and_replay_tell_holds_hook_runs_and_refusals(
        base: Path, emulator: Emulator, accounts: dict[str, Account]) -> None:
    hook = base / "hook.sh"
    hook.write_text(HOOK)
    hook.chmod(0o755)
    policy = base / "policy.toml"
    policy.write_text(POLICY.format(hook=hook))
    proc, _ = start_agent(emulator.url, base, "--policy", str(policy))
    try:
        wait_until(lambda: (base / "sync" / "prepare-running").exists(), PATIENCE,
                   "the prepare hook to run")
        held = run_as(accounts["alice"], base, "hold", {"id": EVENT_ID})
        assert held["held"] is True, held
        carol = run_as(accounts["carol"], base, "approve", {"ids": [EVENT_ID]})
        assert carol["error"]["code"] == "forbidden", carol
        (base / "sync" / "go").touch()
        wait_until(lambda: any(r.step == "prepare" and r.ended is not None
                               for r in _runs(base)), PATIENCE, "the prepare hook to end")
        released = run_as(accounts["bob"], base, "release", {"id": EVENT_ID})
        assert released["held"] is False, released
        wait_until(lambda: any(r.step == "recover" and r.ended is not None
                               for r in _runs(base)), 2 * PATIENCE,
                   "the event to end and the recover hook to run")
        _check(base, attached=True)
        with AgentClient.connect(base / "run" / "api.sock") as client:
            _replay(base, client)
    finally:
        assert stop(proc) == 0
    _check(base, attached=False)
    with Store.open_dir(base / "data", readonly=True) as store:
        _replay(base, store.record)
