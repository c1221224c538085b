"""The heap of a started dashboard, kept out of the cyclic garbage collector's way.

Every dialog's widgets live long enough to reach the oldest generation and then die, so
full collections come every few approvals, and each one walked the whole heap of the
running dashboard (about 70,000 objects: 60-90 ms, now and then between the ``y`` of an
approval and its POST, and about 0.15 % of a core when idle). :func:`freeze_heap_once`,
called once the dashboard drew its first frame, collects and then freezes what start-up
made (modules, the app, its screens), which are not walked again; what becomes garbage
later is still collected.
"""

from __future__ import annotations

import gc

__all__ = ["freeze_heap_once", "frozen"]

_state = {"frozen": False}


def frozen() -> bool:
    """Whether this process froze its start-up heap."""
    return _state["frozen"]


def freeze_heap_once() -> None:
    """Collect, then freeze what is alive, once per process.

    Collected first, so nothing that is already garbage is kept. Objects frozen here that
    become garbage in cycles later are not collected: called when start-up is done, that
    is the app and its screens, which live as long as the process anyway.
    """
    if _state["frozen"]:
        return
    _state["frozen"] = True
    gc.collect()
    gc.freeze()
