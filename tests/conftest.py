"""Every test runs with its own data and config directories, never the user's."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path_factory: pytest.TempPathFactory,
                   monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("SETUI_DATA_DIR", str(home / "data"))
    monkeypatch.setenv("SETUI_CONFIG", str(home / "config.toml"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "share"))
    for var in ("SETUI_ENDPOINT", "SETUI_API_VERSION", "HTTP_PROXY", "HTTPS_PROXY",
                "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Refuse a suite that collected nothing: CI must never pass by accident."""
    if not items:
        raise pytest.UsageError("no tests were collected")


ROOT = Path(__file__).parent.parent
