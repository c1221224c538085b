"""The agent runs only what root, or the agent's own user, could have written.

A root agent that reads a policy or runs a hook some other user can change runs that
user's commands as root. So, as sshd's StrictModes does for authorized_keys: the file and
every directory its lookup goes through (symbolic links followed, each link's own
directory included) must be owned by root or the agent's user, and not writable by group
or others. One exception, which is what the sticky bit is for: a sticky directory owned
by root (``/tmp``) lets others add names but not rename or remove another user's, so it
is safe to pass through to an entry that root or the agent's user owns.

Checked at start (the agent refuses to start, naming the file and why) and again just
before each hook runs (a file can change after start).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path, PurePosixPath

__all__ = ["untrusted"]

_MAX_LINKS = 40  # as the kernel's own limit on links followed in one lookup


def _owner(uid: int) -> str:
    try:
        import pwd

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _lookup(path: str) -> tuple[list[tuple[str, os.stat_result]], str]:
    """What the lookup of the absolute ``path`` goes through, resolved as the kernel does
    it: every directory it reads a name in and every link it follows (each with its
    lstat), and where it ends. OSError when a piece cannot be read."""
    passed: list[tuple[str, os.stat_result]] = []
    pending = list(PurePosixPath(path).parts[1:])
    current, links = "/", 0
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            current = os.path.dirname(current) or "/"
            continue
        passed.append((current, os.lstat(current)))
        candidate = os.path.join(current, part)
        info = os.lstat(candidate)
        if stat.S_ISLNK(info.st_mode):
            links += 1
            if links > _MAX_LINKS:
                raise OSError(errno.ELOOP, "too many levels of symbolic links", path)
            passed.append((candidate, info))
            target = os.readlink(candidate)
            if target.startswith("/"):
                current = "/"
            pending = list(PurePosixPath(target).parts[1 if target.startswith("/") else 0:]) \
                + pending
        else:
            current = candidate
    return passed, current


def untrusted(path: Path | str, *, uid: int | None = None) -> str | None:
    """Why ``path`` (absolute) could have been written by someone but root and ``uid``
    (default: this process's effective user), in words; None when it could not."""
    mine = os.geteuid() if uid is None else uid
    trusted = {0, mine}
    text = str(path)
    if not os.path.isabs(text):
        return f"{text}: not an absolute path"
    try:
        passed, end = _lookup(text)
        final = os.stat(end)
    except OSError as exc:
        return f"{text}: cannot be checked: {exc.strerror or exc}"
    for name, info in passed:
        if info.st_uid not in trusted:
            what = "symbolic link" if stat.S_ISLNK(info.st_mode) else "directory"
            return (f"{text}: the {what} {name} is owned by {_owner(info.st_uid)}, not by "
                    f"root or this agent's user ({_owner(mine)})")
        sticky = bool(info.st_mode & stat.S_ISVTX) and info.st_uid == 0
        if stat.S_ISDIR(info.st_mode) and info.st_mode & 0o022 and not sticky:
            return (f"{text}: the directory {name} is writable by group or others (mode "
                    f"{stat.S_IMODE(info.st_mode):04o})")
    if final.st_uid not in trusted:
        return (f"{text}: owned by {_owner(final.st_uid)}, not by root or this agent's user "
                f"({_owner(mine)})")
    if final.st_mode & 0o022:
        return (f"{text}: writable by group or others (mode "
                f"{stat.S_IMODE(final.st_mode):04o})")
    if not stat.S_ISREG(final.st_mode):
        return f"{text}: not a regular file"
    return None
