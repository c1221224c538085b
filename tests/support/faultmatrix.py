"""The fault matrix's shared pieces: the cases, a scenario whose document changes while
the endpoint misbehaves, and a line reader for `setui watch` with deadlines. (A module of
its own name: every conftest.py is imported as ``conftest``.)"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from setui.emulator.faults import Faults, parse_faults
from setui.emulator.scenario import Scenario, parse_scenario
from setui.emulator.server import Emulator
from setui.store import Store

POSIX = os.name == "posix"

# One event from the start; a second appears at scenario second 100. A test sees the
# first, breaks the endpoint, moves the clock past 100 and heals: the second event must
# then show up by itself, and the first must still be in the store.
SCENARIO_TEXT = """
name = "fault-matrix"
vm_name = "web-0"
tail = 100000

[[events]]
id = "evt-before-fault"
type = "Reboot"
at = 0

[[events]]
id = "evt-after-fault"
type = "Freeze"
at = 100
"""
BEFORE_AT = 10.0
AFTER_AT = 110.0
BEFORE_ID = "evt-before-fault"
AFTER_ID = "evt-after-fault"


def scenario() -> Scenario:
    return parse_scenario(SCENARIO_TEXT)


@dataclass(frozen=True)
class Case:
    """One way the endpoint breaks, and the words a person must read about it."""

    name: str
    faults: str | None  # a --faults spec; None: the endpoint goes away (stop, restart)
    words: tuple[str, ...]  # each must appear in the error shown; {timeout}: the client's
    # 400 and 404 cannot be fixed by retrying: asked again at the slow pace (10 s).
    slow: bool = False

    def said(self, timeout: float) -> tuple[str, ...]:
        """The words, for a client whose request timeout is ``timeout`` seconds."""
        return tuple(w.format(timeout=f"{timeout:g}") for w in self.words)

    def inject(self, emulator: Emulator) -> None:
        if self.faults is None:
            emulator.stop()
        else:
            emulator.set_faults(parse_faults(self.faults))

    def heal(self, emulator: Emulator) -> None:
        if self.faults is None:
            emulator.start()  # the same port again
        else:
            emulator.set_faults(Faults())


CASES = [
    Case("gone-away", None, ("nothing answers at", "connection refused")),
    Case("timeout", "hang=1", ("no answer from", "within {timeout} s")),
    Case("400", "400=1", ("rejected", "Bad request"), slow=True),
    Case("404", "404=1", ("not found (404)",), slow=True),
    Case("410", "410=1", ("not ready yet (410 Gone)", "retry for up to 70 seconds")),
    Case("429-retry-after", "429=1,retry-after=1", ("rate limited (429)", "wait 1 s")),
    Case("429", "429=1", ("rate limited (429)", "backing off")),
    Case("500", "500=1", ("the metadata service failed (500",)),
    Case("503-retry-after", "503=1,retry-after=1", ("the metadata service failed (503",)),
    Case("503", "503=1", ("the metadata service failed (503",)),
    Case("truncated", "truncate=1", ("the answer was cut off", "connection closed after")),
    Case("not-json", "notjson=1", ("not a scheduled-events document", "not JSON")),
    Case("not-a-document", "notdoc=1", ("not a scheduled-events document",)),
    Case("50-mb", "big=50", ("47.7 MiB", "more than the 4.0 MiB", "not read")),
    Case("trickle", "trickle=1", ("did not complete within {timeout} s", "bytes arrived")),
]
CASE_IDS = [case.name for case in CASES]


def stored(store: Store) -> dict[int, tuple[object, str]]:
    """incarnation -> (first seen, document): what a fault must never change or lose."""
    return {r.incarnation: (r.first_seen, r.raw_json)
            for r in store.history.incarnations(limit=None)}


def watch_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["SETUI_DATA_DIR"] = str(tmp_path / "unused")
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONIOENCODING"] = "utf-8"
    return env
