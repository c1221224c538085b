"""A data directory this test's child processes cannot write, even when the tests run as
root (as they do here): the child gives up root's power to ignore permission bits."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

__all__ = ["lock_up", "obey_permissions"]


def obey_permissions() -> None:
    """In the child, before exec: give up root's power to ignore permission bits
    (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER), for it and what it runs."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2, 3):
        if libc.prctl(24, ctypes.c_ulong(cap), ctypes.c_ulong(0), ctypes.c_ulong(0),
                      ctypes.c_ulong(0)) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def lock_up(data: Path, how: Callable[[], Any] | None) -> None:
    data.chmod(0o555)
    probe = f"open({str(data / 'probe')!r}, 'w')"
    try:
        done = subprocess.run([sys.executable, "-c", probe], preexec_fn=how,
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot start a process that obeys permissions: {exc}")
    if done.returncode == 0:
        pytest.skip("this process can write a 0555 directory (root with its capabilities)")
    assert "PermissionError" in done.stderr, done.stderr


