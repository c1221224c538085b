"""Hostile scenario data shared by the hostile tests: what a compromised or broken
metadata service (or a proxy in front of it) could put in every text field."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from setui.emulator.scenario import Scenario, load_scenario

MARKUP = "[bold red]ALERT[/bold red] [link=https://evil.example]click[/link]"
ESCAPES = "\x1b[2J\x1b[31mred\x1b]0;pwned\x07\x1b]8;;https://evil.example\x1b\\hi"
C1 = "\x9b31m\x85\x90"
BIDI = "\u202egnp.exe\u2066iso\u2069\u200f"
EMOJI = "👩‍👩‍👧‍👦🇳🇱 e\u0301\u0301 Z̴̡a̸l̷g̶o"
RTL = "שלום עולם مرحبا"
HUGE = "H" * 50_000 + "\x1b[2J" + "Ж" * 50_000  # 100 KB, with a trap in the middle

# Bytes that must never reach a terminal: C0 controls except newline, DEL, C1 controls
# (as UTF-8), bidi embeddings/overrides/isolates and the directional marks (as UTF-8).
RAW_CONTROL = re.compile(
    rb"[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\x8e\x8f\xaa-\xae]|\xe2\x81[\xa6-\xa9]")
# The same as characters, for rendered widget text.
RAW_CONTROL_TEXT = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")

HOSTILE_EVENTS: list[dict[str, Any]] = [
    {"id": "evt-" + ESCAPES + C1, "type": "Reboot", "notice": 900,
     "description": MARKUP + " " + ESCAPES, "resources": ["vm-0", MARKUP, BIDI]},
    {"id": "not-a-guid " + BIDI, "type": "Freeze", "notice": 1200,
     "description": RTL + " " + EMOJI, "resources": ["vm-0", EMOJI, RTL]},
    {"id": "[bold]huge[/bold]", "type": "Redeploy", "notice": 1500,
     "description": HUGE, "resources": ["vm-0", "R" * 100_000]},
    {"id": "\x1b[31mweird-type", "type": "Reb\x1b[5moot", "notice": 1800,
     "description": C1, "resources": ["vm-0"]},
]


def hostile_scenario_data(events: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"name": "hostile", "vm_name": "vm-0", "tail": 600,
            "events": events if events is not None else HOSTILE_EVENTS}


def write_hostile_scenario(path: Path, data: dict[str, Any]) -> Scenario:
    """A JSON scenario keeps every control character exactly as written."""
    path.write_text(json.dumps(data), encoding="utf-8")
    return load_scenario(str(path))
