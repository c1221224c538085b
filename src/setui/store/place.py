"""Where the store lives, and whether that place can be trusted with an audit log.

The audit log is only as good as its directory: whoever can write it can replace the
database, plant a symbolic link that makes setui write elsewhere, or delete it all. So
setui writes a store only in a directory it owns that no one else can write, and only
files it owns.

No one else reads one either. A file another user may open is a file they may lock: a
shared ``fcntl`` lock on the -shm file's bytes stalls every write of SQLite's, and a
``flock`` on ``agent.lock`` keeps the agent from starting, both through a read-only
descriptor. So every store is its owner's alone: the directory 0700, its files 0600,
whatever the umask. The agent's store (``/var/lib/setui``) is root's so; its group
(``setui``) is kept on the directory only to name who may reach the agent's socket
beside it. Members of that group read the record through the agent's API; a store of
the old layout (0750, files 0640) is made private by ``setui service install`` and by
the agent as it starts (:func:`make_private`). The shared writable mode (2770, every
member writing every record) is gone too.

setui's files are opened without following symbolic links.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

import platformdirs

from setui.settings.environment import from_environment
from setui.store.errors import ReadOnlyStore, StoreError

__all__ = ["AGENT_DIR_MODE", "AGENT_FILE_MODE", "AGENT_LOCK", "AGENT_STORE", "DB_NAME",
           "PRIVATE_FILE_MODE", "Sharing", "check_dir", "check_file", "default_data_dir",
           "foreign_entries", "is_temporary", "make_dirs", "make_private", "open_nofollow",
           "read_nofollow", "store_names"]

AGENT_STORE = Path("/var/lib/setui")  # the unit's StateDirectory=
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
AGENT_DIR_MODE = PRIVATE_DIR_MODE  # root's alone; its group only names the socket's
AGENT_FILE_MODE = PRIVATE_FILE_MODE
AGENT_LOCK = "agent.lock"  # one agent per store (setui.agent.lock)
DB_NAME = "setui.db"


def _error(message: str, path: Path, *, readable: bool = False) -> Exception:
    return (ReadOnlyStore if readable else StoreError)(message, path=path)


class Sharing:
    """The mode of the files setui makes in a store: its owner's alone (0600), in the
    agent's store too (see the module's docstring: a file someone may open is a file
    they may lock)."""

    mode = PRIVATE_FILE_MODE

    def __init__(self, directory: os.stat_result | None = None) -> None:
        self.directory = directory

    def apply(self, fd: int) -> None:
        """Give a file just made its mode (the umask may have taken bits, or left some)."""
        if hasattr(os, "fchmod"):
            os.fchmod(fd, self.mode)


def _readable(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.stat(path).st_mode) and os.access(path, os.R_OK | os.X_OK)
    except OSError:
        return False


def _holds_store(directory: Path) -> bool:
    return any(os.path.lexists(directory / name) for name in (DB_NAME, AGENT_LOCK))


def default_data_dir(agent_store: Path = AGENT_STORE) -> Path:
    """``SETUI_DATA_DIR`` if set; else the agent's store where this user may read it
    (root: a front end run as root reads the history the agent keeps rather than start
    one beside it; no one else may read it); else the platform's per-user data
    directory (a user's own store)."""
    given = from_environment("data_dir")
    if given is not None:
        return Path(given).expanduser()
    if os.name == "posix" and _readable(agent_store):
        return agent_store
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


def check_dir(directory: Path, *, write: bool) -> os.stat_result:
    """Refuse a data directory setui must not use; its stat when it may.

    Reading only needs a directory (an auditor reads another account's store, a member of
    group setui the agent's); writing also needs one this user owns and no one else can
    write. :class:`~setui.store.errors.ReadOnlyStore` when it is a store this user may read
    but not write (the agent's)."""
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
        if os.name == "posix" and st.st_uid == 0 and os.geteuid() != 0:
            raise _error(f"cannot read the data directory {directory}: it is root's alone "
                         "(as the agent's store is). Read the record through the agent: "
                         "`setui history`, `audit` and `report` ask it when given neither "
                         "--standalone nor --data-dir; or run this as root (sudo)", directory)
        raise _error(f"cannot read the data directory {directory}: permission denied. "
                     "Check its permissions, or use --data-dir / SETUI_DATA_DIR", directory)
    if not write or os.name != "posix":
        return st
    mode = stat.S_IMODE(st.st_mode)
    mine = os.geteuid()
    if st.st_uid == 0 and mode & 0o020 and not mode & 0o002 \
            and (mode & stat.S_ISGID or _holds_store(directory)):
        # The old shared mode (2770): any member could have rewritten any record.
        raise _error(f"{directory} is writable by its group (mode {mode:o}): a shared "
                     "writable store, which setui no longer writes. `sudo setui service "
                     "install` makes it the agent's store (root's alone; its group reads "
                     "through the agent)", directory, readable=mine != 0)
    if st.st_uid == 0 and mine != 0 and not mode & 0o022 and _holds_store(directory):
        raise _error(f"this is the agent's store ({directory}): read-only; approve through "
                     "the agent (only root writes it; `setui history`, `audit` and "
                     "`report` read it)", directory, readable=True)
    if st.st_uid != mine:
        raise _error(f"the data directory {directory} belongs to {_owner(st.st_uid)}, not to "
                     "you: its owner could replace the audit log under you. Use your own "
                     "directory", directory)
    if mode & 0o022:
        raise _error(f"the data directory {directory} is writable by "
                     f"{'others' if mode & 0o002 else 'its group'} (mode {mode:o}): anyone "
                     "who can write it can replace the audit log. Run `chmod 700 "
                     f"{directory}`", directory)
    return st


def make_private(directory: Path, db_name: str = DB_NAME) -> list[str]:
    """Make a store its owner's alone: ``directory`` 0700 and setui's files in it 0600,
    the directory first (from then on no one else can open a file in it). Only what this
    user owns changes; nothing is followed. What changed, in words (nothing: empty).

    A store of the old layout (the agent's 0750, files 0640) let its group open the
    files, and so lock them. A descriptor someone opened before keeps working: `setui
    service install` refuses to change a store anyone has open, and says who."""
    if os.name != "posix":
        return []
    mine = os.geteuid()
    said: list[str] = []
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    dir_fd = os.open(directory, flags | os.O_DIRECTORY)
    try:
        st = os.fstat(dir_fd)
        if st.st_uid == mine and stat.S_IMODE(st.st_mode) & 0o077:
            was = stat.S_IMODE(st.st_mode)
            os.fchmod(dir_fd, PRIVATE_DIR_MODE)
            said.append(f"{directory}: mode {PRIVATE_DIR_MODE:04o} (was {was:04o})")
        ours = store_names(db_name)
        for name in sorted(os.listdir(dir_fd)):
            if name in ours or is_temporary(name, db_name):
                changed = _make_file_private(dir_fd, name, flags, mine)
                if changed is not None:
                    said.append(f"{directory / name}: mode {PRIVATE_FILE_MODE:04o} (was "
                                f"{changed:04o})")
    finally:
        os.close(dir_fd)
    return said


def _make_file_private(dir_fd: int, name: str, flags: int, mine: int) -> int | None:
    """One of the store's files 0600 when it is this user's and others may open it: its
    mode before, or None when it was left as it was (a link, gone, another's, private)."""
    try:
        if not stat.S_ISREG(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
            return None  # never opened: a device or a pipe is not setui's to touch
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError:
        return None  # a link, or gone: the store's own checks say so when it opens
    try:
        st = os.fstat(fd)
        was = stat.S_IMODE(st.st_mode)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != mine or not was & 0o077:
            return None
        os.fchmod(fd, PRIVATE_FILE_MODE)
        return was
    finally:
        os.close(fd)


def check_file(path: Path, *, write: bool) -> bool:
    """Refuse a symbolic link or anything but a regular file at ``path``; False if there is
    nothing there. A writer also refuses a file another account owns, or one group or
    others may write."""
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
    if write and os.name == "posix":
        if st.st_uid != os.geteuid():
            raise _error(f"{path} belongs to {_owner(st.st_uid)}, not to you: setui writes "
                         "no audit log into a file another account controls", path)
        if stat.S_IMODE(st.st_mode) & 0o022:
            raise _error(f"{path} is writable by group or others (mode "
                         f"{stat.S_IMODE(st.st_mode):o}): run `chmod 600 {path}`", path)
    return True


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


def store_names(db_name: str) -> tuple[str, ...]:
    """The files a store is made of: its database, the database's -wal/-shm/-journal, the
    audit head witness and the agent's lock (a store is moved or taken over whole)."""
    return (db_name, f"{db_name}-wal", f"{db_name}-shm", f"{db_name}-journal",
            f"{db_name}.audit-head", AGENT_LOCK)


def is_temporary(name: str, db_name: str) -> bool:
    """A file setui was writing beside the database (a witness's temporary file)."""
    return name.startswith(f".{db_name}.")


def foreign_entries(directory: Path, db_name: str) -> list[str]:
    """Names in ``directory`` that setui did not put there (anything but the files of
    :func:`store_names` and their temporary files)."""
    ours = store_names(db_name)
    out = []
    with contextlib.suppress(OSError):
        for name in sorted(os.listdir(directory)):
            if name in ours or is_temporary(name, db_name):
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
