"""A fresh store in a temporary data directory for each test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from setui.store import Store


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def store(data_dir: Path) -> Iterator[Store]:
    opened = Store.open_dir(data_dir)
    try:
        yield opened
    finally:
        opened.close()
