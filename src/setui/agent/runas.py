"""Who a rule's hooks run as: ``run_as = "USER"`` or ``"USER:GROUP"`` in the policy.

The agent runs as root under its unit (a drain needs root's kubeconfig, ``systemctl
stop``); a hook that needs less says so, and runs as that user: the child takes the user's
groups (as initgroups would give them), its group and then its user, all before exec,
with ``HOME``, ``USER`` and ``LOGNAME`` set and ``/`` as its directory. Only root can do
that, so a policy that asks it of an agent that is not root is refused when it is read,
as is a user or a group this machine does not know. Who the name means is looked up again
just before each run (the password database may change while the agent runs), off the
agent's loop: a name service may ask the network.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["Account", "RunAs", "parse_run_as", "refusal", "resolve"]

# What useradd and groupadd accept (a trailing $ for Samba machine accounts).
_NAME = r"[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?"
_RUN_AS = re.compile(rf"({_NAME})(?::({_NAME}))?")


@dataclass(frozen=True)
class RunAs:
    """A user, and the group to run as (None: the user's own, from the password file)."""

    user: str
    group: str | None = None

    @property
    def text(self) -> str:
        return self.user if self.group is None else f"{self.user}:{self.group}"


@dataclass(frozen=True)
class Account:
    """Who ``run_as`` names now: what the child becomes before exec."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str

    def environment(self) -> dict[str, str]:
        return {"HOME": self.home or "/", "USER": self.name, "LOGNAME": self.name}

    def spawn_arguments(self) -> dict[str, Any]:
        """For ``subprocess``: it calls setgroups, setregid, then setreuid in the child,
        in that order (groups and group while it is still root), real and saved ids too,
        so the hook cannot become root again."""
        return {"user": self.uid, "group": self.gid, "extra_groups": list(self.groups),
                "cwd": "/"}


def parse_run_as(value: object) -> RunAs | None:
    """``"USER"`` or ``"USER:GROUP"`` as a :class:`RunAs`; None when it is not one."""
    if not isinstance(value, str):
        return None
    found = _RUN_AS.fullmatch(value)
    if found is None:
        return None
    return RunAs(found.group(1), found.group(2))


def resolve(run_as: RunAs) -> Account:
    """Who ``run_as`` names now. LookupError, in words, when the user or the group is
    not known. Blocking: the password and group databases may ask the network."""
    import grp
    import pwd

    try:
        entry = pwd.getpwnam(run_as.user)
    except KeyError:
        raise LookupError(f"run_as: there is no user {run_as.user!r} on this machine") \
            from None
    gid = entry.pw_gid
    if run_as.group is not None:
        try:
            gid = grp.getgrnam(run_as.group).gr_gid
        except KeyError:
            raise LookupError(f"run_as: there is no group {run_as.group!r} on this "
                              "machine") from None
    groups = tuple(dict.fromkeys([gid, *os.getgrouplist(entry.pw_name, gid)]))
    return Account(entry.pw_name, entry.pw_uid, gid, groups, entry.pw_dir)


def refusal(run_as: RunAs) -> str | None:
    """Why this agent cannot run hooks as ``run_as``, or None when it can: the agent is
    not root, or the name is unknown."""
    if os.name != "posix" or os.geteuid() != 0:
        uid = os.geteuid() if hasattr(os, "geteuid") else "unknown"
        return (f"run_as = {run_as.text!r} needs the agent to run as root (it runs as uid "
                f"{uid}): only root can start a process as another user")
    try:
        resolve(run_as)
    except LookupError as exc:
        return str(exc)
    return None
