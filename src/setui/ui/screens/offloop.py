"""Record queries for the screens, run on a thread and answered on the event loop.

SQLite may wait up to its busy timeout (5 s) for another writer (a recorder, an
approval in another terminal), and the agent's API answers over a socket; on Textual's
event loop either would freeze every key and every countdown. A screen asks here
instead: the query runs in a thread worker, and its result (or the store's or the
agent's error, in words) comes back on the loop, to a screen that is still there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TypeVar

from textual.screen import Screen

__all__ = ["query_store"]

_T = TypeVar("_T")
_V = TypeVar("_V")
_Dismissed = TypeVar("_Dismissed")  # what the screen returns: any screen may ask


def query_store(screen: Screen[_Dismissed], fn: Callable[[], _T], done: Callable[[_T], None],
                failed: Callable[[str], None], *, group: str) -> None:
    """Run ``fn`` on a thread; then ``done(result)`` or ``failed(message)`` on the loop,
    unless the screen has gone meanwhile."""
    from setui.store.errors import RecordError

    app = screen.app

    def back(callback: Callable[[_V], None], value: _V) -> None:
        def apply() -> None:
            if screen.is_attached:
                callback(value)

        with contextlib.suppress(RuntimeError):  # the app stopped while the query ran
            app.call_from_thread(apply)

    def work() -> None:
        try:
            result = fn()
        except RecordError as exc:  # the store's, or the agent's when read through it
            back(failed, str(exc))
            return
        back(done, result)

    screen.run_worker(work, thread=True, group=group, exit_on_error=False)
