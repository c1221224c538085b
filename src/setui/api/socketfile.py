"""Where the agent's socket lives, and how it is made.

The path: ``--socket``, else ``socket`` in the config or ``SETUI_SOCKET``, else
``/run/setui/api.sock`` when ``/run/setui`` exists and the agent may write it (the unit's
``RuntimeDirectory``), else no socket at all, said in a line. The socket is made mode
0660 with the data directory's group (``setui`` in the service's layout), and before
anyone can connect: it listens only once its mode and group are set. It is never made on
top of another agent's: a socket file that answers is someone's, and the agent refuses to
start; one that does not answer is what a dead agent left, and is replaced. A directory
anyone may write (without the sticky bit) is refused: whoever can rename the socket could
put their own in its place.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
from dataclasses import dataclass
from pathlib import Path

from setui.api.client import DEFAULT_SOCKET, AgentClient, ApiError, NoAgent
from setui.core.textsafe import printable

__all__ = ["DEFAULT_SOCKET", "SOCKET_MODE", "BoundSocket", "SocketError", "SocketInUse",
           "bind_socket", "check_socket", "choose_socket"]

SOCKET_MODE = 0o660


class SocketError(Exception):
    """The socket cannot be made; the message is for people."""


class SocketInUse(SocketError):
    """Another agent answers on the socket."""


def choose_socket(configured: Path | None, default: Path = DEFAULT_SOCKET,
                  ) -> tuple[Path | None, str | None]:
    """The socket's path (made absolute: it is shown to clients and in the lock), or None
    and why there is none."""
    if configured is not None:
        return configured.expanduser().absolute(), None
    directory = default.parent
    if not directory.is_dir():
        return None, (f"{directory} does not exist (the service makes it): no API socket, "
                      "front ends run standalone; give --socket PATH to serve one")
    if not os.access(directory, os.W_OK | os.X_OK):
        return None, (f"{directory} is not writable for the agent: no API socket, front "
                      "ends run standalone; give --socket PATH to serve one")
    return default, None


def _check_directory(path: Path) -> None:
    shown = printable(str(path.parent), 200)
    try:
        st = os.stat(path.parent)
    except OSError as exc:
        raise SocketError(f"cannot use {shown} for the socket: {exc.strerror or exc}") \
            from None
    if not stat.S_ISDIR(st.st_mode):
        raise SocketError(f"{shown} is not a directory: it cannot hold the socket")
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        who = "others" if st.st_mode & 0o002 else "its group"
        raise SocketError(f"{shown} is writable by {who} "
                          "without the sticky bit: anyone who can write it could put "
                          "their own socket in the agent's place. Use another directory")


def _clear(path: Path) -> None:
    """Remove what a dead agent left at ``path``; refuse anything else."""
    shown = printable(str(path), 200)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise SocketError(f"{shown} exists and is not a socket: it is left alone; remove it "
                          "or choose another --socket")
    try:
        with AgentClient.connect(path) as other:
            agent = other.hello.agent
            raise SocketInUse(f"another agent answers on {shown} (pid {agent.pid}, since "
                              f"{agent.since:%Y-%m-%dT%H:%M:%SZ})")
    except NoAgent:
        pass  # nothing answers: what a dead agent left behind
    except ApiError as exc:
        raise SocketInUse(f"something answers on {shown}: {exc.message}") from None
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


@dataclass
class BoundSocket:
    """The listening socket and the file it made (to remove that file, and only it)."""

    path: Path
    sock: socket.socket
    file: tuple[int, int]  # (st_dev, st_ino) of the socket file as made
    note: str | None = None  # what did not go as asked (the group), for the start-up lines

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            st = os.lstat(self.path)
            if (st.st_dev, st.st_ino) == self.file:
                os.unlink(self.path)


def check_socket(path: Path) -> None:
    """Whether a socket may be made at ``path``, made nowhere: SocketError in words (a
    directory others may write, something there that is not a dead agent's socket,
    another agent answering). Blocking, as :func:`bind_socket`, which checks again."""
    _check_directory(path)
    _clear(path)


def bind_socket(path: Path, *, group: int | None) -> BoundSocket:
    """A listening socket at ``path``, mode 0660 with ``group`` (None: as made)."""
    _check_directory(path)
    _clear(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    shown = printable(str(path), 200)
    note = None
    try:
        sock.bind(str(path))
        st = os.lstat(path)
        os.chmod(path, SOCKET_MODE)
        if group is not None and st.st_gid != group:
            try:
                os.chown(path, -1, group)
            except PermissionError:
                note = (f"the socket {shown} keeps group {st.st_gid}: this agent may not give "
                        f"it group {group}, the data directory's")
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise SocketError(f"cannot serve the API at {shown}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return BoundSocket(path, sock, (st.st_dev, st.st_ino), note)
