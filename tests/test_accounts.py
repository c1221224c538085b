"""The test accounts helper itself (tests/support/accounts.py): its commands (useradd, groupadd,
userdel, groupdel) run whatever the test process's environment holds."""

from __future__ import annotations

import grp
import pwd

import pytest

from tests.support.accounts import made_accounts, needs_accounts

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
