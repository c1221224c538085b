"""Real users and groups for the tests where identity matters (they run as root).

Made with the system's own tools (groupadd, useradd) so that everything that asks the
password and group databases (pwd, grp, getgrouplist, setpriv --init-groups) sees them as it
would see an operator; removed again afterwards, with only what was made here removed.

A run stopped before it let go (a kill, a reboot that emptied /tmp) leaves its accounts
behind, possibly half made or half removed. So a test user is made again at set-up, not
only removed at the end: one that no live process holds and that the tests made (its
comment says so, or the holders' file names it) is removed and made as asked.

Test processes run side by side (xdist workers) and may want the same account at once:
who holds which account is kept in a file under a lock, by process id, so an account is
made once, kept while any live process holds it, and removed by the last one to let go
(a holder that died without letting go no longer counts).
"""

from __future__ import annotations

import contextlib
import fcntl
import grp
import json
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

__all__ = ["COMMENT", "Account", "made_accounts", "needs_accounts"]

needs_accounts = pytest.mark.skipif(
    os.name != "posix" or os.geteuid() != 0 or shutil.which("setpriv") is None
    or shutil.which("useradd") is None,
    reason="needs root, setpriv and useradd to make users and run processes as them")

_LOCK = Path(tempfile.gettempdir()) / "setui-test-accounts.lock"
_HOLDERS = Path(tempfile.gettempdir()) / "setui-test-accounts.json"


@dataclass(frozen=True)
class Account:
    name: str
    uid: int
    gid: int


# The account tools need nothing of the test process's environment, which may be large
# enough to keep them from starting (a long test id in PYTEST_CURRENT_TEST made userdel
# fail with E2BIG): they get PATH alone.
_TOOLS_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
# The comment (GECOS) of every user made here: how a user left by an earlier run is told
# from one the machine had before the tests.
COMMENT = "setui test account"


def _run(*argv: str, check: bool = True) -> None:
    subprocess.run(argv, check=check, capture_output=True, timeout=60, env=_TOOLS_ENV)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def _holders() -> Iterator[dict[str, Any]]:
    """The accounts the tests made, each with its kind and the pids holding it; under an
    exclusive lock, written back at the end."""
    with open(_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            loaded: object = json.loads(_HOLDERS.read_text())
        except (OSError, ValueError):
            loaded = {}
        state: dict[str, Any] = loaded if isinstance(loaded, dict) else {}
        # What is not an entry of this shape (a file of another form) is forgotten.
        state = {key: entry for key, entry in state.items()
                 if isinstance(entry, dict) and entry.get("kind") in ("user", "group")
                 and isinstance(entry.get("name"), str) and isinstance(entry.get("pids"), list)}
        for entry in state.values():
            entry["pids"] = [pid for pid in entry["pids"]
                             if isinstance(pid, int) and pid > 0 and _alive(pid)]
        yield state
        _HOLDERS.write_text(json.dumps(state))


def _exists(kind: str, name: str) -> bool:
    try:
        (pwd.getpwnam if kind == "user" else grp.getgrnam)(name)
    except KeyError:
        return False
    return True


def _ours(state: dict[str, Any], kind: str, name: str) -> bool:
    """Whether the tests made ``name``: the holders' file names it, or (a user) its
    comment is the tests' own."""
    if f"{kind}:{name}" in state:
        return True
    return kind == "user" and _exists(kind, name) and pwd.getpwnam(name).pw_gecos == COMMENT


def _unheld(state: dict[str, Any], kind: str, name: str) -> bool:
    """The tests made ``name`` and no live process holds it: a leftover of a run that
    stopped before it let go."""
    entry = state.get(f"{kind}:{name}")
    return _ours(state, kind, name) and (entry is None or not entry["pids"])


def _take(state: dict[str, Any], kind: str, name: str, make: Sequence[str]) -> bool:
    """Hold ``name``, making it if it is missing; whether this process holds it (an
    account the machine had before the tests is never held, nor removed)."""
    key = f"{kind}:{name}"  # a user and its own group may share a name
    if not _ours(state, kind, name) and _exists(kind, name):
        return False
    if not _exists(kind, name):
        _run(*make)
    entry = state.setdefault(key, {"kind": kind, "name": name, "pids": []})
    entry["pids"].append(os.getpid())
    return True


def _let_go(state: dict[str, Any], keys: Sequence[str]) -> None:
    """Let go of ``keys`` (``kind:name``); what no live process holds any more is removed,
    users before groups."""
    for key in keys:
        with contextlib.suppress(KeyError, ValueError):
            state[key]["pids"].remove(os.getpid())
    for kind, remove in (("user", "userdel"), ("group", "groupdel")):
        for key, entry in list(state.items()):
            if entry["kind"] == kind and not entry["pids"]:
                _run(remove, entry["name"], check=False)
                del state[key]


@contextlib.contextmanager
def made_accounts(users: Mapping[str, Sequence[str]], groups: Sequence[str] = (),
                  ) -> Iterator[dict[str, Account]]:
    """``users`` (name -> its groups, the first its primary one; none: a group of its
    own) and ``groups``, each made if missing (system accounts, no home directory, no
    shell); removed at the end unless another test process still holds them."""
    held: list[str] = []
    wanted = list(dict.fromkeys([*groups, *(g for gs in users.values() for g in gs)]))
    try:
        with _holders() as state:
            # A user an earlier run left is made again, whatever shape it was left in;
            # first, since userdel may take a group of the same name with it.
            for name in users:
                if _unheld(state, "user", name) and _exists("user", name):
                    _run("userdel", name)
            for group in wanted:
                if _take(state, "group", group, ("groupadd", "--system", group)):
                    held.append(f"group:{group}")
            for name, member_of in users.items():
                # No groups: one of its own, as for any system user (userdel removes it).
                groups_of = ["--gid", member_of[0], "--groups", ",".join(member_of)] \
                    if member_of else ["--user-group"]
                if _take(state, "user", name, ("useradd", "--system", "--no-create-home",
                                               "--shell", "/usr/sbin/nologin",
                                               "--comment", COMMENT, *groups_of, name)):
                    held.append(f"user:{name}")
        found = {name: Account(name, pwd.getpwnam(name).pw_uid, pwd.getpwnam(name).pw_gid)
                 for name in users}
        yield found
    finally:
        with _holders() as state:
            _let_go(state, held)
