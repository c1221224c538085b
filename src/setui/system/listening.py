"""A listening socket made the same way for the emulator and the agent's metrics endpoint:
non-blocking, for an event loop's ``sock_accept``, and able to take the port of a server
just stopped (SO_REUSEADDR on POSIX, where it does not let two servers share a port)."""

from __future__ import annotations

import os
import socket

__all__ = ["listen"]


def listen(host: str, port: int, backlog: int = 128) -> socket.socket:
    """Bound to the first address ``host`` resolves to (port 0: a free one); OSError in
    the system's words when it cannot be."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    listener = socket.socket(family, kind, proto)
    try:
        if os.name == "posix":
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(backlog)
        listener.setblocking(False)
    except OSError:
        listener.close()
        raise
    return listener
