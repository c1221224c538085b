"""Talking to systemd when it runs setui: readiness, status, watchdog, journal.

``setui agent`` runs as ``setui-agent.service`` (``Type=notify``, ``WatchdogSec=``), and
``setui watch`` may run under a unit of its own: systemd then waits for ``READY=1`` before
it calls the unit started, shows ``STATUS=`` in ``systemctl status``, and restarts the
service when ``WATCHDOG=1`` stops arriving, so a hung one does not silently stop keeping
the history. Everything here is the plain
sd_notify(3) datagram protocol and the ``JOURNAL_STREAM`` convention of systemd.exec(5),
spoken with the standard library: no libsystemd, no new dependency, nothing of the
dashboard. Outside systemd (a terminal, a pipe, Windows) every call is a silent no-op.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import IO, Any

from setui.core.textsafe import printable

__all__ = ["DEBUG", "ERR", "INFO", "NOTICE", "WARNING", "Notifier", "for_journal",
           "journal_prefix", "under_journal"]

# syslog priorities, as sd-daemon(3)'s SD_ERR ... SD_DEBUG prefixes spell them.
ERR, WARNING, NOTICE, INFO, DEBUG = 3, 4, 5, 6, 7

# How many keep-alives per WatchdogSec. sd_watchdog_enabled(3) recommends at least two;
# four leave room for a guest paused by the hypervisor (an Azure Freeze event pauses the
# VM for seconds: the recorder must not be killed for sleeping through the very event it
# is there to record).
PINGS_PER_WATCHDOG = 4

# STATUS= is one line in `systemctl status`; longer text only gets cut there.
_STATUS_LIMIT = 200


class Notifier:
    """The service manager's notification socket, or nothing (then every call does nothing).

    Build it with :meth:`from_env` once, early: it reads ``NOTIFY_SOCKET``,
    ``WATCHDOG_USEC`` and ``WATCHDOG_PID`` as systemd set them for this process. Every
    sending method returns whether the datagram left; a failure is kept in
    :attr:`last_error` and never raised, because a recorder must keep recording even
    when it cannot tell systemd about it.
    """

    def __init__(self, address: str | None, *, watchdog_usec: int | None = None,
                 problem: str | None = None) -> None:
        self.address = address
        self.watchdog_usec = watchdog_usec
        self.last_error: str | None = problem
        self._socket: socket.socket | None = None
        self._last_ping: float | None = None

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None,
                 pid: int | None = None) -> Notifier:
        """From the environment systemd gives a ``Type=notify`` service.

        An unset ``NOTIFY_SOCKET`` (not under systemd), a platform without AF_UNIX
        datagrams (Windows) or an address this module cannot use all give a notifier that
        does nothing; the last keeps the reason in :attr:`last_error`.
        """
        env = os.environ if environ is None else environ
        raw = env.get("NOTIFY_SOCKET") or None
        watchdog = _watchdog_usec(env, os.getpid() if pid is None else pid)
        if raw is None or os.name != "posix" or not hasattr(socket, "AF_UNIX"):
            return cls(None, watchdog_usec=watchdog)
        address, problem = _socket_address(raw)
        return cls(address, watchdog_usec=watchdog, problem=problem)

    # -- state --------------------------------------------------------------------------------
    @property
    def enabled(self) -> bool:
        """Whether anything is listening for our notifications at all."""
        return self.address is not None

    @property
    def watchdog_enabled(self) -> bool:
        """Whether systemd expects ``WATCHDOG=1`` from this process (``WatchdogSec=``)."""
        return self.enabled and self.watchdog_usec is not None

    @property
    def watchdog_period(self) -> float | None:
        """Seconds between keep-alives, or None when no watchdog is armed."""
        if not self.watchdog_enabled or self.watchdog_usec is None:
            return None
        return self.watchdog_usec / 1_000_000 / PINGS_PER_WATCHDOG

    # -- messages -----------------------------------------------------------------------------
    def ready(self, status: str | None = None) -> bool:
        """``READY=1``: start-up is done; systemd reports the unit started from now on."""
        return self.notify("READY=1", *_status_field(status))

    def status(self, text: str) -> bool:
        """``STATUS=...``: one line for ``systemctl status``, made printable and short."""
        return self.notify(*_status_field(text))

    def stopping(self, status: str | None = None) -> bool:
        """``STOPPING=1``: shutting down on purpose, so a slow exit is not a failure."""
        return self.notify("STOPPING=1", *_status_field(status))

    def watchdog(self, mono_now: float | None = None) -> bool:
        """``WATCHDOG=1`` now (if a watchdog is armed), and remember when for
        :meth:`watchdog_due`."""
        if not self.watchdog_enabled:
            return False
        self._last_ping = time.monotonic() if mono_now is None else mono_now
        return self.notify("WATCHDOG=1")

    def watchdog_due(self, mono_now: float) -> bool:
        """Whether a keep-alive is due at ``mono_now`` (a ``time.monotonic()`` reading):
        always False without a watchdog, True before the first ping."""
        period = self.watchdog_period
        if period is None:
            return False
        return self._last_ping is None or mono_now - self._last_ping >= period

    async def keep_alive(self, *, sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
                         mono: Callable[[], float] = time.monotonic) -> None:
        """Ping the watchdog every :attr:`watchdog_period` until cancelled; returns at once
        when no watchdog is armed. Run it as a task on the loop that does the polling: a
        loop that stops turning stops the pings, and systemd restarts the recorder."""
        period = self.watchdog_period
        if period is None:
            return
        while True:
            now = mono()
            if self.watchdog_due(now):
                self.watchdog(now)
            # Another caller may have pinged in between: the next one is due a period
            # after whichever ping was last.
            last = self._last_ping if self._last_ping is not None else now
            await sleep(max(0.0, last + period - mono()))

    def notify(self, *fields: str) -> bool:
        """Send ``fields`` (``NAME=value``, one per line) as one datagram."""
        if self.address is None or not fields:
            return False
        message = "\n".join(fields).encode("utf-8", "backslashreplace")
        try:
            sock = self._socket
            if sock is None:
                sock = self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                # Never block the event loop: a full queue at PID 1 loses one datagram.
                sock.setblocking(False)
            sock.sendto(message, self.address)
        except OSError as exc:
            self.last_error = (f"cannot notify systemd at {printable(self.address)}: "
                               f"{exc.strerror or exc}")
            return False
        return True

    def close(self) -> None:
        """Release the socket (a later message opens a new one)."""
        if self._socket is not None:
            with contextlib.suppress(OSError):
                self._socket.close()
            self._socket = None

    def __repr__(self) -> str:
        return f"<Notifier {self.address!r} watchdog_usec={self.watchdog_usec}>"


def _socket_address(raw: str) -> tuple[str | None, str | None]:
    """``NOTIFY_SOCKET`` as a socket address: a path, or ``@name`` for a Linux abstract
    socket (sd_notify(3)); anything else (``vsock:``) is not for a service like this one."""
    if raw.startswith("@"):
        if not raw[1:]:
            return None, "NOTIFY_SOCKET is '@' alone: no abstract socket name"
        return "\0" + raw[1:], None
    if raw.startswith("/"):
        return raw, None
    return None, f"NOTIFY_SOCKET {printable(raw, 80)} is neither a path nor an @name"


def _watchdog_usec(env: Mapping[str, str], pid: int) -> int | None:
    """``WATCHDOG_USEC`` when it is meant for this process (sd_watchdog_enabled(3)): a
    ``WATCHDOG_PID`` naming another process means a parent's watchdog, not ours."""
    text = env.get("WATCHDOG_USEC", "").strip()
    if not text.isdigit():
        return None
    usec = int(text)
    if usec <= 0:
        return None
    owner = env.get("WATCHDOG_PID", "").strip()
    if owner and (not owner.isdigit() or int(owner) != pid):
        return None
    return usec


def _status_field(text: str | None) -> tuple[str, ...]:
    if text is None:
        return ()
    return (f"STATUS={printable(text, _STATUS_LIMIT)}",)


# -- the journal ------------------------------------------------------------------------------
def under_journal(stream: IO[Any], environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``stream`` is connected straight to the journal: ``JOURNAL_STREAM`` is
    the ``device:inode`` of the stream systemd gave us (systemd.exec(5)). Compared, not
    just present, because a child redirected to a file inherits the variable."""
    env = os.environ if environ is None else environ
    value = env.get("JOURNAL_STREAM", "")
    device, sep, inode = value.partition(":")
    if not sep or not device.isdigit() or not inode.isdigit():
        return False
    try:
        stat = os.fstat(stream.fileno())
    except (AttributeError, OSError, ValueError):  # StringIO, a closed stream
        return False
    return (stat.st_dev, stat.st_ino) == (int(device), int(inode))


def journal_prefix(priority: int) -> str:
    """``<3>`` ... ``<7>``: journald reads the line's priority from this prefix
    (sd-daemon(3)) and adds its own timestamp, so the line needs none of ours."""
    if not 0 <= priority <= 7:
        raise ValueError(f"a syslog priority is 0 to 7, got {priority}")
    return f"<{priority}>"


def for_journal(text: str, priority: int) -> str:
    """``text`` with the priority prefix on every line: journald makes each line an
    entry of its own, and a line without the prefix would fall back to the default."""
    prefix = journal_prefix(priority)
    return "\n".join(prefix + line for line in text.split("\n"))
