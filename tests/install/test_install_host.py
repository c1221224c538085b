"""`setui service install` on the running system, where it asks systemctl: in a private
mount namespace whose /etc is a copy and /var/lib empty (nothing reaches the machine's
own), with a stand-in systemctl that notes each call and answers as told."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.support.install_helpers import INCARNATIONS, on_a_private_system, stand_in_systemctl

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0,
                       reason="a private mount namespace, and the install, need root"),
]

# Inside the namespace: lay out what an earlier setui left, install, and report.
SCRIPT = r"""
import json, os, subprocess, sys
from pathlib import Path
from tests.support.install_helpers import recorder_layout, tree
from setui.store import Store

bin_dir, log, what = sys.argv[1], sys.argv[2], sys.argv[3]
root = Path("/")
if what in ("recorder", "old-agent", "busy", "round-trip"):
    units = root / "etc/systemd/system"
    for name in ("setui-recorder.service", "setui-agent.service"):
        if (units / name).exists() or (units / (name + ".d")).exists():
            raise SystemExit(f"the copy of /etc already holds {name}")
    recorder_layout(root)  # /etc is a copy, /var/lib a tmpfs: both this namespace's
    if what == "old-agent":
        os.rename(units / "setui-recorder.service", units / "setui-agent.service")
        os.rename(units / "setui-recorder.service.d", units / "setui-agent.service.d")
holder = None
if what == "busy":  # someone's own `setui watch` as root, say, still writing it
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; "
                               "f = open('/var/lib/private/setui/setui.db', 'rb'); "
                               "print('open', flush=True); time.sleep(300)"],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "open\n"
env = {k: v for k, v in os.environ.items() if not k.startswith("SETUI_")}
env.update(PATH=f"{bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin", SETUI_CONFIG="/nonexistent")
done = subprocess.run([sys.executable, "-m", "setui.cli", "service", "install",
                       *sys.argv[4:]], capture_output=True, text=True, env=env)
if holder is not None:
    holder.kill()
    holder.wait()
hook = Path("/etc/profile.d/setui-login.sh")
report = {"hook": hook.read_text() if hook.exists() else None}
if what == "round-trip":
    undone = subprocess.run([sys.executable, "-m", "setui.cli", "service", "uninstall"],
                            capture_output=True, text=True, env=env)
    report["uninstall"] = {"status": undone.returncode, "out": undone.stdout,
                           "err": undone.stderr, "hook": hook.exists()}
report |= {"status": done.returncode, "out": done.stdout, "err": done.stderr,
          "units": sorted(os.listdir("/etc/systemd/system")),
          "store": tree(Path("/var/lib")),
          "group": [line for line in Path("/etc/group").read_text().splitlines()
                    if line.startswith("setui:")]}
if Path("/var/lib/setui/setui.db").exists():
    with Store.open_dir("/var/lib/setui", readonly=True) as store:
        report["incarnations"] = len(store.history.incarnations(limit=None))
        report["verified"] = store.audit_log.verify().ok
print(json.dumps(report))
"""


def install_on_a_private_system(tmp_path: Path, what: str, *args: str, fail: str = "",
                                active: bool = False) -> tuple[dict[str, Any], list[str]]:
    log = tmp_path / "systemctl.log"
    bin_dir = stand_in_systemctl(tmp_path / "bin", log, fail=fail, active=active)
    done = on_a_private_system(SCRIPT, str(bin_dir), str(log), what, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return report, (log.read_text().splitlines() if log.exists() else [])


def test_the_recorder_is_stopped_its_store_moved_and_the_agent_started(
        tmp_path: Path) -> None:
    report, calls = install_on_a_private_system(tmp_path, "recorder", "--now")
    assert report["status"] == 0, report["out"] + report["err"]
    assert calls == ["disable --now setui-recorder.service", "daemon-reload",
                     "enable --now setui-agent.service"]
    assert "setui-recorder.service" not in report["units"]
    assert "setui-agent.service" in report["units"]
    gid = int(report["group"][0].split(":")[2])
    assert report["store"]["setui"] == ["d", 0, gid, 0o700]
    assert report["store"]["setui/setui.db"] == ["f", 0, gid, 0o600]
    assert report["incarnations"] == INCARNATIONS and report["verified"]
    out = report["out"]
    assert "stopped and disabled setui-recorder.service (it retires into " \
           "setui-agent.service)" in out
    assert "setui-agent is enabled and started" in out
    assert "usermod -aG setui NAME" in out
    assert report["hook"] is not None and "setui.loginline" in report["hook"]
    assert "wrote /etc/profile.d/setui-login.sh: an interactive login shell shows" in out


def test_uninstall_stops_the_agent_and_removes_the_unit_and_the_hook_not_the_store(
        tmp_path: Path) -> None:
    report, calls = install_on_a_private_system(tmp_path, "round-trip", "--now")
    assert report["status"] == 0, report["out"] + report["err"]
    undone = report["uninstall"]
    assert undone["status"] == 0, undone["out"] + undone["err"]
    assert calls == ["disable --now setui-recorder.service", "daemon-reload",
                     "enable --now setui-agent.service",
                     "disable --now setui-agent.service", "daemon-reload"]
    assert "setui-agent.service" not in report["units"] and not undone["hook"]
    assert "removed /etc/systemd/system/setui-agent.service" in undone["out"]
    assert "removed /etc/profile.d/setui-login.sh" in undone["out"]
    assert "removed /etc/setui (it was empty)" in undone["out"]
    # The record stays, whole.
    assert report["incarnations"] == INCARNATIONS and report["verified"]
    assert "left: the store /var/lib/setui" in undone["out"]


def test_an_agent_running_on_a_store_that_must_change_is_stopped_and_started_again(
        tmp_path: Path) -> None:
    """The agent's unit of an earlier version ran as a dynamic user, on the same store."""
    report, calls = install_on_a_private_system(tmp_path, "old-agent", active=True)
    assert report["status"] == 0, report["out"] + report["err"]
    assert calls == ["is-active --quiet setui-agent.service", "stop setui-agent.service",
                     "daemon-reload", "start setui-agent.service"]
    assert "stopped setui-agent.service while its store is taken over" in report["out"]
    assert "setui-agent is started again" in report["out"]
    assert "setui-agent.service.d holds drop-ins, left as they are: they still apply to " \
           "the new unit" in report["out"]
    assert report["verified"]


def test_a_store_in_use_is_left_and_the_recorder_started_again(tmp_path: Path) -> None:
    report, calls = install_on_a_private_system(tmp_path, "busy", "--now")
    assert report["status"] == 1
    assert "not taking the store over while something has it open: pid " in report["err"]
    assert "has /var/lib/private/setui/setui.db open" in report["err"]
    assert "nothing was changed" in report["err"]
    assert calls == ["disable --now setui-recorder.service",
                     "enable --now setui-recorder.service"]
    assert "started setui-recorder.service again, as it was" in report["out"]
    assert report["store"]["setui"][0] == "l" and "setui-recorder.service" in report["units"]
    assert "setui-agent.service" not in report["units"]


def test_a_failing_systemctl_stops_the_install_and_says_so(tmp_path: Path) -> None:
    report, calls = install_on_a_private_system(tmp_path, "recorder", fail="disable")
    assert report["status"] == 1
    assert "`systemctl disable --now setui-recorder.service` failed (exit 3)" in report["err"]
    assert calls == ["disable --now setui-recorder.service"]
    # Nothing moved: the recorder's store is where it was, its unit too.
    assert report["store"]["setui"][0] == "l" and "setui-recorder.service" in report["units"]


def test_without_systemctl_nothing_is_touched(tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    script = SCRIPT.replace('PATH=f"{bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin"', "PATH=bin_dir")
    assert script != SCRIPT
    done = on_a_private_system(script, str(empty), str(tmp_path / "log"), "recorder")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["status"] == 1
    assert "systemctl was not found on PATH" in report["err"] and report["out"] == ""
    assert report["store"]["setui"][0] == "l"
    assert "setui-agent.service" not in report["units"]
