"""What the agent's start says of its policy: the file it loaded and the rules in it, as
it says when there is none."""

from __future__ import annotations

import io
from pathlib import Path

from setui.cli import build_parser
from setui.commands.agent import _load
from setui.settings.config import Config


def _loaded(argv: list[str]) -> tuple[bool, str]:
    args = build_parser(argv).parse_args(argv)
    err = io.StringIO()
    loaded = _load(args, Config(), err)
    return loaded is not None, err.getvalue()


def test_the_start_names_the_policy_file_and_its_rules(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[[rule]]\nname = "drain"\nevent_type = "Reboot"\napprove = "now"\n'
                      '[[rule]]\nname = "tell"\nnotify = true\n')
    ok, said = _loaded(["agent", "--policy", str(policy)])
    assert ok, said
    assert f"setui agent: policy {policy}: 2 rules (drain, tell)" in said, said


def test_a_policy_without_rules_is_said_to_observe_only(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text("[notify]\nurls = []\n")
    ok, said = _loaded(["agent", "--policy", str(policy)])
    assert ok, said
    assert f"setui agent: policy {policy}: no rules: observing only" in said, said
