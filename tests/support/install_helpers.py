"""Helpers for the tests of `setui service install`: a system root in a temporary
directory, what an earlier setui left in it (the recorder's unit and its DynamicUser
store, a shared store), every file of it with owner and mode, and `setui` run on it.

Nothing here touches the machine's own /etc or /var/lib: a test root is a directory of
its own (``--root``), and the tests of the running system's path run in a private mount
namespace whose /etc is a copy and whose /var/lib is empty (``on_a_private_system``).

What is installed is this checkout's setui, installed for the purpose where the unit
could run it (``installation``): `setui service install` rightly refuses a Python or a
setui under /tmp, which the unit's PrivateTmp= hides, or one someone but root could
change, and a checkout and its venv may be in either place. The tests that run setui or
Python as another user run that installation's interpreter too: every user may read it,
and a checkout may be where only root can (/root).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shlex
import shutil
import stat
import subprocess
import sysconfig
import tempfile
import venv
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from importlib import metadata, resources
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from setui.core.model import parse_document
from setui.store import AuditEntry, Store

ROOT = Path(__file__).parent.parent.parent
DYNAMIC_UID = 61234  # a uid of systemd's DynamicUser= range, as the recorder ran as
OPERATOR_UID = 1234  # someone in the old shared store's group
RECORDER_UNIT = """[Unit]
Description=setui recorder of Azure Scheduled Events

[Service]
ExecStart=/opt/old/bin/python -m setui.cli watch --data-dir /var/lib/setui
DynamicUser=yes
StateDirectory=setui

[Install]
WantedBy=multi-user.target
"""

INCARNATIONS = 4
# Where an installation is built: root's, and under neither /tmp nor /var/tmp.
INSTALLATIONS = Path("/run")
# The extra of setui whose dependencies an installation holds besides its own: the agent's.
EXTRAS = ("agent",)


@dataclass(frozen=True)
class Installation:
    home: Path  # the venv: root's, 0755, outside /tmp and /var/tmp
    python: str  # its interpreter
    package: Path  # its copy of setui


def run_time_distributions() -> list[metadata.Distribution]:
    """The distributions setui (with ``EXTRAS``) needs at run time, and theirs, as this
    venv has them: requirements whose markers hold, followed through their extras."""
    found: dict[str, metadata.Distribution] = {}
    todo = [("setui", extra) for extra in EXTRAS]
    seen: set[tuple[str, str]] = set()
    while todo:
        name, extra = todo.pop()
        if (key := (canonicalize_name(name), extra)) in seen:
            continue
        seen.add(key)
        found[key[0]] = distribution = metadata.distribution(name)
        for line in distribution.requires or []:
            wanted = Requirement(line)
            if wanted.marker is None or wanted.marker.evaluate({"extra": extra}):
                todo += [(wanted.name, its) for its in wanted.extras or {""}]
    return [found[name] for name in sorted(found) if name != "setui"]


@functools.cache
def installation() -> Installation:
    """This checkout's setui installed where the unit could run it and every user can
    read it, once per process and removed when the process ends: a venv of this Python
    under /run holding a copy of the package and of the distributions it needs at run
    time (``run_time_distributions``), root's and not writable by others. The tests run
    setui and Python as other users with its interpreter, so they pass from a checkout
    those users cannot read (a clone in /root)."""
    home = Path(tempfile.mkdtemp(prefix="setui-test-install-", dir=INSTALLATIONS))
    atexit.register(shutil.rmtree, home, True)
    venv.EnvBuilder(symlinks=True).create(home)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(home), "platbase": str(home)}))
    for distribution in run_time_distributions():
        for file in distribution.files or []:
            if file.parts[0] != "..":  # what a wheel puts beside site-packages (bin/)
                (site / file).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(Path(str(distribution.locate_file(file))), site / file)
    package = site / "setui"
    shutil.copytree(Path(str(resources.files("setui"))), package)
    for directory, _, files in os.walk(home):
        os.chmod(directory, 0o755)
        for name in files:
            if not os.path.islink(path := os.path.join(directory, name)):
                os.chmod(path, 0o644)  # bin/ holds links to the interpreter, not files
    return Installation(home, str(home / "bin" / "python"), package)


Entry = tuple[str, int, int, int]  # kind ("d", "f", "l"), uid, gid, mode


def tree(root: Path) -> dict[str, Entry]:
    """Every file under ``root`` (relative path -> kind, owner, group, mode), links not
    followed."""
    found: dict[str, Entry] = {}
    for path in sorted(root.rglob("*")):
        st = os.lstat(path)
        kind = "l" if stat.S_ISLNK(st.st_mode) else "d" if stat.S_ISDIR(st.st_mode) else "f"
        found[str(path.relative_to(root))] = (kind, st.st_uid, st.st_gid,
                                              stat.S_IMODE(st.st_mode))
    return found


def group_of(root: Path, name: str = "setui") -> int:
    """The gid ``name`` has in ``root``'s /etc/group."""
    for line in (root / "etc" / "group").read_text().splitlines():
        fields = line.split(":")
        if fields[0] == name:
            return int(fields[2])
    raise AssertionError(f"no group {name} in {root}/etc/group")


def new_root(base: Path, *, group: str | None = None) -> Path:
    """A system root with an /etc/group of root's (and ``group``'s, gid 4242, if given)."""
    root = base / "sysroot"
    (root / "etc").mkdir(parents=True)
    lines = "root:x:0:\n" + (f"{group}:x:4242:\n" if group else "")
    (root / "etc" / "group").write_text(lines)
    return root


def filled_store(directory: Path) -> int:
    """A real store in ``directory`` with history, an audit record, its witness and an
    agent's lock, and the -wal and -shm of a database still open (as a stopped recorder
    leaves them when it was killed): copied while root's connection is open. Returns the
    number of incarnations."""
    scratch = directory.parent / f".{directory.name}-scratch"
    seen = datetime(2024, 5, 14, 9, 30, tzinfo=timezone.utc)
    with Store.open_dir(scratch) as store:
        for number in range(1, INCARNATIONS + 1):
            events = [{"EventId": "A-1", "EventType": "Reboot", "EventStatus": "Scheduled",
                       "ResourceType": "VirtualMachine", "Resources": ["vm-0"],
                       "NotBefore": "Tue, 14 May 2024 10:00:00 GMT", "EventSource":
                       "Platform", "DurationInSeconds": 15}] if number % 2 else []
            document = parse_document(json.dumps({"DocumentIncarnation": number,
                                                  "Events": events}))
            store.history.record(document, seen_at=seen + timedelta(minutes=number),
                                 endpoint="http://169.254.169.254")
        store.audit_log.append(AuditEntry(action="dismissed", time=seen, user="alice",
                                          host="vm-0", endpoint="http://169.254.169.254",
                                          event_id="A-1"))
        directory.mkdir(parents=True)
        for path in sorted(scratch.iterdir()):
            shutil.copy2(path, directory / path.name)
    shutil.rmtree(scratch)
    (directory / "agent.lock").write_text('{"pid": 1, "since": null, "socket": null}\n')
    return INCARNATIONS


def recorder_layout(root: Path) -> Path:
    """What `setui service install` of an earlier version left: the recorder's unit, a
    drop-in for it, and its store where DynamicUser= keeps it (/var/lib/private/setui,
    owned by the dynamic user, 0700 and 0600), /var/lib/setui a link to it."""
    units = root / "etc" / "systemd" / "system"
    units.mkdir(parents=True, exist_ok=True)
    (units / "setui-recorder.service").write_text(RECORDER_UNIT)
    (units / "setui-recorder.service.d").mkdir()
    (units / "setui-recorder.service.d" / "override.conf").write_text("[Service]\n")
    private = root / "var" / "lib" / "private"
    private.mkdir(parents=True, mode=0o700)
    store = private / "setui"
    filled_store(store)
    for path in [store, *store.iterdir()]:
        os.chown(path, DYNAMIC_UID, DYNAMIC_UID)
        path.chmod(0o700 if path.is_dir() else 0o600)
    (root / "var" / "lib" / "setui").symlink_to("private/setui")
    return store


def setui(*args: str, path: Path | None = None,
          env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``setui ARGS`` as a new process of the ``installation``, with no config and no data
    directory of its own."""
    full = {key: value for key, value in os.environ.items() if not key.startswith("SETUI_")}
    full["SETUI_CONFIG"] = os.devnull + ".absent"
    if path is not None:
        full["PATH"] = f"{path}:/usr/sbin:/usr/bin:/sbin:/bin"
    full.update(env or {})
    return subprocess.run([installation().python, "-m", "setui.cli", *args],
                          capture_output=True, text=True, env=full, timeout=180,
                          stdin=subprocess.DEVNULL)


def stand_in_systemctl(directory: Path, log: Path, *, fail: str = "",
                       active: bool = False) -> Path:
    """A systemctl that notes each call in ``log``; ``fail``: the verb that exits 3;
    ``active``: what `is-active` answers."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "systemctl"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {shlex.quote(str(log))}\n'
        f'[ "$1" = is-active ] && exit {0 if active else 3}\n'
        f'[ -n {shlex.quote(fail)} ] && [ "$1" = {shlex.quote(fail or "-")} ] && exit 3\n'
        "exit 0\n")
    script.chmod(0o755)
    return directory


def calls(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


# The running system's path, safely: in a private mount namespace, /etc is a copy (on a
# tmpfs) and /var/lib an empty tmpfs, checked before the command runs (exit 97: they
# could not be made, and nothing ran).
PRIVATE_SYSTEM = r"""
set -e
copy=$(mktemp -d)
mount -t tmpfs setui-test-etc "$copy"
# A test beside this one may be adding a user (shadow's lock files come and go): copy
# again until one copy completes, then drop the locks it caught (nobody here holds them).
tries=0
until cp -a /etc/. "$copy"/ 2>"$copy.err"; do
  tries=$((tries + 1))
  [ "$tries" -lt 10 ] || { cat "$copy.err" >&2; exit 1; }
  sleep 0.2
done
rm -f "$copy.err" "$copy"/*.lock "$copy"/passwd+ "$copy"/group+ "$copy"/shadow+ "$copy"/gshadow+
touch "$copy/.setui-test-copy"
mount --bind "$copy" /etc
mount -t tmpfs setui-test-var-lib /var/lib
[ -e /etc/.setui-test-copy ] && [ -z "$(ls -A /var/lib)" ] || exit 97
exec "$@"
"""


def on_a_private_system(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the Python ``script`` (with ``args``) as root in a mount namespace of its own
    whose /etc is a copy and /var/lib empty: what it does there stays there."""
    unshare = shutil.which("unshare")
    if unshare is None or shutil.which("mount") is None:
        pytest.skip("needs unshare and mount (util-linux) for a private /etc and /var/lib")
    done = subprocess.run([unshare, "--mount", "--propagation", "private", "sh", "-c",
                           PRIVATE_SYSTEM, "sh", installation().python, "-c", script,
                           *args],
                          capture_output=True, text=True, timeout=300,
                          # The tests' helpers, and what they import (pytest), besides it.
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(
                              [str(ROOT), sysconfig.get_path("purelib")])})
    if done.returncode == 97 or "unshare failed" in done.stderr:
        pytest.skip(f"no private mount namespace here: {done.stderr.strip()}")
    return done
