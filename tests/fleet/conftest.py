"""Fleet tests: a real Prometheus (Debian's, installed by CI) scraping stand-in exporters
or real agents on loopback; skipped, with the reason, only where it is not installed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.promtest import Prometheus, have_prometheus

NO_PROMETHEUS = "prometheus is not on PATH (apt-get install prometheus; CI installs it)"


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Callable[..., Prometheus]]:
    """``prometheus(targets)``: a started Prometheus, stopped at the end of the test."""
    if not have_prometheus():
        pytest.skip(NO_PROMETHEUS)
    started: list[Prometheus] = []

    def make(targets: list[str], **options: object) -> Prometheus:
        root = tmp_path / f"prometheus-{len(started)}"
        root.mkdir()
        server = Prometheus(root, targets, **options)  # type: ignore[arg-type]
        started.append(server)
        server.start()
        return server

    yield make
    for server in started:
        server.stop()
