"""How setui may write a time, and a scanner that finds every other form in its output.

People read one form (core.timefmt): ``2026-11-25 19:01:03 UTC``, the local time beside it
as ``(20:01:03 CET)``, a time of day ``19:01:03`` under a heading that says UTC,
countdowns ``T-2:49`` / ``T-1d 09h`` and durations ``3m 05s``. Machines read ISO 8601 UTC
with ``Z`` (JSON values, the hooks' environment). Anything else is a second way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["MACHINE", "foreign_in_env", "foreign_in_json", "foreign_in_text"]

_MONTH = "(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_DAY = "(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
_RFC_1123 = re.compile(rf"\b{_DAY},? \d{{1,2}} {_MONTH}\b|\bGMT\b")
_FOREIGN = re.compile("|".join([
    _RFC_1123.pattern,  # the service's own form, and "Sun 22 Nov 2026"
    r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}",  # ISO 8601 is for machines
    r"\b\d{1,2}:\d{2}:\d{2}[.,]\d",  # fractions of a second
    r"\(in \d+(?:\.\d+)? ?(?:s|min|h|days?)\)",  # another way to count down
    r"(?<![\d-])\d{2}-\d{2} \d{2}:\d{2}(?::\d{2})?\b",  # a date without its year
]))
MACHINE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?Z")
# JSON keys whose values are times, for machines.
_TIME_KEY = re.compile(r"(^|_)(time|at|seen|not_before|from|to|until|since)$|^not_recording_"
                       r"|^NotBefore$")
# Text that is the network's, kept as it came: not setui's to write. An audit record's
# "event" is the event as the operator confirmed it, in the service's own fields, and
# under the hash chain.
_NETWORK_KEYS = frozenset({"description", "document", "raw_json", "event"})


def foreign_in_text(text: str, where: str = "") -> list[str]:
    """Each time written for people in a form other than setui's one, with its line."""
    found = []
    for line in text.splitlines():
        for match in _FOREIGN.finditer(line):
            found.append(f"{where}: {match.group(0)!r} in {line.strip()[:160]!r}")
    return found


def foreign_in_json(value: Any, where: str = "", key: str = "") -> list[str]:
    """Times in a JSON value: ISO 8601 UTC with Z where the key names a time, setui's one
    human form in the words around them."""
    if isinstance(value, Mapping):
        return [f for k, v in value.items() if k not in _NETWORK_KEYS
                for f in foreign_in_json(v, f"{where}.{k}", str(k))]
    if isinstance(value, list):
        return [f for i, v in enumerate(value) for f in foreign_in_json(v, f"{where}[{i}]",
                                                                         key)]
    if not isinstance(value, str) or not value:
        return []
    if _TIME_KEY.search(key):
        return [] if MACHINE.fullmatch(value) else [f"{where}: {value!r} is not ISO 8601 Z"]
    return foreign_in_text(value, where)


def foreign_in_env(lines: Iterable[str], where: str = "") -> list[str]:
    """``SETUI_NOT_BEFORE`` and the like are for machines: ISO 8601 Z (empty: none), and
    no other variable carries a time in another form."""
    found = []
    for line in lines:
        name, _, value = line.partition("=")
        if name == "SETUI_NOT_BEFORE":
            if value and not MACHINE.fullmatch(value):
                found.append(f"{where}: {line!r}")
        elif _RFC_1123.search(value):
            found.append(f"{where}: {line!r}")
    return found
