"""The cyclic garbage collector kept off objects it can only waste time on.

Two kinds, each measured:

- A burst of many objects in no cycle: start-up's modules, classes and functions, or a
  fleet's answer of tens of thousands of small dicts and records. Made with the
  collector on, they are walked again and again as they are made (half of json.loads's
  time on a 10,000-VM answer and a third of the model's, in bench/fleet; about 7 ms of a
  recorder's start). :func:`collector_paused` holds it off for the burst.
- What start-up made and keeps for the life of the process. Left in, every full
  collection walks all of it: 60-90 ms in the running dashboard, now and then between
  the ``y`` of an approval and its POST, and about 0.15 % of a core when idle; in
  ``setui watch`` once a second or so. :func:`freeze_heap_once`, when start-up is done,
  takes it out of every later collection; what becomes garbage afterwards is still
  collected.

The collector is one per process, so these are the only places setui touches it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused", "freeze_heap_once"]

_state = {"frozen": False}


@contextmanager
def collector_paused(*, freeze: bool = False) -> Iterator[None]:
    """The collector off for the block, then as it was (a nested pause leaves it off).

    ``freeze``: what is alive when the block ends is frozen before the collector comes
    back (start-up, whose objects live as long as the process)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if freeze:
                gc.freeze()
            gc.enable()


def freeze_heap_once() -> None:
    """Collect, then freeze what is alive, once per process, when start-up is done.

    Collected first, so nothing that is already garbage is kept. Objects frozen here
    that become garbage in cycles later are never collected: called when start-up is
    done, that is the app, its screens, the monitor, which live as long as the process
    anyway."""
    if _state["frozen"]:
        return
    _state["frozen"] = True
    gc.collect()
    gc.freeze()
