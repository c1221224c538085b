"""Notifications through apprise, on a thread of their own, each sent once.

Sending can take seconds (a slow webhook, SMTP) and fail for minutes (the network is
down: the event itself may be why). The agent's loop only hands a message over; this
worker keeps it in the store first (its key makes a second hand-over, or the same change
told again after a restart, a no-op), sends it, and retries until ``retries`` is used
up, pausing as :class:`~setui.core.backoff.Backoff` says: doubling from 5 s to 5 minutes,
jittered, so agents whose webhook went down together do not retry it in step. Pending
messages left by a stopped agent are sent by the next.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import queue
import re
import string
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from setui.core.backoff import Backoff
from setui.core.clock import utc_now
from setui.core.model import Event
from setui.core.textsafe import masked
from setui.store.agent import AgentLog

__all__ = ["Message", "Notifier", "render", "started_told"]

_FIRST_RETRY = 5.0
_MAX_RETRY = 300.0
_MAX_FIELD = 300


@dataclass(frozen=True)
class Message:
    key: str  # the lifecycle change it tells: sent once per key
    event_id: str
    change: str
    title: str
    body: str


def render(template: str, fields: Mapping[str, object]) -> str:
    """``template`` with ``$fields`` (checked when the policy was read); each value is
    bounded and freed of control characters: it came from the network."""
    clean = {k: masked(str(v)[:_MAX_FIELD]) for k, v in fields.items()}
    return string.Template(template).safe_substitute(clean)


_BEFORE_ITS_NOT_BEFORE = re.compile(r" before its NotBefore [^;]*")


def started_told(event: Event | None, before: Event | None, detail: str
                 ) -> tuple[Event | None, str]:
    """The event and the detail a "started" message tells. A started event has no
    NotBefore of its own: the message's ``$not_before`` is the one it had while scheduled,
    and the detail says by how much it came early without naming that time again."""
    if event is not None and event.not_before is None and before is not None:
        event = replace(event, not_before=before.not_before)
    return event, _BEFORE_ITS_NOT_BEFORE.sub(" early", detail)


class Notifier:
    """``submit()`` returns at once; a worker thread stores, sends and retries."""

    def __init__(self, urls: tuple[str, ...], log: AgentLog | None, *, retries: int = 5,
                 send: Callable[[str, str], bool] | None = None,
                 on_outcome: Callable[[Message, bool, str | None], None] | None = None,
                 first_retry: float = _FIRST_RETRY) -> None:
        self.urls = urls
        self.log = log
        self.retries = retries
        self.backoff = Backoff(first_retry, max(first_retry, _MAX_RETRY))
        # apprise loads on the worker thread at the first message: none, none loaded.
        self._sender = send
        self._on_outcome = on_outcome or (lambda message, sent, error: None)
        self._inbox: queue.Queue[Message | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self.sent = 0
        self.failed = 0

    @staticmethod
    def _apprise(urls: tuple[str, ...]) -> Callable[[str, str], bool]:
        with warnings.catch_warnings():
            # apprise (through PGPy) imports the standard library's imghdr while it loads
            # its plugins, at the first add(); on 3.11 and 3.12 that warns that imghdr
            # goes in 3.13 (on 3.13 apprise shims it itself). The warning is apprise's, not
            # the operator's to act on: silenced here only.
            warnings.filterwarnings("ignore", message="'imghdr' is deprecated",
                                    category=DeprecationWarning)
            import apprise

            sender = apprise.Apprise()
            for url in urls:
                sender.add(url)

        def send(title: str, body: str) -> bool:
            return bool(sender.notify(title=title, body=body))

        return send

    def start(self) -> None:
        self._thread = threading.Thread(target=self._work, name="setui-notify", daemon=True)
        self._thread.start()

    def submit(self, message: Message) -> None:
        self._inbox.put(message)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop once each message due now has had a try (a stop's own "interrupted" among
        them), within ``timeout``; what is still pending stays for the next agent."""
        self._inbox.put(None)
        if self._thread is not None:
            self._thread.join(timeout)

    # -- the worker -----------------------------------------------------------------------
    def _work(self) -> None:
        due: list[tuple[float, int, Message, int]] = []  # (when, order, message, attempts)
        order = itertools.count()
        if self.log is not None:
            with contextlib.suppress(Exception):  # the store says why elsewhere
                for pending in self.log.notifications(pending_only=True):
                    message = Message(pending.key, pending.event_id, pending.change,
                                      pending.title, pending.body)
                    heapq.heappush(due, (time.monotonic(), next(order), message,
                                         pending.attempts))
        while True:
            wait = max(0.0, due[0][0] - time.monotonic()) if due else None
            try:
                item = self._inbox.get(timeout=wait)
            except queue.Empty:
                pass  # nothing new: a retry is due
            else:
                if item is None:
                    self._last_tries(due)
                    return
                if self._keep(item):
                    heapq.heappush(due, (time.monotonic(), next(order), item, 0))
                continue
            while due and due[0][0] <= time.monotonic():
                _, _, message, attempts = heapq.heappop(due)
                retry = self._attempt(message, attempts)
                if retry is not None:
                    heapq.heappush(due, (time.monotonic() + retry, next(order), message,
                                         attempts + 1))

    def _last_tries(self, due: list[tuple[float, int, Message, int]]) -> None:
        """Stopping: one try for each message due by now, oldest first."""
        now = time.monotonic()
        for when, _, message, attempts in sorted(due):
            if when <= now:
                self._attempt(message, attempts)

    def _keep(self, message: Message) -> bool:
        """Store the message; False when it was stored (so sent or queued) before."""
        if self.log is None:
            return True
        try:
            return self.log.queue_notification(
                message.key, event_id=message.event_id, change=message.change,
                title=message.title, body=message.body, at=utc_now())
        except Exception:
            return True  # unrecorded is better than unsent

    def _attempt(self, message: Message, attempts: int) -> float | None:
        """Send once; the pause before the next try, or None when done."""
        try:
            if self._sender is None:
                self._sender = self._apprise(self.urls)
            sent, error = self._sender(message.title, message.body), None
        except Exception as exc:  # apprise plugins raise rarely, but a bug must not stop us
            sent, error = False, f"{type(exc).__name__}: {exc}"
        if not sent and error is None:
            error = "apprise could not deliver it to every URL"
        final = sent or attempts + 1 > self.retries
        if self.log is not None:
            with contextlib.suppress(Exception):
                self.log.notification_done(message.key, sent=sent, at=utc_now(),
                                           error=error, final=final)
        if sent:
            self.sent += 1
        elif final:
            self.failed += 1
        with contextlib.suppress(Exception):
            self._on_outcome(message, sent, None if sent else error)
        if final:
            return None
        return self.backoff.delay(attempts + 1)
