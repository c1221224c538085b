"""The agent's API end to end: a real agent on a loopback emulator, clients as real users
in processes of their own (setpriv), who the kernel says they are, who may approve, what
the audit log says, and that two approvals of one event make one POST."""

from __future__ import annotations

import grp
import os
import signal
import stat
from pathlib import Path
from typing import Any

import pytest

from setui.api.client import AgentClient, HoldAnswer
from setui.emulator.server import Emulator
from setui.store import APPROVE_ATTEMPT, REFUSED, Store
from setui.store.agent import HOLD, RELEASE
from setui.ui.attached import hold_words
from tests.support.api_helpers import (
    EVENT_ID,
    OPS_GROUP,
    Account,
    agent_env,
    answer,
    needs_root,
    posts,
    run_as,
    start_agent,
    stop,
)
from tests.support.children import wait_until

pytestmark = needs_root

HOOK = """#!/bin/sh
touch "$HOOK_DIR/prepare-running"
while [ ! -e "$HOOK_DIR/go" ]; do sleep 0.05; done
"""
AFTER_PREPARE = """
[[rule]]
name = "drain"
event_type = "Reboot"
prepare = "{hook}"
approve = "after-prepare"
"""


def _audit(base: Path) -> list[Any]:
    with Store.open_dir(base / "data", readonly=True) as store:
        return store.audit_log.records(oldest_first=True)


@pytest.mark.slow
def test_the_socket_is_0660_with_the_data_directorys_group(
        base: Path, emulator: Emulator) -> None:
    proc, _ = start_agent(emulator.url, base)
    try:
        st = os.stat(base / "run" / "api.sock")
        assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o660
        assert st.st_gid == grp.getgrnam(OPS_GROUP).gr_gid == os.stat(base / "data").st_gid
    finally:
        assert stop(proc) == 0


@pytest.mark.slow
def test_two_users_see_the_kernels_word_and_the_history_from_before_they_came(
        base: Path, emulator: Emulator, accounts: dict[str, Account]) -> None:
    proc, _ = start_agent(emulator.url, base)
    try:
        with Store.open_dir(base / "data", readonly=True) as store:
            wait_until(lambda: store.history.incarnations(limit=1) != [], 30,
                       "the first document stored")
        alice = run_as(accounts["alice"], base, "history")
        carol = run_as(accounts["carol"], base, "history")
    finally:
        assert stop(proc) == 0
    assert alice["you"] == {"uid": accounts["alice"].uid, "user": "sapi-alice",
                            "may_approve": True, "why_not": None}
    assert carol["you"] == {"uid": accounts["carol"].uid, "user": "sapi-carol",
                            "may_approve": False,
                            "why_not": "you are not root and not in group setui, who may "
                                       "approve here: ask an administrator to add you to it "
                                       "(it counts from your next login)"}
    assert alice["incarnations"] == carol["incarnations"] == [1]


@pytest.mark.slow
def test_someone_outside_the_sockets_group_cannot_connect(
        base: Path, emulator: Emulator) -> None:
    proc, _ = start_agent(emulator.url, base)
    try:
        nobody = run_as(Account("nobody", 65534, 65534), base, "history")
    finally:
        assert stop(proc) == 0
    assert nobody["error"]["code"] == "forbidden"
    # The run directory already keeps nobody out (0750 root:sapi-ops), as /run/setui does.
    assert nobody["error"]["message"].endswith(f": you are not in group {OPS_GROUP}")


@pytest.mark.slow
def test_a_non_approver_is_refused_and_the_refusal_recorded_as_the_kernel_says(
        base: Path, emulator: Emulator, accounts: dict[str, Account]) -> None:
    proc, _ = start_agent(emulator.url, base)
    try:
        carol = run_as(accounts["carol"], base, "approve", {"ids": [EVENT_ID]})
        held = run_as(accounts["carol"], base, "hold", {"id": EVENT_ID})
        # Made-up EventIds: one record for the request, not one for each.
        made_up = run_as(accounts["carol"], base, "approve",
                         {"ids": [f"MADE-UP-{n}" for n in range(40)]})
    finally:
        assert stop(proc) == 0
    assert carol["error"]["code"] == held["error"]["code"] == made_up["error"]["code"] \
        == "forbidden"
    assert "not in group setui" in carol["error"]["message"]
    assert posts(emulator) == []
    refused = [r for r in _audit(base) if r.action == REFUSED]
    assert [(r.user, r.event_id, r.details["op"]) for r in refused] == [
        ("sapi-carol", EVENT_ID, "approve"), ("sapi-carol", EVENT_ID, "hold"),
        ("sapi-carol", "MADE-UP-0", "approve")]
    for record in refused:
        assert record.details["api"]["uid"] == accounts["carol"].uid
        assert "not in group setui" in (record.error or "")


@pytest.mark.slow
def test_a_non_approver_is_refused_release_and_dismiss_and_each_refusal_recorded(
        base: Path, emulator: Emulator, accounts: dict[str, Account]) -> None:
    """Release and dismiss are approvers' ops as approve and hold are: a member of the
    socket's group who is not an approver changes nothing with them, and each refusal is
    in the audit log under the name the kernel gave."""
    proc, _ = start_agent(emulator.url, base)
    try:
        with Store.open_dir(base / "data", readonly=True) as store:
            wait_until(lambda: store.history.incarnations(limit=1) != [], 30,
                       "the first document stored")
        held = run_as(accounts["alice"], base, "hold", {"id": EVENT_ID})
        assert held["held"] is True, held
        released = run_as(accounts["carol"], base, "release", {"id": EVENT_ID})
        dismissed = run_as(accounts["carol"], base, "dismiss", {"ids": [EVENT_ID]})
        with AgentClient.connect(base / "run" / "api.sock") as client:
            still_held = EVENT_ID in client.state()[1].held
    finally:
        assert stop(proc) == 0
    assert "error" in released, f"a non-approver released the hold: {released}"
    assert "error" in dismissed, f"a non-approver's dismissal was recorded: {dismissed}"
    for refused_op in (released, dismissed):
        assert refused_op["error"]["code"] == "forbidden"
        assert "not in group setui" in refused_op["error"]["message"]
    assert still_held
    assert [(r.action, r.user, r.event_id, r.details.get("op")) for r in _audit(base)] == [
        (HOLD, "sapi-alice", EVENT_ID, "hold"),
        (REFUSED, "sapi-carol", EVENT_ID, "release"),
        (REFUSED, "sapi-carol", EVENT_ID, "dismiss")]
    for record in _audit(base)[1:]:
        assert record.details["api"]["uid"] == accounts["carol"].uid
        assert "not in group setui" in (record.error or "")


@pytest.mark.slow
def test_two_approvers_at_once_make_one_post_recorded_under_the_winner(
        base: Path, emulator: Emulator, accounts: dict[str, Account]) -> None:
    proc, _ = start_agent(emulator.url, base)
    try:
        clients = {who: run_as(accounts[who], base, "approve",
                               {"ids": [EVENT_ID], "barrier": "go"}, background=True)
                   for who in ("alice", "bob")}
        wait_until(lambda: all((base / "sync" / f"ready-sapi-{w}").exists() for w in clients),
                   60, "both clients to have read the state")
        (base / "sync" / "go").touch()
        answers = {who: answer(p) for who, p in clients.items()}
    finally:
        assert stop(proc) == 0
    approved = [w for w, a in answers.items() if a["outcomes"][0]["approved"]]
    assert len(approved) == 1, answers
    winner = approved[0]
    loser = "bob" if winner == "alice" else "alice"
    assert answers[loser]["outcomes"][0]["refused"], answers
    assert len(posts(emulator)) == 1
    attempts = [r for r in _audit(base) if r.action == APPROVE_ATTEMPT]
    assert [(r.user, r.details["api"]["uid"]) for r in attempts] == [
        (f"sapi-{winner}", accounts[winner].uid)]


@pytest.mark.slow
def test_approvers_in_the_config_narrow_it_and_sighup_reads_them_again(
        base: Path, emulator: Emulator, accounts: dict[str, Account]) -> None:
    config = base / "config.toml"
    config.write_text('approvers = ["sapi-bob"]\n')
    proc, _ = start_agent(emulator.url, base, env=agent_env(base))
    try:
        alice = run_as(accounts["alice"], base, "dismiss", {"ids": [EVENT_ID]})
        bob = run_as(accounts["bob"], base, "dismiss", {"ids": [EVENT_ID]})
        config.write_text('approvers = ["%setui"]\n')
        proc.send_signal(signal.SIGHUP)
        # Who may approve is asked at each request: alice's next hello says so.
        wait_until(lambda: run_as(accounts["alice"], base, "history")["you"]["may_approve"],
                   30, "the reload to let alice approve")
        again = run_as(accounts["alice"], base, "dismiss", {"ids": [EVENT_ID]})
        assert proc.poll() is None  # SIGHUP reloads; it does not end the agent
    finally:
        assert stop(proc) == 0
    assert alice["error"]["code"] == "forbidden"
    assert "not among the approvers" in alice["error"]["message"]
    assert bob == {"you": bob["you"], "recorded": True}
    assert again["recorded"] is True
    users = [(r.action, r.user) for r in _audit(base)]
    assert users == [("refused", "sapi-alice"), ("dismissed", "sapi-bob"),
                     ("dismissed", "sapi-alice")]


@pytest.mark.slow
def test_a_hold_through_the_api_is_the_agents_own_and_holds_its_approval(
        base: Path, emulator: Emulator, accounts: dict[str, Account]) -> None:
    hook = base / "hook.sh"
    hook.write_text(HOOK)
    hook.chmod(0o755)
    policy = base / "policy.toml"
    policy.write_text(AFTER_PREPARE.format(hook=hook))
    proc, _ = start_agent(emulator.url, base, "--policy", str(policy))
    try:
        wait_until(lambda: (base / "sync" / "prepare-running").exists(), 30,
                   "the prepare hook to run")
        held = run_as(accounts["alice"], base, "hold", {"id": EVENT_ID})
        assert held["held"] is True, held
        (base / "sync" / "go").touch()
        with AgentClient.connect(base / "run" / "api.sock") as client:
            wait_until(lambda: any(s.step == "prepare" and s.state == "done"
                                   for s in client.state()[1].steps), 30,
                       "the prepare step to finish")
            assert EVENT_ID in client.state()[1].held
        # Twenty more polls after the step it would approve on: no POST.
        gets = len(emulator.requests)
        wait_until(lambda: len(emulator.requests) >= gets + 20, 30, "twenty more polls")
        assert posts(emulator) == []
        released = run_as(accounts["bob"], base, "release", {"id": EVENT_ID})
        assert released["held"] is False, released
        wait_until(lambda: len(posts(emulator)) == 1, 30, "the agent's approval")
    finally:
        assert stop(proc) == 0
    records = [(r.action, r.user) for r in _audit(base)]
    assert records[:2] == [(HOLD, "sapi-alice"), (RELEASE, "sapi-bob")]
    assert records[2][0] == APPROVE_ATTEMPT and records[2][1].startswith("policy:drain")


NO_RULE_FOR_A_REBOOT = """
[[rule]]
name = "freezes"
event_type = "Freeze"
approve = "now"

[[rule]]
name = "watch-reboots"
event_type = "Reboot"
event_source = "Platform"
notify = true
"""


@pytest.mark.slow
def test_a_hold_on_an_event_no_rule_applies_to_says_so(
        base: Path, emulator: Emulator, accounts: dict[str, Account]) -> None:
    """The hold is kept (the policy may change), but the answer says that no rule of the
    policy applies: the agent would take no step for the event held or not."""
    policy = base / "policy.toml"
    policy.write_text(NO_RULE_FOR_A_REBOOT)
    proc, _ = start_agent(emulator.url, base, "--policy", str(policy))
    try:
        with AgentClient.connect(base / "run" / "api.sock") as client:
            wait_until(lambda: EVENT_ID in _event_ids(client), 30, "the event")
        held = run_as(accounts["alice"], base, "hold", {"id": EVENT_ID})
        assert held["held"] is True, held
        assert held["rule"] is None and held["acts"] is False, held
        words = hold_words(HoldAnswer(EVENT_ID, True, None, rule=None, acts=False))
        assert "no rule of the agent's policy applies" in words, words
        released = run_as(accounts["alice"], base, "release", {"id": EVENT_ID})
        assert released["held"] is False and released["acts"] is False, released
    finally:
        assert stop(proc) == 0


@pytest.mark.slow
def test_a_hold_on_an_event_a_rule_acts_on_names_the_rule(
        base: Path, emulator: Emulator, accounts: dict[str, Account]) -> None:
    policy = base / "policy.toml"
    # Every event is the first rule's now; it would approve a minute before NotBefore,
    # which is 15 minutes away.
    policy.write_text(NO_RULE_FOR_A_REBOOT.replace('event_type = "Freeze"\n', "")
                      .replace('"now"', '"before-not-before"\napprove_before = 60'))
    proc, _ = start_agent(emulator.url, base, "--policy", str(policy))
    try:
        with AgentClient.connect(base / "run" / "api.sock") as client:
            wait_until(lambda: EVENT_ID in _event_ids(client), 30, "the event")
        held = run_as(accounts["alice"], base, "hold", {"id": EVENT_ID})
        assert held == {**held, "held": True, "rule": "freezes", "acts": True}, held
        words = hold_words(HoldAnswer(EVENT_ID, True, None, rule="freezes", acts=True))
        assert "no rule" not in words and "until released" in words, words
    finally:
        assert stop(proc) == 0


def _event_ids(client: AgentClient) -> list[str]:
    document = client.state()[0].state.document
    return [e.event_id for e in document.events] if document is not None else []
