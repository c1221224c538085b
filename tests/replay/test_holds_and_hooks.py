"""Holds and hook runs in the review tools, from a recorded incident (tests/replay) with a
hold and hook runs written as the agent writes them (store.agent.AgentLog): the report's
model and both its forms, the replay's lives at a moment, and the event's story. What a
report or a replay up to a moment says is what was known then: a hold released later is
not released yet, a hook that ended later is running."""

from __future__ import annotations

from datetime import timedelta

from setui.commands.report import markdown, report_json
from setui.monitor.replay import load_recording
from setui.monitor.report import build_report
from setui.store import Store
from setui.store.agent import HOLD, RELEASE, AgentLog, holds_of
from setui.store.records import AuditEntry, AuditRecord
from tests.support.recording import ENDPOINT, START

REBOOT = "A1B2C3D4-0000-4000-8000-000000000001"


def _agent_work(store: Store) -> None:
    """carol holds the Reboot at 00:40 and dave releases it at 01:20; its prepare runs
    from 00:45 to 00:47 (exit 0), its recover from 02:00 and times out at 02:30."""
    log = AgentLog(store, ENDPOINT)
    for action, second, user in ((HOLD, 40, "carol"), (RELEASE, 80, "dave")):
        log.set_hold(REBOOT.lower(), held=action == HOLD, entry=AuditEntry(
            action=action, time=START + timedelta(seconds=second), user=user, host="vm-0",
            endpoint=ENDPOINT, event_id=REBOOT.lower()))
    for step, begin, end, status, timed_out in (("prepare", 45, 47, 0, False),
                                                ("recover", 120, 150, None, True)):
        run = log.hook_started(REBOOT, step, rule="drain", command=f"/bin/{step}",
                               at=START + timedelta(seconds=begin))
        log.hook_ended(run, at=START + timedelta(seconds=end), exit_status=status,
                       timed_out=timed_out, output="x" * 100)


def test_the_report_tells_each_hold_and_hook_run(recorded: Store) -> None:
    _agent_work(recorded)
    recording = load_recording(recorded.record)
    assert recording is not None
    report = build_report(recording)
    [event] = [e for e in report.events if e.event_id == REBOOT]
    [hold] = event.holds
    assert (hold.holder, hold.since, hold.until, hold.released_by) == (
        "carol", START + timedelta(seconds=40), START + timedelta(seconds=80), "dave")
    assert [(r.step, r.exit_status, r.timed_out, r.output) for r in event.hook_runs] == [
        ("prepare", 0, False, ""), ("recover", None, True, "")]

    text = markdown(report)
    assert ("- **Held:** held by carol from 2026-11-24 03:00:40 UTC to 2026-11-24 03:01:20 "
            "UTC (40s), released by dave") in text
    assert ("- **Hook run:** prepare hook (rule drain) ran from 2026-11-24 03:00:45 UTC to "
            "2026-11-24 03:00:47 UTC (2s): exit 0") in text
    assert "recover hook (rule drain) ran from 2026-11-24 03:02:00 UTC" in text
    assert "(30s): timed out" in text

    [reboot] = [e for e in report_json(report)["events"] if e["event_id"] == REBOOT]
    assert reboot["holds"] == [{
        "holder": "carol", "from": "2026-11-24T03:00:40Z", "to": "2026-11-24T03:01:20Z",
        "released_by": "dave", "audit_seq": hold.seq, "release_audit_seq": hold.release_seq}]
    assert [(r["step"], r["start"], r["end"], r["exit_status"], r["timed_out"])
            for r in reboot["hook_runs"]] == [
        ("prepare", "2026-11-24T03:00:45Z", "2026-11-24T03:00:47Z", 0, False),
        ("recover", "2026-11-24T03:02:00Z", "2026-11-24T03:02:30Z", None, True)]


def test_a_report_to_a_moment_tells_what_was_known_then(recorded: Store) -> None:
    _agent_work(recorded)
    recording = load_recording(recorded.record)
    assert recording is not None
    report = build_report(recording, until=START + timedelta(seconds=46))
    [event] = [e for e in report.events if e.event_id == REBOOT]
    assert [(h.holder, h.until) for h in event.holds] == [("carol", None)]
    assert [(r.step, r.ended) for r in event.hook_runs] == [("prepare", None)]
    text = markdown(report)
    assert "held by carol since 2026-11-24 03:00:40 UTC: not released" in text
    assert "prepare hook (rule drain) started at 2026-11-24 03:00:45 UTC" in text


def test_the_replay_folds_holds_and_hook_runs_into_the_life_as_they_stood(
        recorded: Store) -> None:
    _agent_work(recorded)
    recording = load_recording(recorded.record)
    assert recording is not None
    during = [w for _, w in recording.state_at(START + timedelta(seconds=46))
              .lives[REBOOT].notes]
    assert "held by carol since 2026-11-24 03:00:40 UTC: not released" in during
    assert "prepare hook (rule drain) running since 2026-11-24 03:00:45 UTC" in during
    after = [w for _, w in recording.state_at(START + timedelta(seconds=200))
             .lives[REBOOT].notes]
    assert any(w.startswith("held by carol from") and w.endswith("released by dave")
               for w in after)
    assert [w.split(" hook")[0] for w in after if " hook (rule drain) ran" in w] == [
        "prepare", "recover"]


def test_the_story_tells_the_holder_and_each_hook_run(recorded: Store) -> None:
    _agent_work(recorded)
    story = recorded.record.event_story(REBOOT)
    [held] = [e for e in story if e.kind == HOLD]
    assert held.detail.endswith(": held by carol from 2026-11-24 03:00:40 UTC to "
                                "2026-11-24 03:01:20 UTC (40s), released by dave")
    [released] = [e for e in story if e.kind == RELEASE]
    assert released.detail.endswith("released the agent's automation for it "
                                    "(held by carol for 40s)")
    runs = [(e.time, e.source, e.detail) for e in story if e.kind == "hook-run"]
    assert [(at, source) for at, source, _ in runs] == [
        (START + timedelta(seconds=45), "agent"), (START + timedelta(seconds=120), "agent")]
    assert runs[0][2].endswith("(2s): exit 0") and runs[1][2].endswith("(30s): timed out")
    # In time order among the rest of its life.
    assert [e.time for e in story] == sorted(e.time for e in story)


def test_a_hold_set_again_while_held_is_the_first_holders() -> None:
    records = [AuditEntry(action, START + timedelta(seconds=s), user, "vm-0", ENDPOINT,
                          event_id=event_id) for action, s, user, event_id in (
        (RELEASE, 1, "nobody", "E1"), (HOLD, 2, "carol", "E1"), (HOLD, 3, "erin", "e1"),
        (HOLD, 4, "erin", "E2"), (RELEASE, 5, "dave", "E1"))]
    stored = [_as_record(entry, seq) for seq, entry in enumerate(records, 1)]
    assert [(h.event_id, h.holder, h.released_by, h.seq, h.release_seq)
            for h in holds_of(stored)] == [("E1", "carol", "dave", 2, 5),
                                          ("E2", "erin", None, 4, None)]


def _as_record(entry: AuditEntry, seq: int) -> AuditRecord:
    return AuditRecord(seq=seq, time=entry.time, action=entry.action, user=entry.user,
                       ssh_client=None, host=entry.host, endpoint=entry.endpoint,
                       event_id=entry.event_id, event=None, incarnation=None,
                       attempt_seq=None, status=None, error=None, latency_ms=None,
                       details={}, prev_hash="", hash="")
