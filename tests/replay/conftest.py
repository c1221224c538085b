"""A recorded incident (tests/replay/scenario.py) in a store, and a fixed time zone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from setui.store import Store
from tests.support.dashboard import _fixed_time_zone
from tests.support.incident import HOLE, INCIDENT, SECONDS
from tests.support.recording import Approval, record_scenario

__all__ = ["_fixed_time_zone", "recorded"]

APPROVALS = (Approval(90, 0, user="alice"),
             Approval(50, 1, user="bob", refused="the event is not this VM's"))


@pytest.fixture
def recorded(tmp_path: Path) -> Iterator[Store]:
    store = record_scenario(tmp_path / "setui.db", INCIDENT, seconds=SECONDS, holes=[HOLE],
                            approvals=APPROVALS)
    yield store
    store.close()
