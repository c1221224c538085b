"""The local audit log against a copy that left the VM: which records differ.

The chain proves nothing against someone who rewrote it whole; a copy they could not
reach does. The copy is JSON lines, either ``setui audit export`` (every field, with
``seq`` and ``hash``) or what the forward sent (``journalctl -o json`` lines with
``SETUI_SEQ``, ``SETUI_HASH``, ...), or a collector's file of RFC 5424 lines with the
``[setui@32473 seq="..." hash="..."]`` element, or just the messages (the ``SyslogMessage``
column of Log Analytics' ``Syslog`` table). Every record whose hash differs, that
one side has and the other lacks, is named, with the fields that differ.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from setui.auditforward import SD_ID, fields
from setui.store.records import AuditRecord

__all__ = ["AgainstResult", "compare"]

# What is compared, in this order, and how it is named to people.
_SHOWN = {"SETUI_TIME": "time", "SETUI_ACTION": "action", "SETUI_EVENT_ID": "EventId",
          "SETUI_ACTOR": "actor", "SETUI_OUTCOME": "outcome"}
_SD = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
# setui.auditforward.message(): "setui audit record N: ACTION EventId=ID by ACTOR: OUTCOME
# (hash H)".
_MESSAGE = re.compile(r"setui audit record (\d+): (\S+) EventId=(\S*) by (.*?): (.*) "
                      r"\(hash ([0-9a-f]{64})\)")


@dataclass
class AgainstResult:
    """``differences``: one sentence per record that differs, oldest first."""

    checked: int = 0  # records found in the copy
    differences: list[str] = field(default_factory=list)
    unreadable: int = 0  # lines of the copy that are not a setui record
    newer: int = 0  # records the log has after the copy's last one (not checked)

    @property
    def ok(self) -> bool:
        return not self.differences and self.checked > 0


def _from_line(line: str) -> dict[str, str] | None:
    """One line of the copy as SETUI_* fields, or None if it is not a record."""
    text = line.strip()
    if not text:
        return None
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        if "SETUI_HASH" in data:
            return {str(k): _scalar(v) for k, v in data.items() if str(k).startswith("SETUI_")}
        if "hash" in data and "seq" in data:
            return fields(data)
        return None
    start = text.find(f"[{SD_ID} ")
    if start < 0:
        # Just the message, as Log Analytics' Syslog table keeps it (SyslogMessage).
        found_message = _MESSAGE.search(text)
        if found_message is None:
            return None
        seq, action, event_id, actor, outcome, digest = found_message.groups()
        return {"SETUI_SEQ": seq, "SETUI_ACTION": action,
                "SETUI_EVENT_ID": "" if event_id == "-" else event_id,
                "SETUI_ACTOR": actor, "SETUI_OUTCOME": outcome, "SETUI_HASH": digest}
    found = {f"SETUI_{k.upper()}": re.sub(r"\\(.)", r"\1", v)
             for k, v in _SD.findall(text[start:])}
    return found if "SETUI_HASH" in found else None


def _scalar(value: Any) -> str:
    # journalctl -o json writes a field that is not valid UTF-8 as a list of bytes.
    if isinstance(value, list):
        try:
            return bytes(value).decode("utf-8", "replace")
        except (ValueError, TypeError):
            return str(value)
    return "" if value is None else str(value)


def _seq(found: Mapping[str, str]) -> int | None:
    text = found.get("SETUI_SEQ", "")
    return int(text) if text.isdigit() and len(text) < 19 else None


def compare(records: Iterable[AuditRecord], lines: Iterable[str]) -> AgainstResult:
    """Compare the log (``records``) with the copy's ``lines``."""
    result = AgainstResult()
    copy: dict[int, dict[str, str]] = {}
    for line in lines:
        found = _from_line(line)
        seq = None if found is None else _seq(found)
        if found is None or seq is None:
            result.unreadable += 1 if line.strip() else 0
            continue
        copy[seq] = found  # a record forwarded twice (a retry) is the same record
    result.checked = len(copy)
    local = {r.seq: fields(r.to_json()) for r in records}
    last = max(copy, default=0)
    for seq in sorted(set(copy) | {s for s in local if s <= last}):
        theirs, ours = copy.get(seq), local.get(seq)
        if ours is None:
            result.differences.append(f"record {seq} is in the copy but not in the log: "
                                      "removed, or the log was replaced")
        elif theirs is None:
            result.differences.append(f"record {seq} is in the log but not in the copy: "
                                      "inserted afterwards, or it was never forwarded")
        elif theirs.get("SETUI_HASH") != ours["SETUI_HASH"]:
            changed = [f"{name} {theirs.get(key, '?')!r} in the copy, {ours[key]!r} in the log"
                       for key, name in _SHOWN.items()
                       if key in theirs and theirs[key] != ours[key]]
            result.differences.append(
                f"record {seq} differs: " + ("; ".join(changed) if changed else
                                             "its hash (the records before it were changed)"))
    result.newer = sum(1 for s in local if s > last)
    return result
