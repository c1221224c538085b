"""A dry run runs the real run's checks (the approver's refusals included) and says what
would be refused and why, in the policy's words; and the shipped example policy does not
ask for what the approver refuses. The busy scenario (this VM is web-0; a Freeze of web-0
and web-1 ten seconds in) against a real agent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from setui.emulator.scenario import load_scenario
from setui.emulator.server import Emulator
from tests.support.agent_helpers import agent_said, posts, records, start_agent, stop, write_policy

EXAMPLE = Path(__file__).parents[2] / "contrib" / "policy.example.toml"
# The example's short-freeze rule as it was: nothing about whose VMs the Freeze lists.
UNSAID = """
[[rule]]
name = "short-freeze"
event_type = "Freeze"
min_duration = 0
max_duration = 8
approve = "now"
"""
REFUSAL = ("it also starts for 1 other VM: web-1; approving it needs other_vms = true in "
           "the rule (rule short-freeze does not say it)")


@pytest.fixture
def busy() -> Iterator[Emulator]:
    emulator = Emulator(load_scenario("busy"), speed=20.0)
    emulator.start()
    yield emulator
    emulator.stop()


def _approvals(lines: object) -> list[dict[str, object]]:
    return [r for r in records(lines) if r.get("step") == "approve"  # type: ignore[arg-type]
            and r.get("agent") in ("would", "approved", "failed")]


@pytest.mark.slow
def test_the_dry_run_says_would_be_refused_where_the_real_run_is_refused(
        tmp_path: Path, busy: Emulator) -> None:
    policy = write_policy(tmp_path, UNSAID)
    proc, lines = start_agent(busy.url, tmp_path, "--policy", str(policy), "--dry-run")
    try:
        said = json.loads(lines.until(agent_said("would", "approve"), 30, "the dry run"))
    finally:
        assert stop(proc) == 0
    assert said["detail"] == f"dry run: would be refused: {REFUSAL}", said
    # The real run: refused for the same reason, said as what it means (nothing failed:
    # the platform starts the event at NotBefore), and nothing is sent.
    proc, lines = start_agent(busy.url, tmp_path, "--policy", str(policy))
    try:
        skipped = json.loads(lines.until(agent_said("skipped", "approve"), 30, "the refusal"))
    finally:
        assert stop(proc) == 0
    assert skipped["detail"] == ("not approved early: it also starts for web-1 (other_vms is "
                                 "not set); the platform starts the event at NotBefore")
    assert "--allow-other-vms" not in str(skipped["detail"])
    assert posts(busy) == []


@pytest.mark.slow
def test_the_shipped_example_approves_only_what_it_may_on_the_busy_scenario(
        tmp_path: Path, busy: Emulator) -> None:
    proc, lines = start_agent(busy.url, tmp_path, "--policy", str(EXAMPLE), "--dry-run")
    try:
        # The administrator's reboot of web-0 (40 s in): this VM's alone, so approved.
        lines.until(lambda line: '"would"' in line and "user-initiated" in line
                    and '"approve"' in line, 60, "the user reboot")
    finally:
        assert stop(proc) == 0
    said = _approvals(lines)
    assert said and all(r["detail"] == "dry run: would approve" for r in said), said
    matched = {r["event_id"]: r["rule"] for r in records(lines) if r.get("agent") == "matched"}
    shared_freeze = next(r["event_id"] for r in records(lines)
                         if r.get("change") == "appeared" and r.get("resources")
                         == ["web-0", "web-1"])
    assert matched[shared_freeze] == "tell"  # shared with web-1: told, not approved
    errors = proc.stderr.read() if proc.stderr else ""
    # Its hooks are not installed here: a real run would refuse to start, and says so.
    assert "the prepare hook of rule drain: /usr/local/bin/drain: cannot be checked" \
        in errors
    assert "a real run would refuse to start: " in errors
