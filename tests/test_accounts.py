"""The test accounts helper itself (tests/support/accounts.py): its commands (useradd, groupadd,
userdel, groupdel) run whatever the test process's environment holds."""

from __future__ import annotations

import grp
import pwd
import subprocess

import pytest

from tests.support.accounts import COMMENT, made_accounts, needs_accounts

pytestmark = [pytest.mark.slow, needs_accounts]

USER, GROUP = "saccts-big-env", "saccts-big-grp"


def _exists(lookup: object, name: str) -> bool:
    try:
        lookup(name)  # type: ignore[operator]
    except KeyError:
        return False
    return True


def test_accounts_are_made_and_removed_under_a_huge_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A test id of 100,000 characters in PYTEST_CURRENT_TEST once made userdel fail to
    start (E2BIG, "Argument list too long": one environment string may not pass 128 KiB):
    the commands get PATH alone."""
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "t" * 200_000)
    with made_accounts({USER: [GROUP]}, [GROUP]) as made:
        assert pwd.getpwnam(USER).pw_uid == made[USER].uid
        assert grp.getgrnam(GROUP).gr_gid == made[USER].gid
    assert not _exists(pwd.getpwnam, USER)
    assert not _exists(grp.getgrnam, GROUP)


def test_a_user_an_interrupted_run_left_is_made_again_at_set_up() -> None:
    """A run stopped before it let go left its user behind in another shape (here: not in
    the group the next run wants it in) and no one holding it: it is made again as asked,
    not taken as it is (which failed every later run until it was removed by hand)."""
    user, extra = "saccts-left", "saccts-left-extra"
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                    "--comment", COMMENT, "--user-group", user], check=True)
    try:
        with made_accounts({user: [user, extra]}, [user, extra]) as made:
            assert user in grp.getgrnam(extra).gr_mem
            assert pwd.getpwnam(user).pw_gid == made[user].gid == grp.getgrnam(user).gr_gid
        assert not _exists(pwd.getpwnam, user)
    finally:
        subprocess.run(["userdel", user], capture_output=True)
        subprocess.run(["groupdel", extra], capture_output=True)
        subprocess.run(["groupdel", user], capture_output=True)
