"""Fixtures for the emulator tests: real loopback servers, a manual clock, a plain client."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(trust_env=False, timeout=5.0) as http:
        yield http
