"""The local audit log against a copy that left the VM: which records differ.

The chain proves nothing against someone who rewrote it whole; a copy they could not
reach does. So the copy is read as evidence, and only from its structured part: JSON lines
(``setui audit export``, with ``seq`` and ``hash``, or ``journalctl -o json`` with
``SETUI_SEQ``, ``SETUI_HASH``, ...), or lines holding setui's RFC 5424 structured data
element ``[setui@32473 seq="..." ... hash="..."]`` (a collector's file, a syslog file,
Log Analytics' ``SyslogMessage``). The element is the first ``[setui@32473 `` on the line
(every form sends it before any free text, and the message never holds a ``[``) and is
parsed as RFC 5424 says, or not at all: the message text is never read, so nothing an
EventId, an SSH client or an error body says can become a field.

Someone who rewrote the log can also send forged records to the collector, after the
genuine ones they cannot take back: two versions of one record that disagree are a
finding, both named, whichever comes last. Every record whose hash differs, that one side
has and the other lacks, is named, with the fields that differ.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from setui.store.records import AuditRecord
from setui.system.auditforward import SD_ID, fields

__all__ = ["AgainstResult", "RecordMismatch", "compare"]

# What is compared, in this order, and how it is named to people.
_SHOWN = {"SETUI_TIME": "time", "SETUI_ACTION": "action", "SETUI_EVENT_ID": "EventId",
          "SETUI_ACTOR": "actor", "SETUI_OUTCOME": "outcome"}
# The record's own values (the actor and the outcome are words made from them, and may be
# worded otherwise by another version of setui): with the log's hash, these must agree.
_OWN = ("SETUI_TIME", "SETUI_ACTION", "SETUI_EVENT_ID", "SETUI_INCARNATION",
        "SETUI_ENDPOINT", "SETUI_PREV_HASH")
_START = f"[{SD_ID}"
# RFC 5424 SD-PARAM after its space: a name (1-32 printable ASCII but = ] " and space) and a
# quoted value in which ", \ and ] are escaped; an unescaped ] in a value is malformed.
_PARAM = re.compile(r' ([!#-<>-\\^-~]{1,32})="((?:[^"\\\]]|\\.)*)"')
_UNESCAPE = re.compile(r'\\(["\\\]])')
# A record sent again and again with other content is shown this many times at most.
_VERSIONS_SHOWN = 10
# journald's own fields, which the sender cannot set: who sent a journal entry.
_TRUSTED = (("_UID", "uid"), ("_PID", "pid"), ("_COMM", "command"))


@dataclass(frozen=True)
class RecordMismatch:
    """One record that differs: a sentence, and each version when the copy holds several."""

    seq: int
    text: str
    versions: tuple[str, ...] = ()


@dataclass
class AgainstResult:
    """``differences``: every record that differs, oldest first."""

    checked: int = 0  # records found in the copy
    differences: list[RecordMismatch] = field(default_factory=list)
    unreadable: int = 0  # lines of the copy that are not a setui record
    newer: int = 0  # records the log has after the copy's last one (not checked)

    @property
    def ok(self) -> bool:
        return not self.differences and self.checked > 0


@dataclass(frozen=True)
class _Version:
    """A record as one line of the copy has it."""

    line: int
    fields: Mapping[str, str]
    sender: str = ""  # journald's word on who sent it, when the copy has it


def _element(text: str) -> dict[str, str] | None:
    """The fields of the first setui element on the line, parsed strictly, or None."""
    start = text.find(_START + " ")
    if start < 0:
        return None
    found: dict[str, str] = {}
    at = start + len(_START)
    while (param := _PARAM.match(text, at)) is not None:
        key = "SETUI_" + param.group(1).upper()
        if key in found:
            return None  # a name twice: not an element setui wrote
        found[key] = _UNESCAPE.sub(r"\1", param.group(2))
        at = param.end()
    if not text.startswith("]", at):
        return None  # cut short, or a value with an unescaped ] or "
    return found


def _from_json(data: dict[str, Any]) -> tuple[dict[str, str], str] | None:
    if "SETUI_HASH" in data:
        sender = ", ".join(f"{word} {_scalar(data[key])}" for key, word in _TRUSTED
                           if key in data)
        return ({str(k): _scalar(v) for k, v in data.items() if str(k).startswith("SETUI_")},
                f"sent by {sender}" if sender else "")
    if "hash" in data and "seq" in data:  # setui audit export
        return fields(data), ""
    return None


def _from_line(line: str) -> tuple[dict[str, str], str] | None:
    """One line of the copy as SETUI_* fields and who sent it, or None if it holds none."""
    text = line.strip()
    if not text:
        return None
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            return None
        return _from_json(data) if isinstance(data, dict) else None
    found = _element(text)
    return None if found is None or "SETUI_HASH" not in found else (found, "")


def _scalar(value: Any) -> str:
    """A journal field's value: journalctl -o json writes a value that is not valid UTF-8
    as a list of bytes, and a field sent several times as a list of its values."""
    if isinstance(value, list):
        if all(isinstance(v, int) and 0 <= v < 256 for v in value):
            return bytes(value).decode("utf-8", "replace")
        return "several values: " + json.dumps(value, ensure_ascii=True)
    return "" if value is None else str(value)


def _seq(found: Mapping[str, str]) -> int | None:
    text = found.get("SETUI_SEQ", "")
    return int(text) if text.isascii() and text.isdigit() and len(text) < 19 else None


def _same(theirs: Mapping[str, str], ours: Mapping[str, str]) -> bool:
    """Whether the copy's version is the log's record: its hash, and its own values."""
    return theirs.get("SETUI_HASH") == ours["SETUI_HASH"] and all(
        theirs[key] == ours[key] for key in _OWN if key in theirs)


def _described(version: _Version) -> str:
    f = version.fields
    text = (f"line {version.line}: hash {f.get('SETUI_HASH', '?')}, time "
            f"{f.get('SETUI_TIME', '?')!r}, actor {f.get('SETUI_ACTOR', '?')!r}, outcome "
            f"{f.get('SETUI_OUTCOME', '?')!r}")
    return f"{text} ({version.sender})" if version.sender else text


def _versions_differ(seq: int, versions: list[_Version],
                     ours: Mapping[str, str] | None) -> RecordMismatch:
    if ours is None:
        verdict = f"the log has no record {seq}"
    else:
        matching = [v.line for v in versions if _same(v.fields, ours)]
        verdict = (f"the log matches line {matching[0]}" if matching
                   else "the log matches none of them")
    shown = [_described(v) for v in versions[:_VERSIONS_SHOWN]]
    if len(versions) > _VERSIONS_SHOWN:
        shown.append(f"and {len(versions) - _VERSIONS_SHOWN} more")
    return RecordMismatch(seq, f"record {seq}: the copy holds {len(versions)} versions that "
                               "disagree: someone sent a record again with other content (or "
                               "wrote it into the copy); setui sends each record one way",
                          (*shown, verdict))


def _one_differs(seq: int, theirs: Mapping[str, str], ours: Mapping[str, str]) -> str:
    if theirs.get("SETUI_HASH") != ours["SETUI_HASH"]:
        changed = [f"{name} {theirs.get(key, '?')!r} in the copy, {ours[key]!r} in the log"
                   for key, name in _SHOWN.items() if key in theirs and theirs[key] != ours[key]]
        return f"record {seq} differs: " + ("; ".join(changed) if changed else
                                            "its hash (the records before it were changed)")
    changed = [f"{key.removeprefix('SETUI_').lower()} {theirs[key]!r} in the copy, "
               f"{ours[key]!r} in the log" for key in _OWN if theirs.get(key, ours[key])
               != ours[key]]
    return (f"record {seq} differs under the same hash: " + "; ".join(changed) + " (the "
            "copy's line was not written by setui from this record)")


def compare(records: Iterable[AuditRecord], lines: Iterable[str]) -> AgainstResult:
    """Compare the log (``records``) with the copy's ``lines``."""
    result = AgainstResult()
    copy: dict[int, list[_Version]] = {}
    for number, line in enumerate(lines, start=1):
        read = _from_line(line)
        seq = None if read is None else _seq(read[0])
        if read is None or seq is None:
            result.unreadable += 1 if line.strip() else 0
            continue
        versions = copy.setdefault(seq, [])
        # A record forwarded twice unchanged (a retry) is one record.
        if not any(v.fields == read[0] for v in versions):
            versions.append(_Version(number, read[0], read[1]))
    result.checked = len(copy)
    local = {r.seq: fields(r.to_json()) for r in records}
    last = max(copy, default=0)
    for seq in sorted(set(copy) | {s for s in local if s <= last}):
        versions, ours = copy.get(seq, []), local.get(seq)
        if len(versions) > 1:
            result.differences.append(_versions_differ(seq, versions, ours))
        elif ours is None:
            result.differences.append(RecordMismatch(
                seq, f"record {seq} is in the copy but not in the log: removed, or the log "
                     "was replaced"))
        elif not versions:
            result.differences.append(RecordMismatch(
                seq, f"record {seq} is in the log but not in the copy: inserted afterwards, "
                     "or it was never forwarded"))
        elif not _same(versions[0].fields, ours):
            result.differences.append(RecordMismatch(
                seq, _one_differs(seq, versions[0].fields, ours)))
    result.newer = sum(1 for s in local if s > last)
    return result
