"""Fixtures of the API's tests (helpers in api_helpers.py)."""

from __future__ import annotations

from tests.support.api_helpers import accounts, base, emulator

__all__ = ["accounts", "base", "emulator"]
