"""The store becomes the agent's: found where the recorder kept it (``/var/lib/private/setui``
behind the link ``/var/lib/setui`` of a DynamicUser= unit) or where a shared store was
(``/var/lib/setui``, 2770), moved whole into ``/var/lib/setui``, and given the agent's
owner and modes: root's alone, the directory 0700 and setui's files 0600 (group setui,
which reads nothing: the directory's group names who may reach the agent's socket). The
agent's store of the layout before (0750, files 0640, which let its group open the files
and so lock them) is made so too.

A store is a directory of files (the database, its -wal and -shm, the witness, the agent's
lock), so it moves or changes hands whole, and only when no process has any of them open:
a recorder still running would go on writing into a file that moved or that root now
owns. Nothing is followed: a symbolic link, a file with a second name (a hard link someone
could write through) or anything but a regular file where setui keeps a file of the store
stops the takeover before anything changes, in words. Every change is made through a
descriptor of the very file that was checked; files setui did not make are left as they
are, and named.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from setui.core.textsafe import printable
from setui.install.layout import PRIVATE_STORE, Layout, shown
from setui.store.place import AGENT_DIR_MODE, AGENT_FILE_MODE, DB_NAME, is_temporary, store_names
from setui.system.processes import holders

__all__ = ["StorePlan", "TakeoverError", "busy", "carry_out", "plan_store"]

_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


class TakeoverError(Exception):
    """The store cannot be taken over as it is; nothing was changed unless it says so."""


@dataclass
class StorePlan:
    """What becomes of the store: where its history is now, and what changes, in words."""

    target: Path
    group: int
    group_name: str
    source: Path | None = None  # the directory that holds the history now (None: none)
    link: Path | None = None  # a DynamicUser= link to remove before the move
    files: list[str] = field(default_factory=list)  # setui's files in source, by name
    changes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # said, and left as they are

    @property
    def owner(self) -> str:
        """Who the store's files belong to once it is the agent's, in words."""
        return f"owner root, group {printable(self.group_name, 64)} ({self.group})"

    @property
    def needed(self) -> bool:
        return bool(self.changes)

    def paths(self) -> list[Path]:
        """The store's files as they are now: what no process may have open."""
        return [] if self.source is None else [self.source / name for name in self.files]


def _owner(st: os.stat_result) -> str:
    return f"{st.st_uid}:{st.st_gid} {stat.S_IMODE(st.st_mode):04o}"


def _where_it_is(layout: Layout, plan: StorePlan) -> None:
    """Where the history is now: the target itself, or the recorder's private store."""
    target, private = layout.store, layout.private_store
    try:
        st: os.stat_result | None = os.lstat(target)
    except FileNotFoundError:
        st = None
    private_dir = os.path.isdir(private) and not os.path.islink(private)
    if st is not None and stat.S_ISLNK(st.st_mode):
        points = os.readlink(target)
        if points not in ("private/setui", str(PRIVATE_STORE)):
            raise TakeoverError(f"{shown(target)} is a symbolic link to {printable(points)}, "
                                "not the link a DynamicUser= unit leaves: setui does not "
                                "know that store. Move the link aside and run install again")
        plan.link = target
        plan.changes.append(f"remove the link {shown(target)} (to {printable(points)})")
        st = None
    elif st is not None and not stat.S_ISDIR(st.st_mode):
        raise TakeoverError(f"{shown(target)} exists and is not a directory: move it aside "
                            "and run install again")
    if st is not None:
        plan.source = target
        if private_dir and os.path.lexists(private / DB_NAME):
            plan.notes.append(
                f"a second history stays where it is, in {shown(private)} (the recorder's, "
                f"from before {shown(target)} held one): read it with `sudo setui history "
                f"--data-dir {PRIVATE_STORE}`")
    elif private_dir:
        plan.source = private
        plan.changes.append(f"move {shown(private)} to {shown(target)} (the recorder's "
                            "history, whole)")
    else:
        plan.changes.append(f"make {shown(target)}")


def _check_files(plan: StorePlan) -> None:
    """setui's files in the source are regular files of one name each; others are named."""
    if plan.source is None:
        return
    ours = store_names(DB_NAME)
    for name in sorted(os.listdir(plan.source)):
        path = plan.source / name
        if name not in ours and not is_temporary(name, DB_NAME):
            plan.notes.append(f"left as it was: {shown(path)} (not one of setui's files)")
            continue
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode):
            raise TakeoverError(f"{shown(path)} is not a regular file (a symbolic link, a "
                                "directory or a device where setui keeps a file of its "
                                "store): nothing was changed. Look at it, move it aside and "
                                "run install again")
        if st.st_nlink != 1:
            raise TakeoverError(f"{shown(path)} has {st.st_nlink} names (hard links): "
                                "whoever made another could write the agent's store "
                                "through it: nothing was changed. Remove the other names "
                                "and run install again")
        plan.files.append(name)
        if (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) != \
                (0, plan.group, AGENT_FILE_MODE):
            plan.changes.append(f"{name}: {plan.owner}, mode {AGENT_FILE_MODE:04o} (was "
                                f"{_owner(st)})")


def plan_store(layout: Layout, group: int, group_name: str) -> StorePlan:
    """What taking the store over on ``layout``'s system would do, the group ``group``
    (named ``group_name``) given to its directory and files; TakeoverError when it
    cannot be done as things are. Changes nothing."""
    plan = StorePlan(layout.store, group, group_name)
    _where_it_is(layout, plan)
    _check_files(plan)
    if plan.source is not None:
        st = os.lstat(plan.source)
        if (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) != (0, group, AGENT_DIR_MODE):
            plan.changes.append(f"{shown(layout.store)}: {plan.owner}, mode "
                                f"{AGENT_DIR_MODE:04o} (was {_owner(st)})")
    return plan


def busy(plan: StorePlan) -> list[str]:
    """Who has the store's files open, in words: a takeover waits until no one has."""
    return [f"pid {who.pid} ({printable(who.name, 40)}) has {shown(path)} open"
            for who, path in holders(plan.paths())]


def carry_out(plan: StorePlan, say: Callable[[str], None]) -> None:
    """Do what ``plan`` says, saying each thing as it is done."""
    target = plan.target
    if plan.link is not None:
        os.unlink(plan.link)
        say(f"removed the link {shown(plan.link)}")
    if plan.source is None:
        target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        os.mkdir(target, AGENT_DIR_MODE)
        say(f"made {shown(target)}")
    elif plan.source != target:
        try:
            os.rename(plan.source, target)
        except OSError as exc:
            if exc.errno == errno.EXDEV:
                raise TakeoverError(f"cannot move {shown(plan.source)} to {shown(target)}: "
                                    "they are on different file systems. Move it yourself "
                                    "(with nothing running on it) and run install again") \
                    from None
            raise
        say(f"moved {shown(plan.source)} to {shown(target)}")
    directory = os.open(target, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW)
    try:
        # The directory first: from now on no one but root can add, rename or remove a
        # name in it (a member of a shared store's group could, until now).
        os.fchown(directory, 0, plan.group)
        os.fchmod(directory, AGENT_DIR_MODE)
        say(f"{shown(target)}: {plan.owner}, mode {AGENT_DIR_MODE:04o}")
        for name in plan.files:
            _take(directory, target / name, name, plan.group)
        if plan.files:
            say(f"{', '.join(plan.files)}: {plan.owner}, mode {AGENT_FILE_MODE:04o}")
    finally:
        os.close(directory)


def _take(directory: int, path: Path, name: str, group: int) -> None:
    """Give one of the store's files to the agent, through a descriptor of the file
    itself, checked again: what was checked is what changes hands."""
    fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW, dir_fd=directory)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            raise TakeoverError(f"{shown(path)} changed while the store was taken over (it "
                                "is no longer a regular file of one name): the files before "
                                "it in the list were taken over, it and those after were "
                                "not. Look at it and run install again")
        os.fchown(fd, 0, group)
        os.fchmod(fd, AGENT_FILE_MODE)
    finally:
        os.close(fd)
