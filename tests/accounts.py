"""Real users and groups for the tests where identity matters (they run as root).

Made with the system's own tools (groupadd, useradd) so that everything that asks the
password and group databases (pwd, grp, getgrouplist, setpriv --init-groups) sees them as it
would see an operator; removed again afterwards, with only what was made here removed.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import pytest

__all__ = ["Account", "made_accounts", "needs_accounts"]

needs_accounts = pytest.mark.skipif(
    os.name != "posix" or os.geteuid() != 0 or shutil.which("setpriv") is None
    or shutil.which("useradd") is None,
    reason="needs root, setpriv and useradd to make users and run processes as them")


@dataclass(frozen=True)
class Account:
    name: str
    uid: int
    gid: int


def _run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, timeout=60)


@contextlib.contextmanager
def made_accounts(users: Mapping[str, Sequence[str]], groups: Sequence[str] = (),
                  ) -> Iterator[dict[str, Account]]:
    """``users`` (name -> its groups, the first its primary one; none: a group of its
    own) and ``groups``, each made if missing (system accounts, no home directory, no
    shell); removed at the end."""
    made_groups: list[str] = []
    made_users: list[str] = []
    wanted = list(dict.fromkeys([*groups, *(g for gs in users.values() for g in gs)]))
    try:
        for group in wanted:
            try:
                grp.getgrnam(group)
            except KeyError:
                _run("groupadd", "--system", group)
                made_groups.append(group)
        found: dict[str, Account] = {}
        for name, member_of in users.items():
            try:
                pwd.getpwnam(name)
            except KeyError:
                # No groups: one of its own, as for any system user (userdel removes it).
                groups_of = ["--gid", member_of[0], "--groups", ",".join(member_of)] \
                    if member_of else ["--user-group"]
                _run("useradd", "--system", "--no-create-home", "--shell",
                     "/usr/sbin/nologin", *groups_of, name)
                made_users.append(name)
            entry = pwd.getpwnam(name)
            found[name] = Account(name, entry.pw_uid, entry.pw_gid)
        yield found
    finally:
        for name in made_users:
            subprocess.run(["userdel", name], capture_output=True, timeout=60)
        for group in made_groups:
            subprocess.run(["groupdel", group], capture_output=True, timeout=60)
