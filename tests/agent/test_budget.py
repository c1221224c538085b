"""The disruption budget's count, from answers shaped as Prometheus gives them (the
end-to-end case, with real agents and a real Prometheus, is tests/fleet/
test_fleet_budget.py): who is unavailable and why, what an approval would take down,
and when the budget cannot be told."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from setui.agent.budget import count, group_of_vm, look_of, scraped_query, series_query
from setui.agent.budgeting import MAX_DOUBLINGS, RECHECK, BudgetGate, GateDecision
from setui.fleet.model import VmKey
from tests.support.children import SETUI

AT = 1_800_000_000.0
SS = {"vm_scale_set": "ss-web", "resource_group": "rg-web", "subscription_id": "sub-1"}
ME = VmKey("sub-1", "rg-web", "web-0")


def _row(name: str, vm: str, value: float, **labels: str) -> dict[str, Any]:
    return {"metric": {"__name__": name, **SS, "vm_name": vm, **labels},
            "value": [AT, str(value)]}


def _alive(vm: str) -> dict[str, Any]:
    return _row("setui_last_success_timestamp_seconds", vm, AT - 1)


def _event(vm: str, status: str = "Scheduled", approved_by: str = "") -> dict[str, Any]:
    return _row("azure_scheduledevent_event", vm, AT + 600, eventID=f"E-{vm}",
                eventType="Reboot", eventStatus=status, resource=vm, this_vm="true",
                approved_by=approved_by, resources_listed="1")


RULES = {"metric": {"__name__": "setui:vm_not_reported_since_timestamp_seconds"},
         "value": [AT, "0"]}


def _scraped(*vms: str, at: float = AT) -> list[dict[str, Any]]:
    return [{"metric": {**SS, "vm_name": vm}, "value": [AT, str(at)]} for vm in vms]


def test_who_is_unavailable_and_why() -> None:
    group = group_of_vm("scale-set", {"vm_name": "web-0", **SS})
    assert group is not None
    series = [
        _alive("web-0"), _event("web-0"),
        _alive("web-1"), _row("setui_agent_busy", "web-1", 1, reason="prepare"),
        _row("setui_last_success_timestamp_seconds", "web-2", AT - 3600),  # stale
        _row("setui:vm_not_reported_since_timestamp_seconds", "web-3", AT - 60),
        _alive("web-4"), _event("web-4", "Started"),
        _alive("web-5"), _event("web-5", approved_by="alice"),
        _alive("web-6"), _row("setui_agent_busy", "web-6", 0, reason="approving"),  # not 1
        RULES,
    ]
    look = look_of(series, _scraped("web-0", "web-1", "web-4", "web-5", "web-6"), AT)
    counted = count(look, group, me=ME, limit=5, resources=["web-0"])
    assert counted.busy == (("web-1", "prepare running"), ("web-2", "stale"),
                            ("web-3", "not reported"), ("web-4", "event Started"),
                            ("web-5", "approved, not started yet"))
    assert counted.taking == 1 and not counted.within
    assert counted.words().startswith("5 of 5 in ss-web busy (web-1: prepare running; ")
    assert count(look, group, me=ME, limit=6, resources=["web-0"]).within
    # An event that also lists a free neighbour takes both down.
    both = count(look, group, me=ME, limit=6, resources=["WEB-0", "web-6"])
    assert both.taking == 2 and not both.within
    assert both.words().endswith("approving takes 2 VMs of it down at once")
    # Answering VMs scraped after a moment, and those not yet (what they say is not known).
    assert sorted(k.vm_name for k in look.scraped_since(AT - 1, ME)) == []
    late = look_of(series, _scraped("web-0", "web-4", "web-5", "web-6")
                   + _scraped("web-1", at=AT - 5), AT)
    assert [k.vm_name for k in late.scraped_since(AT - 1, ME)] == ["web-1"]


def test_claims_are_seen_and_named() -> None:
    group = group_of_vm("scale-set", {"vm_name": "web-0", **SS})
    assert group is not None
    series = [_alive("web-0"), _alive("web-1"),
              _row("setui_agent_busy", "web-1", 1, reason="approving"), RULES]
    counted = count(look_of(series, _scraped("web-0", "web-1"), AT), group, me=ME, limit=1,
                    resources=["web-0"])
    assert counted.claiming == ("web-1",)
    assert counted.words() == "1 of 1 in ss-web busy (web-1: approving)"


def test_when_the_budget_cannot_be_told() -> None:
    group = group_of_vm("scale-set", {"vm_name": "web-0", **SS})
    assert group is not None
    # Without the recording rules, a VM whose agent stopped would be left out.
    no_rules = count(look_of([_alive("web-0")], _scraped("web-0"), AT), group, me=ME,
                     limit=1, resources=["web-0"])
    assert not no_rules.within and "recording rules" in no_rules.words()
    # This VM's own series not scraped: the others could not see it approve.
    unseen = count(look_of([_alive("web-1"), RULES], _scraped("web-1"), AT), group, me=ME,
                   limit=1, resources=["web-0"])
    assert not unseen.within and "own series are not in Prometheus" in unseen.words()
    # Not in a scale set: no group to count.
    assert group_of_vm("scale-set", {"vm_name": "web-0", "resource_group": "rg"}) is None


def test_the_queries_select_the_group_and_escape_its_names() -> None:
    group = group_of_vm("resource-group", {"resource_group": 'rg "x"\\', "subscription_id": "s"})
    assert group is not None and group.name == 'rg "x"\\'
    assert 'resource_group="rg \\"x\\"\\\\",subscription_id="s"' in series_query(group)
    assert series_query(group).endswith('or setui:vm_not_reported_since_timestamp_seconds'
                                        '{vm_name=""}')
    assert scraped_query(group) == ('timestamp(setui_last_success_timestamp_seconds'
                                    '{resource_group="rg \\"x\\"\\\\",subscription_id="s"})')


def test_the_agent_exports_what_keeps_it_busy_and_what_waits() -> None:
    from setui.agent.metrics import AgentMetrics

    metrics = AgentMetrics(vm_name="web-0", compute={"vmScaleSetName": "ss-web"}, version="0")
    assert "setui_agent_busy{" not in metrics.text().decode()  # none while nothing holds
    metrics.set_activity(frozenset({"approving"}), frozenset({"budget"}))
    text = metrics.text().decode()
    assert 'setui_agent_busy{placement_group="",reason="approving",resource_group="",' \
           'subscription_id="",vm_name="web-0",vm_scale_set="ss-web",zone=""} 1.0' in text
    assert 'setui_agent_waiting{placement_group="",reason="budget",' in text


def test_the_plan_says_what_the_approval_waits_for() -> None:
    from datetime import datetime, timezone

    from setui.agent.plan import plan_of, plan_text
    from setui.agent.policy import parse_policy
    from setui.store.records import Step

    rule = parse_policy('[[rule]]\nname = "rolling"\napprove = "now"\nmax_unavailable = 1\n'
                        'group = "scale-set"\n').rules[0]
    now = datetime(2026, 5, 14, 9, 0, tzinfo=timezone.utc)
    steps = [Step("E", "match", "rolling", "done", plan_of(rule), None, now),
             Step("E", "approve", "rolling", "waiting",
                  "waiting: 1 of 1 in ss-web busy (web-1: event Started)", None, now)]
    assert plan_text(steps, now=now) == ("rule rolling: approve waiting: 1 of 1 in ss-web "
                                         "busy (web-1: event Started)")
    assert plan_of(rule) == "approve at once within max_unavailable 1 of its scale-set"


@pytest.mark.slow
@pytest.mark.parametrize(("env", "args", "said"), [
    ({}, ["--metrics", "0"], "which Prometheus counts the group?"),
    ({"SETUI_PROMETHEUS_URL": "http://127.0.0.1:9"}, [], "give --metrics ADDR:PORT"),
    ({"SETUI_PROMETHEUS_URL": "http://prometheus.example:9090",
      "SETUI_PROMETHEUS_TOKEN": "secret"}, ["--metrics", "0"], "in clear text"),
])
def test_a_budget_without_its_prometheus_or_its_metrics_is_refused_at_start(
        tmp_path: Path, env: dict[str, str], args: list[str], said: str) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[[rule]]\nname = "rolling"\napprove = "now"\nmax_unavailable = 1\n'
                      'group = "scale-set"\n')
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SETUI_PROMETHEUS")}
    done = subprocess.run([*SETUI, "agent", "--endpoint", "http://127.0.0.1:9", "--policy",
                           str(policy), *args], capture_output=True, text=True, timeout=60,
                          env={**clean, "SETUI_DATA_DIR": str(tmp_path / "data"), **env},
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr
    assert "secret" not in done.stderr


def test_agents_whose_claims_met_step_back_further_each_time_they_meet() -> None:
    # The pause uses none of the gate's dependencies.
    gate = BudgetGate(None, metrics=None, book=None, teller=None, clock=None)
    met = GateDecision("wait", "another agent claimed too", "budget", met=2.0)
    for times in range(1, 9):
        pause = gate._pause("E1", met)
        # RECHECK to twice it, plus up to the claim's 2 s doubled at each meeting (capped).
        assert RECHECK <= pause <= 2 * RECHECK + 2.0 * 2 ** min(times, MAX_DOUBLINGS)
    assert gate.claims_met == {"E1": 8}
    assert gate._pause("E1", GateDecision("wait", "spent", "budget")) <= 2 * RECHECK
    assert gate.claims_met == {}  # a check that met no one starts the doubling over
