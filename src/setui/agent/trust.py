"""The agent runs only what root, or the agent's own user, could have written.

A root agent that reads a config or a policy, or runs a hook, some other user can change
runs that user's commands as root. So, as sshd's StrictModes does for authorized_keys:
the file and every directory its lookup goes through (symbolic links followed, each
link's own directory included) must be owned by root or the agent's user, and not
writable by group or others. One exception, which is what the sticky bit is for: a
sticky directory owned by root (``/tmp``) lets others add names but not rename or remove
another user's, so it is safe to pass through to an entry that root or the agent's user
owns.

A hook's arguments are held to the same rule (:func:`untrusted_command`): an interpreter
reads its script as code (``["/bin/sh", "/opt/hooks/drain.sh"]``), and nothing tells an
argument that is a script from one that is not. So every argument that names a file is
checked, and one that names no file yet must be where no one else could make it: an
option (``-c``) is not a file, and a command string (``sh -c "..."``) is words, not
looked into.

Checked at start (the agent refuses to start, naming the file and why), at each reload
of the config, and again just before each hook runs (a file can change after start).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

__all__ = ["HOOK_DIRECTORY", "untrusted", "untrusted_command"]

_MAX_LINKS = 40  # as the kernel's own limit on links followed in one lookup
# Where every hook runs (as under the unit): a relative argument names a file under it.
HOOK_DIRECTORY = "/"


def _owner(uid: int) -> str:
    try:
        import pwd

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (ImportError, KeyError):
        return f"uid {uid}"


class _Missing(Exception):
    """The lookup met a name that is not there (or a file where a directory should be):
    ``holder`` is where it would be made, reached through ``passed``."""

    def __init__(self, passed: list[tuple[str, os.stat_result]], holder: str) -> None:
        super().__init__(holder)
        self.passed = passed
        self.holder = holder


def _lookup(path: str) -> tuple[list[tuple[str, os.stat_result]], str]:
    """What the lookup of the absolute ``path`` goes through, resolved as the kernel does
    it: every directory it reads a name in and every link it follows (each with its
    lstat), and where it ends. _Missing when a name on the way is not there; OSError
    when a piece cannot be read."""
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
        try:
            info = os.lstat(candidate)
        except (FileNotFoundError, NotADirectoryError):
            raise _Missing(passed, current) from None
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


def _way(text: str, passed: list[tuple[str, os.stat_result]], trusted: set[int],
         mine: int) -> str | None:
    """Why the way to ``text`` could be changed by someone else; None when it could not."""
    for name, info in passed:
        if info.st_uid not in trusted:
            what = "symbolic link" if stat.S_ISLNK(info.st_mode) else "directory"
            return (f"{text}: the {what} {name} is owned by {_owner(info.st_uid)}, not by "
                    f"root or this agent's user ({_owner(mine)})")
        if stat.S_ISDIR(info.st_mode) and info.st_mode & 0o022 and not _sticky(info):
            return (f"{text}: the directory {name} is writable by group or others (mode "
                    f"{stat.S_IMODE(info.st_mode):04o})")
    return None


def _sticky(info: os.stat_result) -> bool:
    return bool(info.st_mode & stat.S_ISVTX) and info.st_uid == 0


def untrusted(path: Path | str, *, uid: int | None = None) -> str | None:
    """Why ``path`` (absolute, a regular file) could have been written by someone but
    root and ``uid`` (default: this process's effective user), in words; None when it
    could not."""
    mine = os.geteuid() if uid is None else uid
    trusted = {0, mine}
    text = str(path)
    if not os.path.isabs(text):
        return f"{text}: not an absolute path"
    try:
        passed, end = _lookup(text)
        final = os.stat(end)
    except _Missing:
        return f"{text}: cannot be checked: No such file or directory"
    except (OSError, ValueError) as exc:
        return f"{text}: cannot be checked: {_reason(exc)}"
    problem = _way(text, passed, trusted, mine) or _not_theirs(text, final, trusted, mine)
    if problem is not None:
        return problem
    if final.st_mode & 0o022:
        return _writable(text, final)
    if not stat.S_ISREG(final.st_mode):
        return f"{text}: not a regular file"
    return None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ValueError):  # a NUL in the name
        return "not a file name (it holds a NUL character)"
    return getattr(exc, "strerror", None) or str(exc)


def untrusted_command(argv: Sequence[str], *, uid: int | None = None) -> str | None:
    """Why the hook ``argv`` could run something someone but root and ``uid`` wrote, in
    words; None when it could not. Its program as :func:`untrusted` says; then each
    argument that names a file (an absolute path, or a relative one under
    :data:`HOOK_DIRECTORY`, where hooks run): that file as a directory on the way would
    be (owned by root or ``uid``, not writable by group or others unless it is a root
    sticky directory), a device of root's at any mode (``/dev/null``). An argument that
    names nothing yet must be where no one else could make it before the hook reads it.
    Options before ``--`` (``-c``, ``--force``) are not files."""
    problem = untrusted(argv[0], uid=uid)
    if problem is not None:
        return problem
    options = True
    for argument in argv[1:]:
        if options and argument == "--":
            options = False
            continue
        if options and argument.startswith("-"):
            continue
        problem = _argument(argument, uid)
        if problem is not None:
            return f"argument {problem}"
    return None


def _argument(argument: str, uid: int | None) -> str | None:
    """Why the file ``argument`` names (or would name) could be someone else's."""
    mine = os.geteuid() if uid is None else uid
    trusted = {0, mine}
    path = argument if argument.startswith("/") else os.path.join(HOOK_DIRECTORY, argument)
    text = argument if path == argument else f"{argument} ({path})"
    try:
        passed, end = _lookup(path)
        final = os.stat(end)
    except _Missing as missing:
        problem = _way(text, missing.passed, trusted, mine)
        if problem is not None:
            return problem
        # Its owner was checked on the way; a sticky directory lets anyone add a name.
        holder = missing.passed[-1][1]
        if stat.S_ISDIR(holder.st_mode) and holder.st_mode & 0o022:
            return (f"{text}: is not there, and someone else could make it: "
                    f"{missing.holder} is writable by group or others (mode "
                    f"{stat.S_IMODE(holder.st_mode):04o})")
        return None
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            return None  # words, not a name a file could have
        return f"{text}: cannot be checked: {_reason(exc)}"
    except ValueError as exc:
        return f"{text}: cannot be checked: {_reason(exc)}"
    problem = _way(text, passed, trusted, mine) or _not_theirs(text, final, trusted, mine)
    if problem is not None:
        return problem
    device = stat.S_ISCHR(final.st_mode) and final.st_uid == 0
    if final.st_mode & 0o022 and not device and not (stat.S_ISDIR(final.st_mode)
                                                      and _sticky(final)):
        return _writable(text, final)
    return None


def _not_theirs(text: str, info: os.stat_result, trusted: set[int], mine: int
                ) -> str | None:
    """Why the file ``info`` describes is owned by someone but root and ``mine``."""
    if info.st_uid not in trusted:
        return (f"{text}: owned by {_owner(info.st_uid)}, not by root or this agent's user "
                f"({_owner(mine)})")
    return None


def _writable(text: str, info: os.stat_result) -> str:
    return f"{text}: writable by group or others (mode {stat.S_IMODE(info.st_mode):04o})"
