"""The policy file: the shipped example parses; a bad one is refused with line and reason;
rules match what they say."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from setui.agent.policy import PolicyError, load_policy, parse_policy
from setui.agent.rules import first_match, matches
from setui.core.model import Event, EventSource, EventStatus, EventType

EXAMPLE = Path(__file__).parents[2] / "contrib" / "policy.example.toml"
NOW = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)


def _event(kind: str = "Reboot", *, source: str | None = "Platform",
           resources: tuple[str, ...] = ("vm-1",), duration: int | None = -1,
           not_before: datetime | None = NOW + timedelta(minutes=10)) -> Event:
    return Event("E1", EventType(kind), EventStatus.SCHEDULED, resources, not_before,
                 source=EventSource(source) if source else None, duration=duration)


def test_the_shipped_example_parses_into_the_documents_sample_and_a_drain() -> None:
    policy = load_policy(EXAMPLE)
    names = [rule.name for rule in policy.rules]
    assert names == ["user-initiated", "short-freeze", "drain", "drain-shared", "tell"]
    assert policy.acts
    rules = policy.rules
    assert first_match(rules, _event(source="User"), vm_name="vm-1", now=NOW).name \
        == "user-initiated"
    assert first_match(rules, _event("Freeze", duration=5), vm_name="vm-1", now=NOW).name \
        == "short-freeze"
    # 9 s is not "shorter than 9 s"; an unknown duration is not short either.
    assert first_match(rules, _event("Freeze", duration=9), vm_name="vm-1", now=NOW).name \
        == "tell"
    assert first_match(rules, _event("Freeze", duration=-1), vm_name="vm-1", now=NOW).name \
        == "tell"
    drain = first_match(rules, _event("Redeploy"), vm_name="vm-1", now=NOW)
    assert drain.name == "drain" and drain.approve == "after-prepare"
    assert drain.prepare.argv == ("/usr/local/bin/drain", "--wait")
    assert drain.prepare.timeout == 900 and drain.recover.timeout == 900
    assert first_match(rules, _event(resources=("vm-2",)), vm_name="vm-1", now=NOW) is None
    # What the example approves it approves only for this VM alone: an event that also
    # lists a neighbour is never approved by it (approving starts it for them too).
    shared = ("vm-1", "vm-2")
    assert first_match(rules, _event("Freeze", duration=5, resources=shared),
                       vm_name="vm-1", now=NOW).name == "tell"
    assert first_match(rules, _event(source="User", resources=shared), vm_name="vm-1",
                       now=NOW).name == "drain-shared"
    for rule in rules:
        if rule.approve != "never":
            assert rule.this_vm is True and rule.other_vms is False, rule.name


@pytest.mark.parametrize(("text", "line", "reason"), [
    ('[[rule]]\nname = "a"\naprove = "now"\n', 3, "unknown key 'aprove'"),
    ('[[rule]]\nname = "a"\n\n[[rule]]\nname = "b"\nevent_type = "Reboto"\n', 6,
     "event_type must be one of"),
    ('[[rule]]\nname = "a"\napprove = "sometimes"\n', 3, "approve must be one of"),
    ('[[rule]]\nname = "a"\napprove = "after-prepare"\n', 3, "needs a prepare hook"),
    ('[notify]\nurls = ["json://x"]\ntitle = "$nope"\n', 3, "unknown field $nope"),
    ('[[rule]]\nname = "a"\nname = "b"\n', 3, "not valid TOML"),
    ('[[rule]]\nname = "a"\n[[rule]]\nname = "a"\n', 4, "two rules are named 'a'"),
    ('[[rule]]\nname = "a"\ntimeout = -1\n', 3, "timeout must be a number of seconds"),
    ('[[rule]]\nevent_type = "Freeze"\n', 1, "every rule needs a name"),
    ('[agent]\nx = 1\n', 1, "unknown table or key 'agent'"),
    ('[[rule]]\nname = "a"\nprepare = "drain \'oops"\n', 3, "prepare"),
    ('[[rule]]\nname = "a"\nrecover = ["undrain", "-v"]\n', 3,
     "recover must name its command by its absolute path, not 'undrain'"),
    ('[[rule]]\nname = "a"\ndrain_before = -5\n', 3, "drain_before must be a number"),
    ('[[rule]]\nname = "a"\ndeadline_margin = "10"\n', 3, "deadline_margin must be"),
    ('[[rule]]\nname = "a"\napprove = "now"\nmax_unavailable = 0\ngroup = "scale-set"\n',
     4, "max_unavailable must be a whole number of VMs, 1 or more"),
    ('[[rule]]\nname = "a"\napprove = "now"\nmax_unavailable = 1\n', 4,
     "max_unavailable needs group"),
    ('[[rule]]\nname = "a"\napprove = "now"\ngroup = "scale-set"\n', 4,
     "group needs max_unavailable"),
    ('[[rule]]\nname = "a"\napprove = "now"\nmax_unavailable = 1\ngroup = "zone"\n', 5,
     "group must be one of scale-set, placement-group, resource-group"),
    ('[[rule]]\nname = "a"\nmax_unavailable = 1\ngroup = "scale-set"\n', 3,
     "max_unavailable holds back approvals, and the rule approves never"),
    ('[notify]\nurls = []\nshort_notice = "yes"\n', 3,
     "notify.short_notice must be true or false"),
])
def test_a_bad_policy_is_refused_with_the_line_and_the_reason(
        text: str, line: int, reason: str) -> None:
    with pytest.raises(PolicyError) as caught:
        parse_policy(text, "policy.toml")
    assert caught.value.line == line, str(caught.value)
    assert reason in str(caught.value)
    assert str(caught.value).startswith(f"policy.toml:{line}: ")


def test_a_policy_nested_too_deeply_is_refused_in_words() -> None:
    # The parser recurses once a level: this once ended in a RecursionError traceback.
    with pytest.raises(PolicyError) as caught:
        parse_policy("[[rule]]\nname = " + "[" * 100_000 + "\n", "policy.toml")
    assert "not valid TOML" in str(caught.value) and "nested too deeply" in str(caught.value)
    assert str(caught.value).startswith("policy.toml")


def test_short_notice_is_told_unless_the_policy_says_not() -> None:
    assert parse_policy("").short_notice is True
    assert load_policy(EXAMPLE).short_notice is True
    assert parse_policy("[notify]\nshort_notice = false\n").short_notice is False


def test_conditions() -> None:
    rule = parse_policy('[[rule]]\nname = "r"\nthis_vm = false\nother_vms = true\n'
                        'not_before_within = 900\nresource = "web-*"\n').rules[0]
    assert matches(rule, _event(resources=("WEB-2",)), vm_name="vm-1", now=NOW)
    assert not matches(rule, _event(resources=("web-2", "vm-1")), vm_name="vm-1", now=NOW)
    assert not matches(rule, _event(resources=("db-2",)), vm_name="vm-1", now=NOW)
    far = _event(resources=("web-2",), not_before=NOW + timedelta(hours=1))
    assert not matches(rule, far, vm_name="vm-1", now=NOW)
    assert not matches(rule, _event(resources=("web-2",), not_before=None), vm_name="vm-1",
                       now=NOW)


def test_timing_and_budget_keys() -> None:
    rule = parse_policy('[[rule]]\nname = "r"\napprove = "now"\ndrain_before = 300\n'
                        'deadline_margin = 0\nmax_unavailable = 2\ngroup = "placement-group"\n'
                        '[[rule]]\nname = "plain"\n').rules
    assert (rule[0].drain_before, rule[0].deadline_margin, rule[0].max_unavailable,
            rule[0].group) == (300.0, 0.0, 2, "placement-group")
    assert (rule[1].drain_before, rule[1].deadline_margin, rule[1].max_unavailable,
            rule[1].group) == (None, 10.0, None, None)


def test_no_policy_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read the policy"):
        load_policy(tmp_path / "missing.toml")


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_a_policy_that_is_not_a_small_regular_file_is_refused_in_words(tmp_path: Path) -> None:
    # /dev/zero was read until memory ran out; a huge file likewise.
    with pytest.raises(PolicyError, match="policy file /dev/zero is not a regular file"):
        load_policy(Path("/dev/zero"))
    huge = tmp_path / "policy.toml"
    huge.write_text("# a comment\n" * 100_000)
    with pytest.raises(PolicyError, match="is larger than 1024 KB: it is not a setui policy"):
        load_policy(huge)
