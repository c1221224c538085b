"""contrib/hooks/systemd-services against a fake systemctl that keeps the units and records
each call: stop what runs, start after only what it stopped, across re-runs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.hookrun import E1, E2, HOOKS, Fake, hook_env, install_fake, run_hook

pytestmark = pytest.mark.skipif(not os.access("/usr/bin/python3", os.X_OK),
                                reason="the hooks run on the VM's /usr/bin/python3")


def _systemctl(tmp_path: Path, **units: str) -> Fake:
    return install_fake(tmp_path, "systemctl",
                        {f"{name}.service": state for name, state in units.items()})


def _services(systemctl: Fake, step: str, *args: str, **env: str | None):  # type: ignore[no-untyped-def]
    state = systemctl.state_file.parent / "hook-state"
    return run_hook("systemd-services", step, "--state-dir", str(state), *args,
                    env=hook_env(systemctl, step=step, **env))


def _changes(systemctl: Fake) -> list[list[str]]:
    return [c for c in systemctl.calls() if c[0] != "show"]


@pytest.mark.slow
def test_prepare_stops_what_runs_and_recover_starts_only_that(tmp_path: Path) -> None:
    systemctl = _systemctl(tmp_path, app="active", cache="inactive", web="active")
    prepared = _services(systemctl, "prepare", "app", "cache", "web.service")
    assert prepared.returncode == 0, prepared.stderr
    assert _changes(systemctl) == [["stop", "--no-ask-password", "app.service"],
                                   ["stop", "--no-ask-password", "web.service"]]
    assert "cache.service was not running: left as it is" in prepared.stdout
    systemctl.forget()
    recovered = _services(systemctl, "recover", "app", "cache", "web.service")
    assert recovered.returncode == 0, recovered.stderr
    assert _changes(systemctl) == [["start", "--no-ask-password", "web.service"],
                                   ["start", "--no-ask-password", "app.service"]]
    assert systemctl.state() == {"app.service": "active", "cache.service": "inactive",
                                 "web.service": "active"}
    # Again (a restarted agent, an operator): nothing more.
    systemctl.forget()
    assert _services(systemctl, "recover", "app", "cache", "web").returncode == 0
    assert _changes(systemctl) == []


@pytest.mark.slow
def test_a_re_run_of_prepare_remembers_it_stopped_the_unit(tmp_path: Path) -> None:
    systemctl = _systemctl(tmp_path, app="active")
    assert _services(systemctl, "prepare", "app").returncode == 0
    again = _services(systemctl, "prepare", "app")
    assert again.returncode == 0 and "stopped by this hook, for " + E1 in again.stdout
    assert _services(systemctl, "recover", "app").returncode == 0
    assert systemctl.state() == {"app.service": "active"}


@pytest.mark.slow
def test_overlapping_events_keep_the_unit_stopped_until_both_have_passed(
        tmp_path: Path) -> None:
    systemctl = _systemctl(tmp_path, app="active")
    assert _services(systemctl, "prepare", "app").returncode == 0
    assert _services(systemctl, "prepare", "app", SETUI_EVENT_ID=E2).returncode == 0
    first = _services(systemctl, "recover", "app")
    assert first.returncode == 0 and f"stays stopped for {E2}" in first.stdout
    assert systemctl.state() == {"app.service": "inactive"}
    assert _services(systemctl, "recover", "app", SETUI_EVENT_ID=E2).returncode == 0
    assert systemctl.state() == {"app.service": "active"}


@pytest.mark.slow
def test_a_stop_still_running_at_the_deadline_exits_3_and_recover_starts_it(
        tmp_path: Path) -> None:
    systemctl = _systemctl(tmp_path, app="active")
    done = _services(systemctl, "prepare", "--margin", "1", "app", SETUI_SECONDS_LEFT="3",
                     FAKE_SYSTEMCTL="stop=hang")
    assert done.returncode == 3, done.stderr
    assert "did not finish in the" in done.stdout and "recover starts the unit" in done.stdout
    systemctl.forget()
    assert _services(systemctl, "recover", "app").returncode == 0
    assert _changes(systemctl) == [["start", "--no-ask-password", "app.service"]]


@pytest.mark.slow
def test_no_time_left_stops_nothing(tmp_path: Path) -> None:
    systemctl = _systemctl(tmp_path, app="active")
    done = _services(systemctl, "prepare", "app", SETUI_SECONDS_LEFT="5")  # margin 10
    assert done.returncode == 3
    assert "no time to stop anything: 5 s left before the event (SETUI_SECONDS_LEFT), " \
           "--margin 10; app.service left as they are" in done.stdout
    assert _changes(systemctl) == []
    assert _services(systemctl, "recover", "app").returncode == 0
    assert _changes(systemctl) == []


@pytest.mark.slow
def test_a_failed_stop_or_start_exits_1_saying_so(tmp_path: Path) -> None:
    systemctl = _systemctl(tmp_path, app="active")
    stopped = _services(systemctl, "prepare", "app", FAKE_SYSTEMCTL="stop=fail")
    assert stopped.returncode == 1
    assert "systemctl stop app.service failed (exit 1, see above)" in stopped.stdout
    started = _services(systemctl, "recover", "app", FAKE_SYSTEMCTL="start=fail")
    assert started.returncode == 1 and "running recover again tries again" in started.stdout
    assert _services(systemctl, "recover", "app").returncode == 0
    assert systemctl.calls()[-1] == ["start", "--no-ask-password", "app.service"]


@pytest.mark.slow
def test_skip_types_leaves_a_freeze_alone(tmp_path: Path) -> None:
    systemctl = _systemctl(tmp_path, app="active")
    done = _services(systemctl, "prepare", "--skip-types", "Freeze,Preempt", "app",
                     SETUI_EVENT_TYPE="Freeze")
    assert done.returncode == 0 and _changes(systemctl) == []
    assert systemctl.state() == {"app.service": "active"}


@pytest.mark.parametrize(("units", "env", "words"), [
    (["app", "nope"], {}, "no such unit on this VM: nope.service"),
    (["../etc/passwd"], {}, "'../etc/passwd' is not a unit name"),
    (["app"], {"PATH": "/nowhere"}, "systemctl is not found"),
    (["app"], {"SETUI_EVENT_ID": None}, "SETUI_EVENT_ID is not set"),
])
@pytest.mark.slow
def test_a_wrong_setup_exits_2_and_stops_nothing(tmp_path: Path, units: list[str],
                                                 env: dict[str, str | None],
                                                 words: str) -> None:
    systemctl = _systemctl(tmp_path, app="active")
    done = _services(systemctl, "prepare", *units, **env)
    assert done.returncode == 2
    assert words in done.stderr, done.stderr
    assert _changes(systemctl) == [] and "Traceback" not in done.stderr


@pytest.mark.slow
def test_two_events_prepared_at_once_are_both_remembered(tmp_path: Path) -> None:
    # The agent runs hooks of different events side by side: each reads the mark, then
    # writes it; the second must not write over the first.
    systemctl = _systemctl(tmp_path, app="active")
    state = tmp_path / "hook-state"
    both = [subprocess.Popen(
        [str(HOOKS / "systemd-services"), "prepare", "--state-dir", str(state), "app"],
        env=hook_env(systemctl, step="prepare", SETUI_EVENT_ID=event,
                     FAKE_SYSTEMCTL="show=slow"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for event in (E1, E2)]
    for proc in both:
        output, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, output
    marked = (state / "app.service.stopped-for").read_text().split()
    assert sorted(marked) == sorted([E1, E2])


@pytest.mark.slow
def test_a_state_dir_it_cannot_write_stops_nothing(tmp_path: Path) -> None:
    systemctl = _systemctl(tmp_path, app="active")
    (tmp_path / "a-file").write_text("")
    done = run_hook("systemd-services", "prepare", "--state-dir", str(tmp_path / "a-file"),
                    "app", env=hook_env(systemctl, step="prepare"))
    assert done.returncode == 2
    assert "--state-dir must be a directory the agent can read and write" in done.stderr
    assert _changes(systemctl) == [] and systemctl.state() == {"app.service": "active"}
