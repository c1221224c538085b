"""``setui service print`` through real processes, the unit checked by ``systemd-analyze
verify`` where it exists and always parsed; and ``setui service install`` refused without
root. What install writes and does is tested in tests/install (a test root, and the
running system's path in a private mount namespace). The one test here that lets install
aim at the real paths runs it, as root, in a private mount namespace with a tmpfs over
/etc/systemd/system and as a mapped non-root user.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from setui.install import unit
from setui.install.installer import install
from setui.install.layout import Layout
from setui.install.unit import AGENT_UNIT, UnitError, exec_start_word, render_unit
from tests.support.install_helpers import installation, stand_in_systemctl

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


@pytest.fixture
def systemctl(tmp_path: Path) -> Callable[[int], tuple[Path, Path]]:
    """A stand-in systemctl: returns (a PATH holding it, its log of argument lines)."""
    def make(exit_status: int = 0) -> tuple[Path, Path]:
        directory = tmp_path / f"bin-{exit_status}"
        log = tmp_path / f"systemctl-{exit_status}.log"
        return stand_in_systemctl(directory, log), log
    return make


def calls(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


# -- print ------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("alias", [[], ["--agent"]])  # --agent: kept, and changes nothing
def test_print_writes_the_agents_unit_running_this_python(alias: list[str]) -> None:
    done = setui(sys.executable, "service", "print", *alias)
    assert done.returncode == 0, done.stderr
    # Printed all the same, with a warning, when this installation is one the unit
    # should not run.
    if unit.unit_problems():
        assert "setui: warning:" in done.stderr
    else:
        assert done.stderr == ""
    text = done.stdout
    assert text.startswith("# setui-agent.service: the VM's one setui service.")
    sections = unit_sections(text)
    assert set(sections) == {"Unit", "Service", "Install"}
    svc = sections["Service"]
    assert only(svc, "Type") == "notify"
    assert seconds(only(svc, "WatchdogSec")) >= 60
    assert only(svc, "Restart") == "on-failure"
    words = exec_words(only(svc, "ExecStart"))
    assert words[:4] == [sys.executable, "-m", "setui.cli", "agent"]
    assert words[words.index("--data-dir") + 1] == "/var/lib/setui"
    # Its identity: root (no User=), group setui; the store and the socket's directory.
    assert "User" not in svc and "DynamicUser" not in svc
    assert only(svc, "Group") == "setui" and only(svc, "UMask") == "0027"
    assert (only(svc, "StateDirectory"), only(svc, "StateDirectoryMode")) == ("setui", "0700")
    assert (only(svc, "RuntimeDirectory"), only(svc, "RuntimeDirectoryMode")) == (
        "setui", "0750")
    # What root keeps: three capabilities, no new privileges, a read-only system.
    assert set(only(svc, "CapabilityBoundingSet").split()) == {
        "CAP_SETUID", "CAP_SETGID", "CAP_KILL"}
    assert only(svc, "AmbientCapabilities") == ""
    assert only(svc, "NoNewPrivileges") == "yes"
    assert only(svc, "ProtectSystem") == "strict"
    assert only(svc, "ProtectHome") == "read-only"
    assert "ReadWritePaths" not in svc  # its own directories are all it writes
    assert "ProtectProc" not in svc  # it must see its clients' processes
    assert set(only(svc, "RestrictAddressFamilies").split()) == {
        "AF_UNIX", "AF_INET", "AF_INET6"}
    assert only(svc, "SystemCallFilter") == "@system-service"
    for key in ("PrivateTmp", "PrivateDevices", "RestrictSUIDSGID", "RestrictNamespaces"):
        assert only(svc, key) == "yes", key
    assert only(svc, "Environment") == "SETUI_CONFIG=/etc/setui/config.toml"
    assert only(sections["Install"], "WantedBy") == "multi-user.target"


@pytest.mark.slow
def test_the_printed_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    done = setui(sys.executable, "service", "print")
    assert done.returncode == 0, done.stderr
    unit_file = tmp_path / AGENT_UNIT
    unit_file.write_text(done.stdout, encoding="utf-8")
    verify(unit_file)


def test_the_shipped_unit_has_one_execstart_to_rewrite() -> None:
    shipped = unit_sections(unit.template())
    assert exec_words(only(shipped["Service"], "ExecStart"))[1:3] == ["-m", "setui.cli"]
    assert "ExecStart=/opt/x/python -m setui.cli agent --data-dir /var/lib/setui\n" in \
        render_unit("/opt/x/python")


@pytest.mark.slow
def test_an_interpreter_path_with_spaces_and_specifiers(tmp_path: Path) -> None:
    directory = tmp_path / "my env %h $HOME;x €"
    directory.mkdir()
    python = directory / "python"
    python.symlink_to(sys.executable)
    text = render_unit(str(python))
    line = next(v for v in text.splitlines() if v.startswith("ExecStart="))
    assert exec_words(line.partition("=")[2])[0] == str(python)
    unit_file = tmp_path / AGENT_UNIT
    unit_file.write_text(text, encoding="utf-8")
    # systemd finds the executable only if it reads the word exactly as that path.
    verify(unit_file)


@pytest.mark.parametrize("bad", ["", "python3", "/opt/a\nExecStartPre=/bin/evil",
                                 "/opt/o'brien/python", '/opt/"q"/python', "/opt/a\\b/python"])
def test_an_interpreter_that_cannot_be_named_is_refused(bad: str) -> None:
    with pytest.raises(UnitError):
        render_unit(bad)


def test_plain_paths_stay_plain() -> None:
    assert exec_start_word("/opt/setui/bin/python3.12") == "/opt/setui/bin/python3.12"
    assert exec_start_word("/opt/100%/python") == "/opt/100%%/python"
    assert exec_start_word("/opt/my env/python") == '"/opt/my env/python"'


def test_an_installation_the_unit_cannot_see_or_someone_else_could_change_is_named(
        tmp_path: Path) -> None:
    system = installation().package  # root's, outside /tmp
    assert unit.unit_problems(installation().python, system) == []
    hidden = unit.unit_problems("/tmp/venv/bin/python", system)
    assert len(hidden) == 1 and "/tmp/venv/bin/python, is under /tmp" in hidden[0]
    assert "PrivateTmp=" in hidden[0]
    assert "/var/tmp" in unit.unit_problems("/var/tmp/v/bin/python", system)[0]
    # Root runs it: a Python or a setui another user could change is named (StrictModes).
    # Not in /tmp, which is named first: beside the installation.
    other = Path(tempfile.mkdtemp(dir=installation().home))
    try:
        python = other / "python"
        python.symlink_to(sys.executable)
        os.chown(other, 65534, 65534)
        found = unit.unit_problems(str(python), system)
        assert len(found) == 1 and "could be changed by someone but root" in found[0]
        assert "uid 65534" in found[0]
    finally:
        shutil.rmtree(other, ignore_errors=True)


@pytest.mark.slow
def test_usage_errors_exit_2() -> None:
    for args in (["service"], ["service", "start"], ["service", "install", "--bogus"]):
        done = setui(sys.executable, *args)
        assert done.returncode == 2, (args, done.stderr)
        assert "usage:" in done.stderr


# -- install ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_install_without_root_is_refused(
        systemctl: Callable[[int], tuple[Path, Path]]) -> None:
    """Aimed at /etc/systemd/system. As root, the child runs in its own mount namespace
    with a tmpfs over that directory and as a mapped non-root user, so even a broken
    refusal could not touch the real /etc."""
    path, log = systemctl(0)
    target = unit.UNIT_DIR
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
    """The same check without a child: a test root, an unprivileged user id, and nothing
    may appear there."""
    import io

    if not sys.platform.startswith("linux"):
        pytest.skip("install is for Linux")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    out, err = io.StringIO(), io.StringIO()
    assert install(Layout(tmp_path), now=True, out=out, err=err) == 1
    assert "needs root (under" in err.getvalue() and out.getvalue() == ""
    assert list(tmp_path.iterdir()) == []
