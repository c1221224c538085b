"""`setui service install --root DIR`: the unit, the group (in DIR/etc/group), the
directories, every owner and mode, in a test root; the recorder's unit and store retired
into the agent's, end to end; and every refusal leaving the root as it was. A stand-in
systemctl on PATH proves none is run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from setui.install.loginhook import render_hook
from setui.install.unit import render_unit
from setui.store import Store
from tests.support.install_helpers import (
    DYNAMIC_UID,
    INCARNATIONS,
    OPERATOR_UID,
    calls,
    filled_store,
    group_of,
    installation,
    new_root,
    recorder_layout,
    setui,
    stand_in_systemctl,
    tree,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0,
                       reason="the install sets owners: it runs as root"),
]
STORE_FILES = ["setui.db", "setui.db-shm", "setui.db-wal", "setui.db.audit-head", "agent.lock"]


@pytest.fixture
def systemctl(tmp_path: Path) -> tuple[Path, Path]:
    log = tmp_path / "systemctl.log"
    return stand_in_systemctl(tmp_path / "bin", log), log


def verify(unit: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:  # .ci/run installs Debian's systemd, which brings it
        pytest.skip("systemd-analyze is not installed (Debian: apt-get install systemd)")
    done = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), done.stderr


def test_an_empty_root_gets_the_group_the_directories_and_the_unit(
        tmp_path: Path, systemctl: tuple[Path, Path]) -> None:
    root = new_root(tmp_path)
    path, log = systemctl
    done = setui("service", "install", "--root", str(root), path=path)
    assert done.returncode == 0, done.stdout + done.stderr
    gid = group_of(root)
    unit = "etc/systemd/system/setui-agent.service"
    assert tree(root) == {
        "etc": ("d", 0, 0, 0o755),
        "etc/group": ("f", 0, 0, 0o644),
        "etc/group-": ("f", 0, 0, 0o644),  # groupadd's own backup
        "etc/profile.d": ("d", 0, 0, 0o755),
        "etc/profile.d/setui-login.sh": ("f", 0, 0, 0o644),
        "etc/setui": ("d", 0, 0, 0o700),
        "etc/systemd": ("d", 0, 0, 0o755),
        "etc/systemd/system": ("d", 0, 0, 0o755),
        unit: ("f", 0, 0, 0o644),
        "var": ("d", 0, 0, 0o755),
        "var/lib": ("d", 0, 0, 0o755),
        "var/lib/setui": ("d", 0, gid, 0o700),
    }
    installed = installation()
    assert (root / unit).read_text() == render_unit(installed.python)
    assert (root / "etc/profile.d/setui-login.sh").read_text() == \
        render_hook(installed.python, installed.package.parent)
    assert f"made the group setui (gid {gid}) in {root / 'etc/group'}" in done.stdout
    assert f"made {root / 'var/lib/setui'}" in done.stdout
    assert f"made {root / 'etc/setui'}" in done.stdout
    assert f"wrote {root / unit}" in done.stdout
    assert "no systemctl was run" in done.stdout
    assert calls(log) == []
    verify(root / unit)
    # Again: nothing changes, and it says so.
    before, inode = tree(root), (root / unit).stat().st_ino
    again = setui("service", "install", "--root", str(root), path=path)
    assert again.returncode == 0, again.stderr
    assert f"found the group setui (gid {gid})" in again.stdout
    assert f"unchanged: {root / 'var/lib/setui'}" in again.stdout
    assert f"unchanged: {root / unit}" in again.stdout
    assert tree(root) == before and (root / unit).stat().st_ino == inode
    assert calls(log) == []


def test_the_recorder_retires_into_the_agent_with_its_history(
        tmp_path: Path, systemctl: tuple[Path, Path]) -> None:
    root = new_root(tmp_path)
    recorder_layout(root)
    with Store.open_dir(root / "var/lib/private/setui", readonly=True) as old:
        records = [(r.seq, r.hash) for r in old.audit_log.records()]
    path, log = systemctl
    done = setui("service", "install", "--root", str(root), "--now", path=path)
    assert done.returncode == 0, done.stdout + done.stderr
    gid = group_of(root)
    after = tree(root)
    # The store moved whole, and is root's alone.
    assert after["var/lib/setui"] == ("d", 0, gid, 0o700)
    assert sorted(p.name for p in (root / "var/lib/setui").iterdir()) == sorted(STORE_FILES)
    for name in STORE_FILES:
        assert after[f"var/lib/setui/{name}"] == ("f", 0, gid, 0o600), name
    assert after["var/lib/private"] == ("d", 0, 0, 0o700)
    assert not any(key.startswith("var/lib/private/") for key in after)
    assert not any(DYNAMIC_UID in (uid, g) for _, uid, g, _ in after.values())
    # The recorder's unit is gone; the agent's is there; the drop-in is the user's.
    assert "etc/systemd/system/setui-recorder.service" not in after
    assert after["etc/systemd/system/setui-agent.service"] == ("f", 0, 0, 0o644)
    assert "etc/systemd/system/setui-recorder.service.d/override.conf" in after
    said = done.stdout
    for line in (f"removed the link {root / 'var/lib/setui'}",
                 f"moved {root / 'var/lib/private/setui'} to {root / 'var/lib/setui'}",
                 f"{root / 'var/lib/setui'}: owner root, group setui ({gid}), mode 0700",
                 f"{', '.join(sorted(STORE_FILES))}: owner root, group setui ({gid}), mode "
                 "0600",
                 f"removed {root / 'etc/systemd/system/setui-recorder.service'}: its "
                 "history is the agent's now",
                 "setui-recorder.service.d holds drop-ins, left as they are"):
        assert line in said, line
    assert calls(log) == []  # --now too: under a root nothing is started
    # The history and the audit log are the same, and whole.
    with Store.open_dir(root / "var/lib/setui", readonly=True) as store:
        assert len(store.history.incarnations(limit=None)) == INCARNATIONS
        assert [(r.seq, r.hash) for r in store.audit_log.records()] == records
        assert store.audit_log.verify().ok


def test_a_shared_store_is_taken_over_in_place(tmp_path: Path,
                                               systemctl: tuple[Path, Path]) -> None:
    root = new_root(tmp_path, group="setui")
    shared = root / "var" / "lib" / "setui"
    filled_store(shared)
    (shared / "notes.txt").write_text("the team's notes\n")
    for path in [shared, *shared.iterdir()]:
        os.chown(path, 0 if path == shared else OPERATOR_UID, 4242)
        path.chmod(0o2770 if path == shared else 0o660)
    done = setui("service", "install", "--root", str(root), path=systemctl[0])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "found the group setui (gid 4242)" in done.stdout
    after = tree(root)
    assert after["var/lib/setui"] == ("d", 0, 4242, 0o700)  # no setgid, no group bits
    for name in STORE_FILES:
        assert after[f"var/lib/setui/{name}"] == ("f", 0, 4242, 0o600), name
    # What setui did not make stays as it was, and is named.
    assert after["var/lib/setui/notes.txt"] == ("f", OPERATOR_UID, 4242, 0o660)
    assert f"left as it was: {shared / 'notes.txt'} (not one of setui's files)" in done.stdout
    with Store.open_dir(shared, readonly=True) as store:
        assert store.audit_log.verify().ok


def test_the_agents_store_of_the_layout_before_becomes_roots_alone(
        tmp_path: Path, systemctl: tuple[Path, Path]) -> None:
    """The agent's store as installs before made it (root:setui 0750, files 0640) let
    its group open the files, and so lock them: install makes it 0700, files 0600."""
    root = new_root(tmp_path, group="setui")
    store = root / "var" / "lib" / "setui"
    filled_store(store)
    for path in [store, *store.iterdir()]:
        os.chown(path, 0, 4242)
        path.chmod(0o750 if path == store else 0o640)
    done = setui("service", "install", "--root", str(root), path=systemctl[0])
    assert done.returncode == 0, done.stdout + done.stderr
    after = tree(root)
    assert after["var/lib/setui"] == ("d", 0, 4242, 0o700)
    for name in STORE_FILES:
        assert after[f"var/lib/setui/{name}"] == ("f", 0, 4242, 0o600), name
    assert f"{store}: owner root, group setui (4242), mode 0700" in done.stdout
    assert f"{', '.join(sorted(STORE_FILES))}: owner root, group setui (4242), mode 0600" \
        in done.stdout
    with Store.open_dir(store, readonly=True) as opened:
        assert len(opened.history.incarnations(limit=None)) == INCARNATIONS
        assert opened.audit_log.verify().ok


def test_nothing_moves_while_something_has_the_store_open(
        tmp_path: Path, systemctl: tuple[Path, Path]) -> None:
    root = new_root(tmp_path)
    store = recorder_layout(root)
    before = tree(root)
    holder = subprocess.Popen([sys.executable, "-c",
                               "import sys, time; f = open(sys.argv[1], 'rb'); "
                               "print('open', flush=True); time.sleep(300)",
                               str(store / "setui.db-wal")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "open\n"
        done = setui("service", "install", "--root", str(root), path=systemctl[0])
    finally:
        holder.kill()
        holder.wait(timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    assert (f"not taking the store over while something has it open: pid {holder.pid} "
            f"(python") in done.stderr
    assert f"has {store / 'setui.db-wal'} open" in done.stderr
    after = tree(root)
    assert after == {**before, "etc/group": after["etc/group"],
                     "etc/group-": after["etc/group-"]}  # only the group was made
    assert calls(systemctl[1]) == []


@pytest.mark.parametrize("planted", ["symlink", "hard link", "directory"])
def test_something_planted_in_a_shared_store_stops_the_takeover(
        tmp_path: Path, systemctl: tuple[Path, Path], planted: str) -> None:
    """A member of the old group could put anything where setui keeps a file: root must
    not change the owner or mode of what it points at, nor take over a file someone can
    still write through another name."""
    root = new_root(tmp_path, group="setui")
    shared = root / "var" / "lib" / "setui"
    filled_store(shared)
    shared.chmod(0o2770)
    os.chown(shared, 0, 4242)
    victim = tmp_path / "victim"
    victim.write_text("root's own\n")
    victim.chmod(0o600)
    target = shared / "setui.db-shm"
    target.unlink()
    if planted == "symlink":
        target.symlink_to(victim)
    elif planted == "hard link":
        os.link(victim, target)
    else:
        target.mkdir()
    before = tree(root)
    done = setui("service", "install", "--root", str(root), path=systemctl[0])
    assert done.returncode == 1, done.stdout + done.stderr
    assert "not installing the service:" in done.stderr
    assert "nothing was changed" in done.stderr
    assert str(target) in done.stderr
    assert tree(root) == before
    assert (os.lstat(victim).st_uid, os.lstat(victim).st_mode & 0o777) == (0, 0o600)


def test_a_link_that_is_not_the_recorders_is_left_alone(
        tmp_path: Path, systemctl: tuple[Path, Path]) -> None:
    root = new_root(tmp_path)
    (root / "var" / "lib").mkdir(parents=True)
    (root / "var" / "lib" / "setui").symlink_to("/srv/elsewhere")
    done = setui("service", "install", "--root", str(root), path=systemctl[0])
    assert done.returncode == 1
    assert "is a symbolic link to /srv/elsewhere, not the link a DynamicUser= unit " \
           "leaves" in done.stderr
    assert os.readlink(root / "var" / "lib" / "setui") == "/srv/elsewhere"
    assert not (root / "etc" / "systemd").exists()


def test_installing_needs_root_even_into_a_root(tmp_path: Path) -> None:
    root = new_root(tmp_path)
    done = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
         installation().python, "-m", "setui.cli", "service", "install", "--root", str(root)],
        capture_output=True, text=True, timeout=120, cwd="/",
        env={"PATH": os.environ["PATH"], "SETUI_CONFIG": "/nonexistent/config.toml",
             "HOME": "/nonexistent"})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "needs root (under" in done.stderr and "it sets owners" in done.stderr
    assert sorted(p.name for p in (root / "etc").iterdir()) == ["group"]


def test_uninstall_takes_away_what_install_put_and_leaves_the_store(
        tmp_path: Path, systemctl: tuple[Path, Path]) -> None:
    root = new_root(tmp_path)
    recorder_layout(root)
    path, log = systemctl
    before = tree(root)
    done = setui("service", "install", "--root", str(root), path=path)
    assert done.returncode == 0, done.stdout + done.stderr
    store = tree(root / "var/lib/setui")
    undone = setui("service", "uninstall", "--root", str(root), path=path)
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert calls(log) == []
    after = tree(root)
    for gone in ("etc/systemd/system/setui-agent.service", "etc/profile.d/setui-login.sh",
                 "etc/setui"):
        assert gone not in after and f"removed {root / gone}" in undone.stdout
    # The store is as install left it, its history whole; the group stays with it.
    assert tree(root / "var/lib/setui") == store
    with Store.open_dir(root / "var/lib/setui", readonly=True) as opened:
        assert len(opened.history.incarnations(limit=None)) == INCARNATIONS
    group_of(root)
    assert f"left: the store {root / 'var/lib/setui'}" in undone.stdout
    # Nothing else install wrote is left over: only the directories it made to hold them.
    made = set(after) - set(before) - {f"var/lib/setui/{name}" for name in store} \
        - {"var/lib/setui", "etc/group-"}
    assert made == {"etc/profile.d"}, made
    # A second uninstall finds nothing to remove, and says so.
    again = setui("service", "uninstall", "--root", str(root), path=path)
    assert again.returncode == 0, again.stderr
    assert f"not there: {root / 'etc/systemd/system/setui-agent.service'}" in again.stdout


def test_uninstall_leaves_what_is_not_setuis(tmp_path: Path) -> None:
    """A file of the administrator's under the hook's name, and a policy in /etc/setui,
    stay where they are."""
    root = new_root(tmp_path)
    done = setui("service", "install", "--root", str(root))
    assert done.returncode == 0, done.stdout + done.stderr
    hook = root / "etc/profile.d/setui-login.sh"
    hook.write_text("# the administrator's own\necho hello\n")
    (root / "etc/setui/policy.toml").write_text("")
    undone = setui("service", "uninstall", "--root", str(root))
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert hook.read_text() == "# the administrator's own\necho hello\n"
    assert f"left {hook}: it is not the hook setui writes" in undone.stdout
    assert (root / "etc/setui/policy.toml").exists()
    assert f"left {root / 'etc/setui'}: it holds files of yours" in undone.stdout
    assert not (root / "etc/systemd/system/setui-agent.service").exists()


def test_uninstalling_needs_root(tmp_path: Path) -> None:
    root = new_root(tmp_path)
    done = setui("service", "install", "--root", str(root))
    assert done.returncode == 0, done.stdout + done.stderr
    before = tree(root)
    undone = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
         installation().python, "-m", "setui.cli", "service", "uninstall", "--root",
         str(root)],
        capture_output=True, text=True, timeout=120, cwd="/",
        env={"PATH": os.environ["PATH"], "SETUI_CONFIG": "/nonexistent"})
    assert undone.returncode == 1, undone.stdout + undone.stderr
    assert "needs root" in undone.stderr
    assert tree(root) == before
