"""A loopback TCP forwarder: a second endpoint that reaches the same service, as a local
proxy in front of the metadata service does. Threads, so a test of processes (which
waits by blocking) can run it beside the emulator."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import pytest

__all__ = ["Forwarder", "forwarder"]


class Forwarder:
    """Accepts on 127.0.0.1 (a free port) and pipes each connection to ``target``."""

    def __init__(self, target: str) -> None:
        host, port = target.removeprefix("http://").rsplit(":", 1)
        self.target = (host.strip("[]"), int(port))
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return  # closed
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(source, sink), daemon=True).start()

    def close(self) -> None:
        self.server.close()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.close()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


@pytest.fixture
def forwarder() -> Iterator[type[Forwarder]]:
    """``forwarder(emulator.url)``: forwarders closed at the end of the test."""
    made: list[Forwarder] = []

    class Made(Forwarder):
        def __init__(self, target: str) -> None:
            super().__init__(target)
            made.append(self)

    yield Made
    for one in made:
        one.close()
