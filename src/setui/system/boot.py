"""Which boot of this machine this is: the kernel's boot id, and when it booted.

The kernel draws a new random boot id at every boot (``/proc/sys/kernel/random/boot_id``),
so a record that last saw another one knows the machine has booted since, even when the
clock was wrong at boot or was set since; ``/proc/stat``'s ``btime`` says when it booted
(the wall clock at read time less the time since boot, so it moves with a later step of
that clock: a fact to show, not an identity). Linux only; elsewhere both are None and no
boot is ever told.

``SETUI_BOOT_ID_FILE`` is for tests only: the boot id is read from that file instead, so
a test can make "another boot" by changing the file between two runs of the agent. Never
set it on a real machine: a wrong boot id makes the record say the machine rebooted.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

__all__ = ["BOOT_ID", "STAT", "TEST_VARIABLE", "Boot", "current_boot_id", "read_boot_id",
           "read_btime", "this_boot"]

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
STAT = Path("/proc/stat")
TEST_VARIABLE = "SETUI_BOOT_ID_FILE"
_MAX_READ = 128  # a boot id is 36 characters: more is not one
_MAX_STAT = 256 * 1024  # /proc/stat of a machine with hundreds of CPUs is a few tens of KB
_ID = re.compile(r"[0-9A-Za-z-]{1,64}")


@dataclass(frozen=True)
class Boot:
    """This boot as far as the kernel says: None for what it does not."""

    boot_id: str | None
    booted_at: datetime | None


def read_boot_id(path: Path) -> str | None:
    """The boot id in ``path``: letters, digits and dashes only, at most 64 of them;
    None for anything else (a file that cannot be read, or holds something else)."""
    try:
        with path.open("rb") as file:
            text = file.read(_MAX_READ).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if _ID.fullmatch(text) else None


def read_btime(path: Path = STAT) -> datetime | None:
    """When this machine booted, from ``/proc/stat``'s ``btime`` line; None without it."""
    try:
        with path.open("rb") as file:
            text = file.read(_MAX_STAT).decode("ascii", "replace")
    except OSError:
        return None
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == "btime" and value.strip().isdigit() and len(value.strip()) <= 12:
            return datetime.fromtimestamp(int(value.strip()), tz=timezone.utc)
    return None


def current_boot_id(environ: Mapping[str, str] | None = None) -> str | None:
    """The kernel's boot id (from ``SETUI_BOOT_ID_FILE`` when a test sets it)."""
    env = os.environ if environ is None else environ
    injected = env.get(TEST_VARIABLE)
    return read_boot_id(Path(injected) if injected else BOOT_ID)


def this_boot(environ: Mapping[str, str] | None = None) -> Boot:
    """The kernel's boot id and boot time."""
    return Boot(current_boot_id(environ), read_btime())
