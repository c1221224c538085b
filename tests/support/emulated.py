"""The emulator as the approval tests start from it, and the approvals it was sent.

``freeze_announced``: the documented Freeze of the live-migration scenario, announced
(at the scenario's second 60) 15 minutes ahead, on a clock only the test moves.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from setui.emulator.scenario import load_scenario
from setui.emulator.server import Emulator, ManualClock, RecordedRequest


@contextlib.contextmanager
def freeze_announced(clock: ManualClock | None = None, **options: Any) -> Iterator[Emulator]:
    """The live-migration emulator 61 s in, on ``clock`` (a new one if None); ``options``
    as Emulator takes them (port, identity)."""
    clock = ManualClock() if clock is None else clock
    with Emulator(load_scenario("live-migration"), clock=clock, **options) as emulator:
        clock.advance(61)
        yield emulator


def posts(emulator: Emulator) -> list[RecordedRequest]:
    """What ``emulator`` was sent by POST: the approvals."""
    return [r for r in emulator.requests if r.method == "POST"]
