"""contrib/hooks/k8s-drain against a fake kubectl that keeps the node and records each call:
cordon, drain within the time left, uncordon only what it cordoned, across re-runs."""

from __future__ import annotations

import os
import re
import socket
import subprocess
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from pathlib import Path

import pytest

from tests.support.hookrun import E1, E2, HOOKS, Fake, hook_env, install_fake, run_hook

pytestmark = pytest.mark.skipif(not os.access("/usr/bin/python3", os.X_OK),
                                reason="the hooks run on the VM's /usr/bin/python3")
NODE = "aks-nodepool1-12345678-vmss000000"
MARK = "setui/cordoned-for"


def _kubectl(tmp_path: Path, *, cordoned: bool = False, node: str = NODE) -> Fake:
    return install_fake(tmp_path, "kubectl",
                        {node: {"unschedulable": cordoned, "annotations": {}}})


def _drain(kubectl: Fake, step: str, *args: str, **env: str | None):  # type: ignore[no-untyped-def]
    return run_hook("k8s-drain", step, "--node", NODE, *args,
                    env=hook_env(kubectl, step=step, **env))


def _timeout(kubectl: Fake) -> int:
    drain = next(c for c in kubectl.calls() if c[0] == "drain")
    return int(next(w for w in drain if w.startswith("--timeout="))[10:-1])


def _node(kubectl: Fake) -> dict:  # type: ignore[type-arg]
    return kubectl.state()[NODE]


@pytest.mark.slow
def test_prepare_cordons_then_drains_with_the_time_left_as_its_timeout(tmp_path: Path) -> None:
    kubectl = _kubectl(tmp_path)
    done = _drain(kubectl, "prepare")
    assert done.returncode == 0, done.stderr
    assert kubectl.verbs() == ["get", "annotate", "cordon", "drain"]
    assert kubectl.calls()[1] == ["annotate", "node", NODE, "--overwrite", f"{MARK}={E1}"]
    drain = kubectl.calls()[3]
    assert drain[:4] == ["drain", NODE, "--ignore-daemonsets", "--delete-emptydir-data"]
    # 300 s left, less the default margin of 15 s, less what the start took: never more.
    assert 275 <= _timeout(kubectl) <= 285
    assert _node(kubectl) == {"unschedulable": True, "annotations": {MARK: E1}}
    assert f"drained node {NODE}" in done.stdout


@pytest.mark.slow
def test_recover_after_a_drain_uncordons_and_forgets(tmp_path: Path) -> None:
    kubectl = _kubectl(tmp_path)
    assert _drain(kubectl, "prepare").returncode == 0
    kubectl.forget()
    done = _drain(kubectl, "recover")
    assert done.returncode == 0, done.stderr
    assert kubectl.calls() == [["get", "node", NODE, "--output", "json"],
                               ["uncordon", NODE], ["annotate", "node", NODE, f"{MARK}-"]]
    assert _node(kubectl) == {"unschedulable": False, "annotations": {}}
    # Run again (a restarted agent, an operator): nothing more is done.
    kubectl.forget()
    again = _drain(kubectl, "recover")
    assert again.returncode == 0 and kubectl.verbs() == ["get"]
    assert "not cordoned by this hook" in again.stdout


@pytest.mark.slow
def test_a_node_cordoned_before_prepare_stays_cordoned_after_recover(tmp_path: Path) -> None:
    kubectl = _kubectl(tmp_path, cordoned=True)
    prepared = _drain(kubectl, "prepare")
    assert prepared.returncode == 0, prepared.stderr
    assert kubectl.verbs() == ["get", "drain"]  # neither cordoned nor marked by the hook
    assert "already cordoned, not by this hook" in prepared.stdout
    kubectl.forget()
    recovered = _drain(kubectl, "recover")
    assert recovered.returncode == 0 and kubectl.verbs() == ["get"]
    assert _node(kubectl) == {"unschedulable": True, "annotations": {}}
    assert "left cordoned" in recovered.stdout


@pytest.mark.slow
def test_prepare_run_again_remembers_it_cordoned_the_node(tmp_path: Path) -> None:
    kubectl = _kubectl(tmp_path)
    assert _drain(kubectl, "prepare").returncode == 0
    kubectl.forget()
    again = _drain(kubectl, "prepare")
    assert again.returncode == 0, again.stderr
    # Cordoned now, but by this hook: still its to undo, and not marked twice.
    assert kubectl.verbs() == ["get", "drain"]
    assert _node(kubectl)["annotations"] == {MARK: E1}
    assert _drain(kubectl, "recover").returncode == 0
    assert _node(kubectl) == {"unschedulable": False, "annotations": {}}


@pytest.mark.slow
def test_overlapping_events_keep_the_node_cordoned_until_both_have_passed(
        tmp_path: Path) -> None:
    kubectl = _kubectl(tmp_path)
    assert _drain(kubectl, "prepare").returncode == 0
    assert _drain(kubectl, "prepare", SETUI_EVENT_ID=E2).returncode == 0
    assert _node(kubectl)["annotations"] == {MARK: f"{E1},{E2}"}
    first = _drain(kubectl, "recover")
    assert first.returncode == 0 and f"stays cordoned for {E2}" in first.stdout
    assert _node(kubectl) == {"unschedulable": True, "annotations": {MARK: E2}}
    assert _drain(kubectl, "recover", SETUI_EVENT_ID=E2).returncode == 0
    assert _node(kubectl) == {"unschedulable": False, "annotations": {}}


@pytest.mark.slow
def test_a_drain_still_running_at_its_timeout_exits_3_and_recover_uncordons(
        tmp_path: Path) -> None:
    kubectl = _kubectl(tmp_path)
    done = _drain(kubectl, "prepare", "--margin", "1", SETUI_SECONDS_LEFT="4",
                  FAKE_KUBECTL="drain=slow")
    assert done.returncode == 3, done.stderr
    assert 1 <= _timeout(kubectl) <= 3  # 4 s left, less the margin
    assert "did not finish in the" in done.stdout and "recover uncordons it" in done.stdout
    assert _node(kubectl) == {"unschedulable": True, "annotations": {MARK: E1}}
    assert _drain(kubectl, "recover").returncode == 0
    assert _node(kubectl)["unschedulable"] is False


@pytest.mark.slow
def test_a_drain_that_ignores_its_timeout_is_stopped_at_the_deadline(tmp_path: Path) -> None:
    kubectl = _kubectl(tmp_path)
    done = _drain(kubectl, "prepare", "--margin", "1", SETUI_SECONDS_LEFT="4",
                  FAKE_KUBECTL="drain=hang")
    assert done.returncode == 3, done.stderr
    assert "kubectl was stopped" in done.stdout


@pytest.mark.slow
def test_a_failed_drain_exits_1_saying_so_and_the_node_stays_cordoned(tmp_path: Path) -> None:
    kubectl = _kubectl(tmp_path)
    done = _drain(kubectl, "prepare", FAKE_KUBECTL="drain=fail")
    assert done.returncode == 1
    assert "error: drain refused by the fake kubectl" in done.stderr  # kubectl's own words
    assert re.search(rf"k8s-drain: the drain of node {NODE} failed \(kubectl exited 1 after "
                     r"\d+ s, see above\); the node stays cordoned and recover uncordons it",
                     done.stderr), done.stderr
    assert _node(kubectl) == {"unschedulable": True, "annotations": {MARK: E1}}


@pytest.mark.slow
def test_a_failed_cordon_leaves_no_mark(tmp_path: Path) -> None:
    kubectl = _kubectl(tmp_path)
    done = _drain(kubectl, "prepare", FAKE_KUBECTL="cordon=fail")
    assert done.returncode == 1
    assert "kubectl cordon exited 1" in done.stderr
    assert kubectl.verbs() == ["get", "annotate", "cordon", "annotate"]
    assert _node(kubectl) == {"unschedulable": False, "annotations": {}}


@pytest.mark.parametrize(("event_type", "drained"), [("Freeze", False), ("Reboot", True),
                                                     ("Redeploy", True)])
@pytest.mark.slow
def test_skip_types_tells_a_freeze_from_a_reboot(tmp_path: Path, event_type: str,
                                                 drained: bool) -> None:
    kubectl = _kubectl(tmp_path)
    done = _drain(kubectl, "prepare", "--skip-types", "Freeze", SETUI_EVENT_TYPE=event_type)
    assert done.returncode == 0, done.stderr
    assert ("drain" in kubectl.verbs()) is drained
    if not drained:
        assert kubectl.calls() == [] and "skipped (--skip-types Freeze)" in done.stdout
        recovered = _drain(kubectl, "recover", "--skip-types", "Freeze",
                           SETUI_EVENT_TYPE=event_type)
        assert recovered.returncode == 0 and kubectl.calls() == []


@pytest.mark.slow
def test_a_started_event_leaves_no_time_to_drain_the_node_is_cordoned_only(
        tmp_path: Path) -> None:
    kubectl = _kubectl(tmp_path)
    done = _drain(kubectl, "prepare", SETUI_SECONDS_LEFT=None, SETUI_NOT_BEFORE="",
                  SETUI_EVENT_STATUS="Started")
    assert done.returncode == 3, done.stderr
    assert kubectl.verbs() == ["get", "annotate", "cordon"]
    assert "no time to drain" in done.stdout and "SETUI_NOT_BEFORE is empty" in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize(("variable", "form"), [
    ("SETUI_DEADLINE", "iso"), ("SETUI_NOT_BEFORE", "iso"),
    ("SETUI_NOT_BEFORE", "rfc1123")])  # as a setui before one way of writing times said it
def test_without_seconds_left_the_time_is_counted_from_not_before(tmp_path: Path,
                                                                  variable: str,
                                                                  form: str) -> None:
    kubectl = _kubectl(tmp_path)
    at = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(seconds=300)
    text = (at.strftime("%Y-%m-%dT%H:%M:%SZ") if form == "iso"
            else format_datetime(at, usegmt=True))
    done = _drain(kubectl, "prepare", SETUI_SECONDS_LEFT=None, **{variable: text})
    assert done.returncode == 0, done.stderr
    assert 270 <= _timeout(kubectl) <= 285


@pytest.mark.slow
def test_the_node_name_from_the_option_the_environment_or_the_host(tmp_path: Path) -> None:
    host = socket.gethostname().strip().lower()
    kubectl = install_fake(tmp_path, "kubectl", {
        name: {"unschedulable": False, "annotations": {}} for name in ("opt", "env", host)})
    for args, env, node in ((["--node", "opt"], {"NODE_NAME": "env"}, "opt"),
                            ([], {"NODE_NAME": "env"}, "env"), ([], {}, host)):
        kubectl.forget()
        done = run_hook("k8s-drain", "prepare", *args,
                        env=hook_env(kubectl, step="prepare", **env))
        assert done.returncode == 0, done.stderr
        assert kubectl.calls()[0] == ["get", "node", node, "--output", "json"]


@pytest.mark.slow
def test_the_kubeconfig_systemd_hands_over_is_used(tmp_path: Path) -> None:
    kubectl = _kubectl(tmp_path)
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "kubeconfig").write_text("apiVersion: v1\n")
    done = _drain(kubectl, "prepare", CREDENTIALS_DIRECTORY=str(credentials))
    assert done.returncode == 0, done.stderr
    assert {tuple(c[:2]) for c in kubectl.calls()} == {
        ("--kubeconfig", str(credentials / "kubeconfig"))}
    kubectl.forget()
    given = _drain(kubectl, "recover", "--kubeconfig", "/etc/setui/kube",
                   CREDENTIALS_DIRECTORY=str(credentials))
    assert given.returncode == 0 and kubectl.calls()[0][:2] == ["--kubeconfig", "/etc/setui/kube"]


@pytest.mark.parametrize(("args", "env", "words"), [
    ([], {"SETUI_EVENT_ID": None}, "SETUI_EVENT_ID is not set"),
    ([], {"SETUI_EVENT_ID": "\x1b[31mred"}, "SETUI_EVENT_ID is '\\x1b[31mred', not an EventId"),
    ([], {"SETUI_HOOK": "recover"}, "runs this as its 'recover' hook, but its argument says "
                                    "prepare"),
    ([], {"SETUI_SECONDS_LEFT": None}, "none of SETUI_SECONDS_LEFT, SETUI_DEADLINE"),
    ([], {"SETUI_SECONDS_LEFT": "soon"}, "SETUI_SECONDS_LEFT is 'soon', which is not a whole"),
    ([], {"SETUI_DEADLINE": "tomorrow", "SETUI_SECONDS_LEFT": None},
     "SETUI_DEADLINE is 'tomorrow', which is not a UTC time"),
    (["--node", "Not_A_Node"], {}, "the node name 'Not_A_Node' (from --node) is not a "
                                   "Kubernetes node name"),
    ([], {"PATH": "/nowhere"}, "'kubectl' is not found (PATH is '/nowhere')"),
    (["--skip-types", "Freez"], {}, "not an event type: 'Freez'"),
])
@pytest.mark.slow
def test_a_wrong_setup_exits_2_saying_what_to_fix_and_changes_nothing(
        tmp_path: Path, args: list[str], env: dict[str, str | None], words: str) -> None:
    kubectl = _kubectl(tmp_path)
    done = run_hook("k8s-drain", "prepare", *(args or ["--node", NODE]),
                    env=hook_env(kubectl, step="prepare", **env))
    assert done.returncode == 2
    assert words in done.stderr, done.stderr
    assert "\x1b" not in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert kubectl.calls() == []


@pytest.mark.slow
def test_drain_options_after_double_dash_are_added(tmp_path: Path) -> None:
    kubectl = _kubectl(tmp_path)
    done = _drain(kubectl, "prepare", "--", "--force", "--grace-period=60")
    assert done.returncode == 0, done.stderr
    drain = next(c for c in kubectl.calls() if c[0] == "drain")
    assert drain[2:6] == ["--ignore-daemonsets", "--delete-emptydir-data", "--force",
                          "--grace-period=60"]


@pytest.mark.slow
def test_two_events_prepared_at_once_are_both_remembered(tmp_path: Path) -> None:
    # The agent runs hooks of different events side by side: each reads the mark, then
    # writes it; the second must not write over the first.
    kubectl = _kubectl(tmp_path)
    both = [subprocess.Popen([str(HOOKS / "k8s-drain"), "prepare", "--node", NODE],
                             env=hook_env(kubectl, step="prepare", SETUI_EVENT_ID=event,
                                          FAKE_KUBECTL="get=slow"),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for event in (E1, E2)]
    for proc in both:
        output, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, output
    assert sorted(_node(kubectl)["annotations"][MARK].split(",")) == sorted([E1, E2])
    assert _drain(kubectl, "recover").returncode == 0
    assert _node(kubectl)["unschedulable"] is True  # E2 still holds it
