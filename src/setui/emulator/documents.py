"""How an events document looks on the wire, per api-version.

Each version is served what it carries (:mod:`setui.core.apiversions`): the fields it had
(``Description`` from 2019-04-01, ``EventSource`` from 2019-08-01, ``DurationInSeconds``
from 2020-07-01), and only the event types it can carry (no ``Preempt`` before 2017-11-01,
no ``Terminate`` before 2019-01-01: such an event is left out of that version's document,
whose incarnation is still the service's). The 2017 preview writes NotBefore in ISO 8601
and IaaS resource names with a leading underscore.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from email.utils import formatdate
from typing import Any

from setui.core.apiversions import KNOWN_API_VERSIONS, PREVIEW_API_VERSION, carries
from setui.emulator.timeline import EventState

__all__ = [
    "API_VERSIONS",
    "NEWEST_VERSIONS",
    "NOT_JSON",
    "big_document",
    "http_date",
    "iso_date",
    "not_a_document",
    "render_document",
    "render_event",
    "served",
]

API_VERSIONS = KNOWN_API_VERSIONS
# What IMDS lists in "newest-versions" when the api-version is missing or unknown.
NEWEST_VERSIONS = list(reversed(API_VERSIONS[-3:]))
PREVIEW = PREVIEW_API_VERSION


def http_date(posix: float) -> str:
    """RFC 1123, as in ``Date`` and NotBefore: ``Mon, 11 Apr 2022 22:26:58 GMT``."""
    return formatdate(posix, usegmt=True)


def iso_date(posix: float) -> str:
    """The 2017 preview's NotBefore: ``2016-09-19T18:29:47Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(posix))


def render_event(event: EventState, api_version: str, not_before: int | None) -> dict[str, Any]:
    """One event in the field order of the documents; ``not_before`` is POSIX seconds."""
    spec = event.spec
    if not_before is None:
        shown = ""
    else:
        shown = iso_date(not_before) if api_version == PREVIEW else http_date(not_before)
    resources = list(spec.resources)
    if api_version == PREVIEW:
        resources = [f"_{name}" for name in resources]
    doc: dict[str, Any] = {
        "EventId": event.event_id,
        "EventStatus": "Started" if event.started else "Scheduled",
        "EventType": spec.type,
        "ResourceType": "VirtualMachine",
        "Resources": resources,
        "NotBefore": shown,
        "Description": spec.description,
        "EventSource": spec.source,
        "DurationInSeconds": spec.duration,
    }
    for name in [name for name in doc if not carries(api_version, name)]:
        del doc[name]
    return doc


def served(events: list[EventState], api_version: str) -> list[EventState]:
    """The events ``api_version`` can carry: the others are not in its document."""
    return [e for e in events if carries(api_version, e.spec.type)]


def render_document(incarnation: int, events: list[EventState], api_version: str,
                    not_before: Callable[[float], int]) -> dict[str, Any]:
    return {
        "DocumentIncarnation": incarnation,
        "Events": [render_event(e, api_version,
                                None if e.not_before is None else not_before(e.not_before))
                   for e in served(events, api_version)],
    }


def big_document(document: dict[str, Any], megabytes: float) -> tuple[int, Iterator[bytes]]:
    """The document padded with made-up events for other VMs to ``megabytes`` (10^6 B):
    valid JSON, plausible content, far too big. Returns (length, chunks)."""
    target = int(megabytes * 1_000_000)
    head = json.dumps(document)[:-2]  # without the closing "]}"
    if not head.endswith("["):
        head += ", "
    tail = "]}"

    def filler(n: int) -> str:
        return json.dumps({
            "EventId": str(uuid.UUID(int=n + 1)).upper(), "EventStatus": "Scheduled",
            "EventType": "Freeze", "ResourceType": "VirtualMachine",
            "Resources": [f"padding_{n:08d}"], "NotBefore": "Mon, 11 Apr 2022 22:26:58 GMT",
            "Description": "Filler event of the emulator's 'big' fault.",
            "EventSource": "Platform", "DurationInSeconds": 5,
        })

    one = len(filler(0)) + 2  # every filler has the same length, plus ", "
    count = max(1, (target - len(head) - len(tail)) // one)
    length = len(head) + len(tail) + count * one - 2

    def chunks() -> Iterator[bytes]:
        yield head.encode()
        batch: list[str] = []
        for n in range(count):
            batch.append(filler(n) if n == count - 1 else filler(n) + ", ")
            if len(batch) == 256:
                yield "".join(batch).encode()
                batch = []
        yield ("".join(batch) + tail).encode()

    return length, chunks()


# JSON that a careless client might take for a document: each breaks one assumption.
_NOT_DOCUMENTS: tuple[Any, ...] = (
    {"Events": []},
    [1, 2, 3],
    {"DocumentIncarnation": "two", "Events": {"EventId": "not-a-list"}},
    {"error": "Service temporarily unavailable"},
)


def not_a_document(pick: int) -> bytes:
    return json.dumps(_NOT_DOCUMENTS[pick % len(_NOT_DOCUMENTS)]).encode()


NOT_JSON = (b"<html><head><title>502 Bad Gateway</title></head>"
            b"<body><h1>Bad Gateway</h1><p>The proxy got no answer.</p></body></html>")
