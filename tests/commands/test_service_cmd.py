"""``setui service print`` and ``setui service install`` through real processes; the
unit checked by ``systemd-analyze verify`` where it exists, and always parsed.

``install`` only ever writes into a temporary ``--unit-dir`` and runs a stand-in
``systemctl`` that records its arguments: never /etc, never the real systemd. The one
test that lets install aim at /etc/systemd/system (to see it refused without root) runs
it either as a user who cannot write there or, as root, in a private mount namespace
with a tmpfs over that directory.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from permissions import lock_up
from setui.commands import service
from setui.commands.service import UNIT_NAME, UnitError, exec_start_word, render_unit

ROOT = Path(__file__).parents[2]

pytestmark = pytest.mark.skipif(os.name != "posix", reason="systemd units are for Linux")


def setui(python: str | Path, *args: str, path: Path | None = None,
          preexec_fn: Callable[[], Any] | None = None) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("SETUI_")}
    env["SETUI_CONFIG"] = os.devnull + ".absent"  # no config file at all
    if path is not None:
        env["PATH"] = str(path)
    return subprocess.run([str(python), "-m", "setui.cli", *args], capture_output=True,
                          text=True, env=env, timeout=120, stdin=subprocess.DEVNULL,
                          preexec_fn=preexec_fn)


def unit_sections(text: str) -> dict[str, dict[str, list[str]]]:
    """Sections -> key -> every value given (a key may repeat), comments left out."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for line in text.splitlines():
        if not line.strip() or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None, f"a setting before any section: {line!r}"
        key, sep, value = line.partition("=")
        assert sep, f"not a setting: {line!r}"
        current.setdefault(key, []).append(value)
    return sections


def only(section: dict[str, list[str]], key: str) -> str:
    values = section.get(key)
    assert values is not None and len(values) == 1, f"{key}: {values}"
    return values[0]


def exec_words(value: str) -> list[str]:
    """ExecStart= as systemd splits it (shell-like quoting) with specifiers unescaped.
    (``$`` stays as it is: the executable, the only word tested with one, is not
    expanded.)"""
    return [word.replace("%%", "%") for word in shlex.split(value)]


def seconds(value: str) -> float:
    units = {"ms": 0.001, "s": 1, "sec": 1, "min": 60, "m": 60, "h": 3600}
    for suffix, factor in sorted(units.items(), key=lambda item: -len(item[0])):
        if value.endswith(suffix):
            return float(value[: -len(suffix)]) * factor
    return float(value)


def verify(unit: Path) -> None:
    """systemd-analyze verify, with any warning counted as a failure."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian: apt-get install systemd)")
    done = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and not done.stderr.strip() and not done.stdout.strip(), (
        done.stdout + done.stderr)


@pytest.fixture(scope="module")
def outside_home(request: pytest.FixtureRequest) -> Path:
    """A Python that is not in a home directory and runs this setui: a venv with copies
    of the interpreter, which sees the test venv's packages. The service could run it
    (the test venv itself may link to a Python in /root, which it could not)."""
    # Not under /tmp, which the unit cannot see either (PrivateTmp=): in build/.
    ROOT.joinpath("build").mkdir(exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="service-venv-", dir=ROOT / "build"))
    request.addfinalizer(lambda: shutil.rmtree(root, ignore_errors=True))
    if service.unit_problems(python=str(root / "bin" / "python"), package=root):
        pytest.skip(f"the directory {root} is one the unit cannot see")
    subprocess.run([sys.executable, "-m", "venv", "--copies", "--without-pip", str(root)],
                   check=True, capture_output=True, timeout=120)
    python = root / "bin" / "python"
    purelib = subprocess.run([str(python), "-c",
                              "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             check=True, capture_output=True, text=True, timeout=60).stdout
    ours = sysconfig.get_path("purelib")
    Path(purelib.strip(), "test-venv.pth").write_text(
        f"import site; site.addsitedir({ours!r})\n", encoding="utf-8")
    done = subprocess.run([str(python), "-c", "import setui.cli, setui.commands.service; "
                           "print(setui.commands.service.unit_problems())"],
                          capture_output=True, text=True, timeout=60)
    if done.returncode != 0 or done.stdout.strip() != "[]":
        pytest.skip(f"cannot make a Python outside a home directory: {done.stderr}")
    return python


@pytest.fixture
def systemctl(tmp_path: Path) -> Callable[[int], tuple[Path, Path]]:
    """A stand-in systemctl: returns (a PATH holding it, its log of argument lines)."""
    def make(exit_status: int = 0) -> tuple[Path, Path]:
        directory = tmp_path / f"bin-{exit_status}"
        directory.mkdir()
        log = tmp_path / f"systemctl-{exit_status}.log"
        script = directory / "systemctl"
        script.write_text(f'#!/bin/sh\necho "$*" >> {shlex.quote(str(log))}\n'
                          f"exit {exit_status}\n", encoding="utf-8")
        script.chmod(0o755)
        return directory, log
    return make


def calls(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


# -- print ------------------------------------------------------------------------------------
@pytest.mark.slow
def test_print_writes_a_unit_running_this_python_as_the_recorder() -> None:
    done = setui(sys.executable, "service", "print")
    assert done.returncode == 0, done.stderr
    # Printed all the same, with a warning, when this installation is in a home directory.
    if service.unit_problems():
        assert "setui: warning:" in done.stderr and "cannot see" in done.stderr
    else:
        assert done.stderr == ""
    text = done.stdout
    assert text.startswith("# setui-recorder.service: keeps a setui recorder running")
    unit = unit_sections(text)
    assert set(unit) == {"Unit", "Service", "Install"}
    svc = unit["Service"]
    assert only(svc, "Type") == "notify"
    assert seconds(only(svc, "WatchdogSec")) >= 60
    assert only(svc, "Restart") == "on-failure"
    state = only(svc, "StateDirectory")
    assert state == "setui"
    words = exec_words(only(svc, "ExecStart"))
    assert words[:4] == [sys.executable, "-m", "setui.cli", "watch"]
    assert "--no-record" not in words and "--json" not in words
    assert words[words.index("--data-dir") + 1] == f"/var/lib/{state}"
    # What the recorder needs: TCP to 169.254.169.254, AF_UNIX to notify, its state dir.
    assert set(only(svc, "RestrictAddressFamilies").split()) == {
        "AF_UNIX", "AF_INET", "AF_INET6"}
    assert "169.254.169.254" in only(svc, "IPAddressAllow").split()
    assert only(svc, "IPAddressDeny") == "any"
    assert "PrivateNetwork" not in svc
    assert only(svc, "CapabilityBoundingSet") == ""
    assert only(svc, "ProtectSystem") == "strict"
    assert only(svc, "ProtectHome") == "yes"
    for key in ("NoNewPrivileges", "PrivateTmp", "DynamicUser"):
        assert only(svc, key) == "yes", key
    assert "ReadOnlyPaths" not in svc and "InaccessiblePaths" not in svc
    assert only(unit["Install"], "WantedBy") == "multi-user.target"


@pytest.mark.slow
def test_the_printed_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    done = setui(sys.executable, "service", "print")
    assert done.returncode == 0, done.stderr
    unit = tmp_path / UNIT_NAME
    unit.write_text(done.stdout, encoding="utf-8")
    verify(unit)


def test_the_shipped_unit_has_one_execstart_to_rewrite() -> None:
    shipped = unit_sections(service.template())
    assert exec_words(only(shipped["Service"], "ExecStart"))[1:3] == ["-m", "setui.cli"]
    assert "ExecStart=/opt/x/python -m setui.cli watch" in render_unit("/opt/x/python")


@pytest.mark.slow
def test_an_interpreter_path_with_spaces_and_specifiers(tmp_path: Path) -> None:
    directory = tmp_path / "my env %h $HOME;x €"
    directory.mkdir()
    python = directory / "python"
    python.symlink_to(sys.executable)
    text = render_unit(str(python))
    line = next(v for v in text.splitlines() if v.startswith("ExecStart="))
    assert exec_words(line.partition("=")[2])[0] == str(python)
    unit = tmp_path / UNIT_NAME
    unit.write_text(text, encoding="utf-8")
    # systemd finds the executable only if it reads the word exactly as that path.
    verify(unit)


@pytest.mark.parametrize("bad", ["", "python3", "/opt/a\nExecStartPre=/bin/evil",
                                 "/opt/o'brien/python", '/opt/"q"/python', "/opt/a\\b/python"])
def test_an_interpreter_that_cannot_be_named_is_refused(bad: str) -> None:
    with pytest.raises(UnitError):
        render_unit(bad)


def test_plain_paths_stay_plain() -> None:
    assert exec_start_word("/opt/setui/bin/python3.12") == "/opt/setui/bin/python3.12"
    assert exec_start_word("/opt/100%/python") == "/opt/100%%/python"
    assert exec_start_word("/opt/my env/python") == '"/opt/my env/python"'


def test_an_installation_inside_a_home_directory_is_named() -> None:
    system = Path("/opt/setui/lib/setui")
    assert service.unit_problems("/opt/setui/bin/python", system) == []
    home = service.unit_problems("/home/alice/.local/pipx/venvs/setui/bin/python", system)
    assert len(home) == 1 and "/home" in home[0]
    assert any("/root" in p for p in service.unit_problems(
        "/opt/setui/bin/python", Path("/root/.local/lib/python3.12/site-packages/setui")))


@pytest.mark.slow
def test_usage_errors_exit_2() -> None:
    for args in (["service"], ["service", "start"], ["service", "install", "--bogus"]):
        done = setui(sys.executable, *args)
        assert done.returncode == 2, (args, done.stderr)
        assert "usage:" in done.stderr


# -- install ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_install_writes_the_unit_0644_and_reloads_systemd(
        outside_home: Path, systemctl: Callable[[int], tuple[Path, Path]],
        tmp_path: Path) -> None:
    units = tmp_path / "units"
    units.mkdir()
    path, log = systemctl(0)
    done = setui(outside_home, "service", "install", "--unit-dir", str(units), path=path)
    assert done.returncode == 0, done.stderr
    unit = units / UNIT_NAME
    assert sorted(p.name for p in units.iterdir()) == [UNIT_NAME]  # no temporary left
    assert unit.stat().st_mode & 0o777 == 0o644
    printed = setui(outside_home, "service", "print")
    assert unit.read_text(encoding="utf-8") == printed.stdout
    assert exec_words(only(unit_sections(printed.stdout)["Service"], "ExecStart"))[0] == str(
        outside_home)
    assert calls(log) == ["daemon-reload"]
    assert "enable --now" in done.stdout
    verify(unit)


@pytest.mark.slow
def test_install_now_enables_and_starts_it(
        outside_home: Path, systemctl: Callable[[int], tuple[Path, Path]],
        tmp_path: Path) -> None:
    path, log = systemctl(0)
    done = setui(outside_home, "service", "install", "--now", "--unit-dir", str(tmp_path),
                 path=path)
    assert done.returncode == 0, done.stderr
    assert calls(log) == ["daemon-reload", f"enable --now {UNIT_NAME}"]
    assert "enabled and started" in done.stdout


@pytest.mark.slow
def test_install_replaces_an_old_unit_by_renaming_over_it(
        outside_home: Path, systemctl: Callable[[int], tuple[Path, Path]],
        tmp_path: Path) -> None:
    path, log = systemctl(0)
    unit = tmp_path / UNIT_NAME
    unit.write_text("[Service]\nExecStart=/old/python -m setui.cli watch\n", encoding="utf-8")
    unit.chmod(0o600)
    before = unit.stat().st_ino
    done = setui(outside_home, "service", "install", "--unit-dir", str(tmp_path), path=path)
    assert done.returncode == 0, done.stderr
    assert unit.stat().st_ino != before  # a new file renamed into place, not rewritten
    assert unit.stat().st_mode & 0o777 == 0o644
    assert "/old/python" not in unit.read_text(encoding="utf-8")
    assert "systemctl restart setui-recorder" in done.stdout
    again = setui(outside_home, "service", "install", "--unit-dir", str(tmp_path), path=path)
    assert again.returncode == 0, again.stderr
    assert "unchanged" in again.stdout and "restart" not in again.stdout
    assert calls(log) == ["daemon-reload", "daemon-reload"]


@pytest.mark.slow
def test_install_without_systemctl_says_so(outside_home: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    units = tmp_path / "units"
    units.mkdir()
    done = setui(outside_home, "service", "install", "--unit-dir", str(units), path=empty)
    assert done.returncode == 1
    assert "systemctl was not found" in done.stderr
    assert "does not seem to run systemd" in done.stderr
    assert list(units.iterdir()) == []


@pytest.mark.slow
@pytest.mark.parametrize("now", [[], ["--now"]])
def test_a_failing_daemon_reload_is_reported(
        outside_home: Path, systemctl: Callable[[int], tuple[Path, Path]], tmp_path: Path,
        now: list[str]) -> None:
    path, log = systemctl(3)
    done = setui(outside_home, "service", "install", *now, "--unit-dir", str(tmp_path),
                 path=path)
    assert done.returncode == 1
    assert "`systemctl daemon-reload` failed (exit 3)" in done.stderr
    assert calls(log) == ["daemon-reload"]  # nothing enabled after a failed reload


@pytest.mark.slow
def test_a_failing_enable_points_at_the_logs(
        outside_home: Path, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "systemctl"
    script.write_text('#!/bin/sh\n[ "$1" = enable ] && exit 1\nexit 0\n', encoding="utf-8")
    script.chmod(0o755)
    done = setui(outside_home, "service", "install", "--now", "--unit-dir", str(tmp_path),
                 path=bin_dir)
    assert done.returncode == 1
    assert "`systemctl enable --now setui-recorder.service` failed (exit 1)" in done.stderr
    assert "journalctl -u setui-recorder" in done.stderr


@pytest.mark.slow
def test_install_into_a_missing_directory(
        outside_home: Path, systemctl: Callable[[int], tuple[Path, Path]],
        tmp_path: Path) -> None:
    path, log = systemctl(0)
    done = setui(outside_home, "service", "install", "--unit-dir", str(tmp_path / "nope"),
                 path=path)
    assert done.returncode == 1
    assert "is not a directory" in done.stderr
    assert calls(log) == []


@pytest.mark.slow
def test_install_into_a_directory_it_cannot_write(
        outside_home: Path, systemctl: Callable[[int], tuple[Path, Path]],
        unwritable: tuple[Path, Callable[[], Any] | None]) -> None:
    units, how = unwritable
    units.mkdir()
    lock_up(units, how)
    path, log = systemctl(0)
    done = setui(outside_home, "service", "install", "--unit-dir", str(units), path=path,
                 preexec_fn=how)
    assert done.returncode == 1
    assert f"cannot write {units / UNIT_NAME}: Permission denied" in done.stderr
    assert list(units.iterdir()) == []
    assert calls(log) == []


@pytest.mark.slow
def test_install_refuses_an_installation_the_service_cannot_see(
        systemctl: Callable[[int], tuple[Path, Path]], tmp_path: Path) -> None:
    """The test venv itself: on a machine where its Python lives in a home directory
    (as here, under /root/.pyenv), install says so instead of writing a unit that fails."""
    path, log = systemctl(0)
    units = tmp_path / "units"
    units.mkdir()
    done = setui(sys.executable, "service", "install", "--unit-dir", str(units), path=path)
    if service.unit_problems():
        assert done.returncode == 1
        assert "not installing the service" in done.stderr
        assert "which the service cannot see" in done.stderr
        assert list(units.iterdir()) == [] and calls(log) == []
    else:
        assert done.returncode == 0, done.stderr
        assert calls(log) == ["daemon-reload"]


@pytest.mark.slow
def test_install_without_root_is_refused(
        systemctl: Callable[[int], tuple[Path, Path]]) -> None:
    """Aimed at /etc/systemd/system. As root, the child runs in its own mount namespace
    with a tmpfs over that directory and as a mapped non-root user, so even a broken
    refusal could not touch the real /etc."""
    path, log = systemctl(0)
    target = service.UNIT_DIR
    argv = [sys.executable, "-m", "setui.cli", "service", "install", "--now"]
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("SETUI_")},
           "PATH": f"{path}:/usr/bin:/bin", "SETUI_CONFIG": os.devnull + ".absent"}
    if os.geteuid() == 0:
        unshare, mount = shutil.which("unshare"), shutil.which("mount")
        if unshare is None or mount is None or not target.is_dir():
            pytest.skip("as root, this needs unshare and mount to keep /etc out of reach")
        script = ('mount -t tmpfs setui-test "$1" || exit 97; shift; '
                  'unshare --user "$@"; status=$?; echo "left:$(ls -A "$0")"; exit $status')
        argv = [unshare, "--mount", "--propagation", "private", "sh", "-c", script,
                str(target), str(target), *argv]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120,
                          stdin=subprocess.DEVNULL)
    if done.returncode == 97 or "unshare failed" in done.stderr:
        pytest.skip(f"no private mount and user namespace here: {done.stderr.strip()}")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "needs root" in done.stderr
    assert 'sudo "$(command -v setui)" service install' in done.stderr
    assert calls(log) == []
    if os.geteuid() == 0:
        assert "left:\n" in done.stdout or done.stdout.rstrip().endswith("left:")


def test_install_refusal_in_process(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The same check without a child: the default directory pointed at a temporary one,
    an unprivileged user id, and nothing may appear there."""
    import io

    if not sys.platform.startswith("linux"):
        pytest.skip("install is for Linux")
    monkeypatch.setattr(service, "UNIT_DIR", tmp_path)
    monkeypatch.setattr(service.os, "geteuid", lambda: 1000)
    out, err = io.StringIO(), io.StringIO()
    assert service.install(now=True, unit_dir=None, out=out, err=err) == 1
    assert "needs root" in err.getvalue()
    assert list(tmp_path.iterdir()) == []
