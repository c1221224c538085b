"""Where the store lives, and whether that place can be trusted with an audit log.

The audit log is only as good as its directory: whoever can write it can replace the
database, plant a symbolic link that makes setui write elsewhere, or delete it all. So a
directory is used for writing only when it is private (owned by this user or root, not
writable by group or others) or the shared mode a team sets up on purpose
(``/var/lib/setui``: owner root, group ``setui``, mode 2770, files 0660, every operator
in the group). setui's files in it are opened without following symbolic links, and what
setui creates is 0700 (directories) and 0600 (files) whatever the umask, or 0660 in the
shared mode.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

import platformdirs

__all__ = ["AGENT_LOCK", "SHARED_DIR", "SHARED_DIR_MODE", "SHARED_FILE_MODE", "check_dir",
           "check_file", "default_data_dir", "file_mode", "foreign_entries", "is_shared",
           "make_dirs", "open_nofollow", "read_nofollow", "usable_shared"]

SHARED_DIR = Path("/var/lib/setui")
SHARED_DIR_MODE = 0o2770  # setgid: files created inside keep the group
SHARED_FILE_MODE = 0o660
PRIVATE_FILE_MODE = 0o600
AGENT_LOCK = "agent.lock"  # one agent per store (setui.agent.lock)


def _error(message: str, path: Path) -> Exception:
    from setui.store.db import StoreError  # db imports this module

    return StoreError(message, path=path)


def is_shared(st: os.stat_result) -> bool:
    """The team's shared mode: a directory owned by root, mode exactly 2770."""
    return (os.name == "posix" and stat.S_ISDIR(st.st_mode) and st.st_uid == 0
            and stat.S_IMODE(st.st_mode) == SHARED_DIR_MODE)


def _in_group(gid: int) -> bool:
    return gid == os.getegid() or gid in os.getgroups()


def usable_shared(path: Path = SHARED_DIR) -> bool:
    """Whether ``path`` is a shared store this user may write (a member of its group)."""
    if os.name != "posix":
        return False
    try:
        st = os.stat(path)
    except OSError:
        return False
    return is_shared(st) and (_in_group(st.st_gid) or os.geteuid() == 0) \
        and os.access(path, os.W_OK | os.X_OK)


def default_data_dir(shared: Path = SHARED_DIR) -> Path:
    """``SETUI_DATA_DIR`` if set; else the shared store where it exists and this user may
    write it (so every front end sees the recorder's history and every operator's
    approvals); else the platform's per-user data directory."""
    env = os.environ.get("SETUI_DATA_DIR")
    if env:
        return Path(env).expanduser()
    if usable_shared(shared):
        return shared
    return Path(platformdirs.user_data_dir("setui", appauthor=False))


def make_dirs(directory: Path) -> None:
    """Create ``directory`` and each missing parent 0700, whatever the umask (``mkdir
    -p`` would leave the parents to the umask: ``umask 000`` made them 0777)."""
    missing: list[Path] = []
    current = directory
    while not current.exists() and current != current.parent:
        missing.append(current)
        current = current.parent
    for path in reversed(missing):
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue  # another process was quicker
        if os.name == "posix":
            os.chmod(path, 0o700, follow_symlinks=False)


def check_dir(directory: Path, *, write: bool) -> bool:
    """Refuse a data directory setui must not use; True when it is in the shared mode.

    Reading only needs a directory (an auditor reads another account's store); writing
    also needs one nobody else can write, or the shared mode.
    """
    try:
        st = os.stat(directory)
    except FileNotFoundError:
        raise _error(f"the data directory {directory} does not exist", directory) from None
    except OSError as exc:
        raise _error(f"cannot use the data directory {directory}: "
                     f"{exc.strerror or exc}", directory) from None
    if not stat.S_ISDIR(st.st_mode):
        raise _error(f"the data directory {directory} is not a directory (it is a "
                     f"{_kind(st)}): choose another with --data-dir or SETUI_DATA_DIR",
                     directory)
    if not os.access(directory, os.R_OK | os.X_OK):
        raise _error(f"cannot read the data directory {directory}: permission denied. "
                     "Check its permissions, or use --data-dir / SETUI_DATA_DIR", directory)
    shared = is_shared(st)
    if not write or os.name != "posix" or shared:
        return shared
    if st.st_uid not in (os.geteuid(), 0):
        raise _error(f"the data directory {directory} belongs to {_owner(st.st_uid)}, not to "
                     "you: its owner could replace the audit log under you. Use your own "
                     "directory, or the shared mode (see `setui audit --help`)", directory)
    if stat.S_IMODE(st.st_mode) & 0o022:
        raise _error(f"the data directory {directory} is writable by "
                     f"{'others' if st.st_mode & 0o002 else 'its group'} (mode "
                     f"{stat.S_IMODE(st.st_mode):o}): anyone who can write it can replace "
                     f"the audit log. Run `chmod 700 {directory}`, or set up the shared mode "
                     "(owner root, group setui, mode 2770)", directory)
    return False


def check_file(path: Path, *, write: bool, shared: bool) -> bool:
    """Refuse a symbolic link or anything but a regular file at ``path``; False if there is
    nothing there. A writer also refuses a file others may write (private mode) or one
    another account owns."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise _error(f"cannot use {path}: {exc.strerror or exc}", path) from None
    if stat.S_ISLNK(st.st_mode):
        raise _error(f"{path} is a symbolic link: setui never follows links in its data "
                     "directory (one could make it write somewhere else). Remove the link",
                     path)
    if not stat.S_ISREG(st.st_mode):
        what = "a setui database" if path.suffix == ".db" else "a setui file"
        raise _error(f"cannot use {path}: it is a {_kind(st)}, not {what}. Move it aside, "
                     "or choose another place with --data-dir or SETUI_DATA_DIR", path)
    if write and os.name == "posix" and shared:
        if stat.S_IMODE(st.st_mode) & 0o002:
            raise _error(f"{path} is writable by users outside the shared store's group "
                         f"(mode {stat.S_IMODE(st.st_mode):o}): run `chmod 660 {path}`", path)
    elif write and os.name == "posix":
        if st.st_uid not in (os.geteuid(), 0):
            raise _error(f"{path} belongs to {_owner(st.st_uid)}, not to you: setui writes "
                         "no audit log into a file another account controls", path)
        if stat.S_IMODE(st.st_mode) & 0o022:
            raise _error(f"{path} is writable by group or others (mode "
                         f"{stat.S_IMODE(st.st_mode):o}): run `chmod 600 {path}`", path)
    return True


def file_mode(shared: bool) -> int:
    return SHARED_FILE_MODE if shared else PRIVATE_FILE_MODE


def open_nofollow(path: Path, flags: int, mode: int = PRIVATE_FILE_MODE) -> int:
    """``os.open`` that refuses a symbolic link at ``path`` (ELOOP) in words."""
    flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) \
        | getattr(os, "O_BINARY", 0)
    try:
        return os.open(path, flags, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _error(f"{path} is a symbolic link: setui never follows links in its "
                         "data directory. Remove the link", path) from None
        raise


def read_nofollow(path: Path, limit: int = 4096) -> bytes:
    """The first ``limit`` bytes of a regular file, never through a symbolic link; OSError
    (FileNotFoundError when absent) if it cannot be read."""
    fd = open_nofollow(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        return os.read(fd, limit)
    finally:
        os.close(fd)


def foreign_entries(directory: Path, db_name: str) -> list[str]:
    """Names in ``directory`` that setui did not put there (its database, the database's
    -wal/-shm/-journal, the witness and their temporary files, the agent's lock)."""
    ours = (db_name, f"{db_name}-wal", f"{db_name}-shm", f"{db_name}-journal",
            f"{db_name}.audit-head", AGENT_LOCK)
    out = []
    with contextlib.suppress(OSError):
        for name in sorted(os.listdir(directory)):
            if name in ours or name.startswith(f".{db_name}."):
                continue
            out.append(name)
    return out


def _kind(st: os.stat_result) -> str:
    mode = st.st_mode
    for test, word in ((stat.S_ISREG, "regular file"), (stat.S_ISDIR, "directory"),
                       (stat.S_ISLNK, "symbolic link"), (stat.S_ISFIFO, "named pipe"),
                       (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device")):
        if test(mode):
            return word
    return "special file"


def _owner(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"
