"""How many examples a property test tries: all of them in `make test`, a quarter in
`make test-fast` (its hypothesis profile, ``fast``, registered in conftest), so the tier
run between edits stays quick while the whole suite keeps every example it had."""

from __future__ import annotations

from hypothesis import settings

__all__ = ["FULL", "examples"]

FULL = 100  # hypothesis's own default: the profile every run but the fast tier's uses


def examples(count: int) -> int:
    """``count`` in the default profile, scaled by the loaded profile's max_examples."""
    return max(10, count * settings().max_examples // FULL)
