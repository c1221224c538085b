"""contrib/hooks/README.md's policy lines are a policy setui agent takes, naming the hooks
beside it, each run with the step its rule runs it for and the same options both times."""

from __future__ import annotations

import re

from setui.agent.policy import parse_policy
from tests.support.hookrun import HOOKS


def test_the_policy_lines_parse_and_run_each_hook_as_its_step() -> None:
    readme = (HOOKS / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```toml\n(.*?)```", readme, re.DOTALL)
    assert block is not None
    policy = parse_policy(block.group(1), "contrib/hooks/README.md")
    assert [rule.name for rule in policy.rules] == ["k8s-node", "services"]
    for rule in policy.rules:
        assert rule.prepare is not None and rule.recover is not None
        prepare, recover = rule.prepare.argv, rule.recover.argv
        assert (prepare[1], recover[1]) == ("prepare", "recover")
        assert prepare[0] == recover[0] and (HOOKS / rule.prepare.name).is_file()
        assert prepare[2:] == recover[2:]
        assert rule.prepare.timeout >= 900  # the longest notice: the hook stops itself first
