"""The config file a root agent reads again on SIGHUP is held to the rule it was held to
at start (setui.agent.trust): one another user could have written is refused, the agent
keeps the config it has and says so, and that user's hello does not say may_approve.
What was reproduced: a file sapi-mallory owned, naming sapi-mallory among the approvers,
was taken at the reload, and sapi-mallory's hello said may_approve: true."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from setui.emulator.server import Emulator
from tests.support.api_helpers import Account, agent_env, needs_root, run_as, stop
from tests.support.children import SETUI, Lines

pytestmark = [needs_root, pytest.mark.slow]


def _may_approve(account: Account, base: Path) -> bool:
    hello = run_as(account, base, "history")
    assert isinstance(hello, dict) and "error" not in hello, hello
    return bool(hello["you"]["may_approve"])


def test_a_reload_refuses_a_config_another_user_could_change_and_keeps_the_old_one(
        base: Path, emulator: Emulator, accounts: dict[str, Account]) -> None:
    config = base / "config.toml"
    config.write_text('approvers = ["sapi-bob"]\n')
    config.chmod(0o644)
    # Its errors on its stdout too, to read what it says at the reload.
    proc = subprocess.Popen(
        [*SETUI, "agent", "--endpoint", emulator.url, "--interval", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, encoding="utf-8",
        env=agent_env(base))
    lines = Lines(proc)
    try:
        lines.until(lambda line: "may approve: root and sapi-bob" in line, 30, "the API")
        assert not _may_approve(accounts["mallory"], base)
        # Rewritten by mallory, who names herself: refused, the old config kept.
        config.write_text('approvers = ["%sapi-ops", "sapi-mallory"]\n')
        os.chown(config, accounts["mallory"].uid, accounts["mallory"].gid)
        proc.send_signal(signal.SIGHUP)
        said = lines.until(lambda line: "SIGHUP" in line, 30, "the reload")
        assert (f"setui agent: SIGHUP: the config is refused, so the agent keeps the one it "
                f"has and who may approve is unchanged: the config file: {config}: owned by "
                f"uid {accounts['mallory'].uid} (sapi-mallory)") in said
        assert not _may_approve(accounts["mallory"], base)
        assert _may_approve(accounts["bob"], base)
        # The same file, root's again: taken as before.
        os.chown(config, 0, 0)
        proc.send_signal(signal.SIGHUP)
        said = lines.until(lambda line: "SIGHUP" in line, 30, "the second reload")
        assert "SIGHUP: may approve:" in said
        assert _may_approve(accounts["mallory"], base)
        assert proc.poll() is None
    finally:
        assert stop(proc) == 0
