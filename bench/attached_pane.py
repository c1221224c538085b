"""The attached dashboard idle with the pane under the timeline showing at 80x24 too.

bench/attached.py with three of its ten events: the table and the timeline leave the
pane room at 80x24 (the agent's plan a line per event, the change log's newest entries)
as well as at 200x60. The same figures, each beside the standalone dashboard of the same
size in the same run (its pane: the change log alone).
"""

from __future__ import annotations

from attached import run as run_attached
from common import Row

EVENTS = 3


def run(quick: bool = False) -> list[Row]:
    return run_attached(quick, events=EVENTS)
