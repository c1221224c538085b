"""The cyclic garbage collector held off while a large answer is decoded and understood.

A fleet's answer is tens of thousands of small dicts and records, none in a cycle; made
with the collector on, it walks them again and again as they are made (half of
json.loads's time on a 10,000-VM answer, a third of the model's, measured in bench/fleet).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]


@contextmanager
def gc_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
