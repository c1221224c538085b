"""One client's connection: frames in, answers out, every bound a hostile client meets.

An ``asyncio.Protocol``, so a connection is a few objects and no task: nothing piles up
while a client is slow or silent. It reads nothing until the kernel's word on the client
has been turned into a :class:`~setui.api.peer.Peer` (on a thread: the password database
may ask the network) and the hello has gone out. It never blocks on a write: output is
handed to the transport, and a client whose unread output passes :data:`MAX_QUEUED` is
dropped and its buffer freed.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import termios
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from setui.api.peer import Credentials, Peer, credentials
from setui.api.protocol import (
    BUSY,
    MAX_ID,
    MAX_REQUEST,
    Frames,
    ProtocolError,
    decode_frame,
    encode_frame,
    error_frame,
    parse_request,
)
from setui.core.ratelimit import TokenBucket

if TYPE_CHECKING:
    from setui.api.server import ApiServer

__all__ = ["BURST", "MAX_QUEUED", "RATE", "Connection"]

RATE = 20.0  # requests a second, on average
BURST = 40  # requests at once
MAX_REFUSED = 100  # requests refused as too many in a row before the connection is closed
MAX_QUEUED = 1024 * 1024  # unread bytes kept for a client before the next frame
CLOSE_GRACE = 5.0  # seconds a closed connection may take to hand over its last frame


def _unsent(transport: asyncio.BaseTransport) -> int:
    """Bytes the client has not read: the transport's buffer and the kernel's queue."""
    queued = transport.get_write_buffer_size() if isinstance(
        transport, asyncio.WriteTransport) else 0
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError, ValueError):
            buffer = bytearray(4)
            fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, buffer)  # SIOCOUTQ
            queued += int.from_bytes(buffer, "little")
    return queued


class Connection(asyncio.Protocol):
    """A client of the agent's API (see the module doc)."""

    def __init__(self, server: ApiServer, mono: Callable[[], float] = time.monotonic) -> None:
        self.server = server
        self.mono = mono
        self.transport: asyncio.Transport | None = None
        self.creds: Credentials | None = None
        self.peer: Peer | None = None
        self.frames_in = Frames(MAX_REQUEST)
        self.subscribed = False
        self.closed = False
        self.querying = False  # a read-only query in flight
        self.writing = False  # an approval, dismissal, hold or release in flight
        self.last_request = mono()
        self._bucket = TokenBucket(RATE, BURST, mono=mono)
        self._refused = 0
        self._sent = 0  # bytes handed to the transport, ever
        self._read = 0  # of those, what the client had read at the last look
        self._unread_since: float | None = None  # since when it has read nothing

    def __repr__(self) -> str:
        creds = self.creds
        return f"<api client uid {creds.uid} pid {creds.pid}>" if creds else "<api client>"

    # -- asyncio.Protocol ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        try:
            self.creds = credentials(transport.get_extra_info("socket"))
        except (OSError, AttributeError):
            transport.abort()  # no word from the kernel on who this is: nothing to serve
            self.closed = True
            return
        refusal = self.server.admit(self)
        if refusal is not None:
            transport.write(error_frame(BUSY, refusal))
            self.close()
            return
        transport.pause_reading()  # until the hello has gone out
        self.server.identify(self)

    def identified(self, peer: Peer, hello: Mapping[str, Any]) -> None:
        if self.closed or self.transport is None:
            return
        self.peer = peer
        self.send(encode_frame({"hello": hello}))
        self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        frames, error = self.frames_in.feed(data)
        for frame in frames:
            if self.closed:
                return
            self._frame(frame)
        if error is not None and not self.closed:
            self.fail(error)

    def eof_received(self) -> bool:
        return False  # the client is done: close our end too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.forget(self)

    # -- frames in ------------------------------------------------------------------------
    def _frame(self, raw: bytes) -> None:
        try:
            frame = decode_frame(raw)
        except ProtocolError as exc:
            self.fail(exc)  # not a JSON object: the stream cannot be trusted any more
            return
        if not self._bucket.try_acquire():  # every frame counts, a wrong one too
            self._refused += 1
            if self._refused > MAX_REFUSED:
                self.fail(ProtocolError(BUSY, f"more than {MAX_REFUSED} requests in a row "
                                              f"past {RATE:g} a second: closed"))
                return
            said = frame.get("id")
            self.answer_error(said if isinstance(said, int) and not isinstance(said, bool)
                              and 0 <= said <= MAX_ID else None, BUSY,
                              f"more than {RATE:g} requests a second (a burst of "
                              f"{BURST:g}): slow down")
            return
        self._refused = 0
        self.last_request = self.mono()
        try:
            request = parse_request(frame)
        except ProtocolError as exc:
            self.send(error_frame(exc.code, exc.message, exc.request_id))
            return
        self.server.dispatch(self, request)

    # -- frames out -----------------------------------------------------------------------
    def queued(self) -> int:
        return _unsent(self.transport) if self.transport is not None else 0

    def send(self, frame: bytes) -> bool:
        """Hand a frame to the transport; a client with MAX_QUEUED unread is dropped."""
        transport = self.transport
        if self.closed or transport is None or transport.is_closing():
            return False
        if transport.get_write_buffer_size() > MAX_QUEUED:
            self.drop(f"it left more than {MAX_QUEUED // 1024} KiB unread")
            return False
        transport.write(frame)
        self._sent += len(frame)
        return True

    def answer(self, request_id: int, body: Mapping[str, Any]) -> None:
        self.send(encode_frame({"id": request_id, "ok": body}))

    def send_progress(self, request_id: int, body: Mapping[str, Any]) -> None:
        self.send(encode_frame({"id": request_id, "progress": body}))

    def answer_error(self, request_id: int | None, code: str, message: str) -> None:
        self.send(error_frame(code, message, request_id))

    def fail(self, error: ProtocolError, *, complain: bool = True) -> None:
        """A last error frame (best effort), then close; a client's fault is logged
        (once a minute at most, by the server)."""
        if complain:
            self.server.complain("bad-client", f"{self!r}: {error.message}")
        self.send(error_frame(error.code, error.message))
        self.close()

    def close(self) -> None:
        """Close once the output is handed over, or after CLOSE_GRACE in any case."""
        transport = self.transport
        if transport is None:
            return
        self.closed = True
        transport.close()
        if transport.get_write_buffer_size():  # else it is closed already: no timer kept
            asyncio.get_running_loop().call_later(CLOSE_GRACE, transport.abort)

    def drop(self, why: str) -> None:
        """Close at once, throwing away what the client did not read."""
        self.server.complain("dropped", f"{self!r} dropped: {why}")
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    # -- the server's sweep ---------------------------------------------------------------
    def stalled_for(self, now: float) -> float:
        """Seconds the client has read nothing while output waited for it."""
        unread = self.queued()
        read = self._sent - unread
        if unread == 0 or read > self._read:
            self._unread_since = None if unread == 0 else now
        elif self._unread_since is None:
            self._unread_since = now
        self._read = read
        return 0.0 if self._unread_since is None else now - self._unread_since
