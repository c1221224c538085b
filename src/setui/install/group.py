"""The group ``setui``: made with the system's own ``groupadd --system`` when missing.

On the running system the group database answers (it may be LDAP's: then the group is
found there and nothing is made). Under ``--root DIR`` only ``DIR/etc/group`` counts,
and ``groupadd --prefix DIR`` writes there, never to the host's files.
"""

from __future__ import annotations

import shutil
import subprocess

from setui.core.textsafe import printable
from setui.install.layout import Layout

__all__ = ["GroupError", "ensure_group", "group_id"]


class GroupError(Exception):
    """The group cannot be found or made; the message says why and what to do."""


def group_id(layout: Layout, name: str) -> int | None:
    """The group's id on ``layout``'s system, or None when it has no such group."""
    if layout.host:
        import grp

        try:
            return grp.getgrnam(name).gr_gid
        except KeyError:
            return None
    try:
        lines = layout.group_file.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise GroupError(f"cannot read {printable(str(layout.group_file))}: {exc}") from None
    for line in lines:
        fields = line.split(":")
        if len(fields) >= 3 and fields[0] == name and fields[2].isdigit():
            return int(fields[2])
    return None


def ensure_group(layout: Layout, name: str) -> tuple[int, bool]:
    """The group's id, made (a system group) if missing; and whether it was made."""
    found = group_id(layout, name)
    if found is not None:
        return found, False
    groupadd = shutil.which("groupadd") or shutil.which("groupadd", path="/usr/sbin:/sbin")
    if groupadd is None:
        raise GroupError(f"groupadd was not found: make the group yourself (`groupadd "
                         f"--system {name}`) and run install again")
    where = [] if layout.host else ["--prefix", str(layout.root)]
    if not layout.host:
        layout.group_file.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    try:
        done = subprocess.run([groupadd, "--system", *where, name], capture_output=True,
                              text=True, stdin=subprocess.DEVNULL, timeout=120)
    except (OSError, subprocess.SubprocessError) as exc:
        raise GroupError(f"cannot run groupadd: {exc}") from None
    if done.returncode != 0:
        raise GroupError(f"`groupadd --system {' '.join([*where, name])}` failed (exit "
                         f"{done.returncode}): {printable(done.stderr.strip(), 500)}")
    made = group_id(layout, name)
    if made is None:
        raise GroupError(f"groupadd said it made the group {name}, but it cannot be found")
    return made, True
