"""What the emulated metadata service answers: validation like IMDS, the events
document, approvals, and the faults that replace a good answer with a bad one.

Everything here is synchronous and guarded by one lock; the server only adds the
waiting and the bytes. Time comes from the injected clock (POSIX seconds): scenario
second ``s`` happens at ``epoch + s / speed``, and ``epoch`` is the clock's first whole
second at or after construction, so at speed 1 every NotBefore is exact.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from setui.core.textsafe import masked
from setui.emulator.documents import (
    API_VERSIONS,
    NEWEST_VERSIONS,
    NOT_JSON,
    big_document,
    http_date,
    not_a_document,
    render_document,
    served,
)
from setui.emulator.faults import Faults
from setui.emulator.scenario import Scenario
from setui.emulator.timeline import ScenarioPlayer
from setui.emulator.wire import RecordedRequest, Reply

__all__ = ["COMPUTE_FIELDS", "COMPUTE_PATH", "EVENTS_PATH", "NAME_PATH", "Service"]

EVENTS_PATH = "/metadata/scheduledevents"
COMPUTE_PATH = "/metadata/instance/compute"
NAME_PATH = f"{COMPUTE_PATH}/name"
# The VM's identity as IMDS compute metadata names it: the fields a fleet groups by, and
# the vmId that tells it from every other VM (what setui keys its claims and holds by).
COMPUTE_FIELDS = ("name", "vmId", "vmScaleSetName", "placementGroupId", "resourceGroupName",
                  "subscriptionId", "zone", "location")
_ALLOWED = {EVENTS_PATH: ("GET", "POST"), COMPUTE_PATH: ("GET",),
            **{f"{COMPUTE_PATH}/{name}": ("GET",) for name in COMPUTE_FIELDS}}
JSON_TYPE = "application/json; charset=utf-8"
TEXT_TYPE = "text/plain; charset=utf-8"
_FAULT_MESSAGES = {
    400: "Bad request.", 404: "Not found.", 410: "Gone: retry after some time.",
    429: "Too many requests: rate limit exceeded.", 500: "Internal server error: retry later.",
    503: "Service unavailable: retry later.",
}


class Service:
    def __init__(self, scenario: Scenario, *, clock: Callable[[], float], speed: float,
                 vm_name: str | None, faults: Faults | None, etag: bool,
                 log: Callable[[str], None] | None = None,
                 identity: dict[str, str] | None = None) -> None:
        if not (math.isfinite(speed) and speed > 0):
            raise ValueError(f"speed must be a positive number, got {speed}")
        if vm_name:
            scenario = scenario.renamed(vm_name)
        self.scenario = scenario
        self.clock = clock
        self.speed = speed
        self.vm_name = scenario.vm_name
        # The rest of the compute metadata (vmScaleSetName, zone...): "" when not given;
        # but a vmId only when given (an emulator without one: setui does not know it).
        given = identity or {}
        self.identity = {name: str(given.get(name) or "") for name in COMPUTE_FIELDS
                         if name != "name" and (name != "vmId" or given.get(name))}
        self.etag = etag
        self.log = log or (lambda line: None)
        self.epoch = float(math.ceil(clock()))
        self.timeline = ScenarioPlayer(scenario, self._displayed)
        self._lock = threading.RLock()
        self.faults = Faults()
        self._rng = self.faults.rng()
        self._enabled_at: float | None = None
        # A document served instead of the scenario's: one no scenario can produce (an
        # EventId listed twice, an event that turns into another under the same id).
        self._pinned: dict[str, Any] | None = None
        self.set_faults(faults)

    # -- time ---------------------------------------------------------------------------
    def scenario_time(self, now: float | None = None) -> float:
        return ((self.clock() if now is None else now) - self.epoch) * self.speed

    def real_time(self, scenario_seconds: float) -> float:
        """The emulator-clock POSIX time at which a scenario second happens."""
        return self.epoch + scenario_seconds / self.speed

    def _displayed(self, scenario_seconds: float) -> int:
        # Floor: the event starts at or after the second shown, never before it.
        return math.floor(self.real_time(scenario_seconds) + 1e-6)

    def _shown_not_before(self, scenario_seconds: float) -> int:
        return self._displayed(scenario_seconds) + round(self.faults.skew)

    # -- state ----------------------------------------------------------------------------
    def set_faults(self, faults: Faults | None) -> None:
        """New faults apply from the next request; ``first-delay`` counts afresh."""
        with self._lock:
            self.faults = faults or Faults()
            self._rng = self.faults.rng()
            self._enabled_at = None

    def pin_document(self, document: dict[str, Any] | None) -> None:
        """Serve ``document`` as it is (None: the scenario again); approvals of the
        events it lists are answered 200 and change nothing."""
        with self._lock:
            self._pinned = json.loads(json.dumps(document)) if document is not None else None

    def document(self, api_version: str = "2020-07-01", now: float | None = None
                 ) -> dict[str, Any]:
        with self._lock:
            if self._pinned is not None:
                pinned: dict[str, Any] = json.loads(json.dumps(self._pinned))
                return pinned
            t = self.scenario_time(now)
            return render_document(self.timeline.incarnation(t), self.timeline.state(t),
                                   api_version, self._shown_not_before)

    # -- answering ------------------------------------------------------------------------
    def delay_for(self, request: RecordedRequest) -> float:
        """Real seconds to wait before answering (``slow``, and the enabling delay)."""
        with self._lock:
            delay = self.faults.slow
            if request.method == "GET" and request.path == EVENTS_PATH \
                    and self.faults.first_delay > 0:
                if self._enabled_at is None:
                    self._enabled_at = time.monotonic() + self.faults.first_delay
                delay += max(0.0, self._enabled_at - time.monotonic())
            return delay

    def reply(self, request: RecordedRequest) -> Reply:
        with self._lock:
            reply = self._reply(request)
            reply.headers.insert(0, ("Date", http_date(self.clock() + self.faults.skew)))
            if self.faults.trickle and reply.status != 304:
                reply.trickle = self.faults.trickle
            target = request.path + ("?" + "&".join(f"{k}={v}" for k, v in request.query_pairs)
                                     if request.query_pairs else "")
            note = f" ({reply.note})" if reply.note else ""
            line = f"{request.method} {target} -> {'hang' if reply.hang else reply.status}{note}"
            # The request is input: no escape sequences from it reach the terminal.
            self.log(masked(line))
            return reply

    def _reply(self, request: RecordedRequest) -> Reply:
        allowed = _ALLOWED.get(request.path)
        if allowed is None:
            return _error(404, f"Not found: {request.path}")
        if request.method not in allowed:
            reply = _error(405, f"Method {request.method} not allowed on {request.path}")
            reply.headers.append(("Allow", ", ".join(allowed)))
            return reply
        problem = self._bad_request(request)
        if problem is not None:
            return problem
        if request.path.startswith(COMPUTE_PATH):
            code = self.faults.draw_compute(self._rng)
            if code is not None:
                reply = _error(code, _FAULT_MESSAGES[code])
                reply.note = "fault"
                return reply
            if request.path == NAME_PATH:
                return self._name(request)
            return self._compute(request)
        if request.method == "POST":
            return self._approve(request)
        return self._events(request)

    def _bad_request(self, request: RecordedRequest) -> Reply | None:
        if "x-forwarded-for" in request.headers:
            return _error(400, "Bad request. Requests with an X-Forwarded-For header are not "
                          "accepted: the metadata service must be reached without a proxy.")
        if request.headers.get("metadata", "").lower() != "true":
            return _error(400, "Bad request. Required metadata header not specified")
        names = [name for name, _ in request.query_pairs]
        duplicated = sorted({name for name in names if names.count(name) > 1})
        if duplicated:
            return _error(400, f"Bad request. Duplicate query parameter: {duplicated[0]}")
        version = request.query.get("api-version")
        if not version:
            return _error(400, "Bad request. api-version was not specified in the request. "
                          "For more information refer to aka.ms/azureimds",
                          newest=request.path == EVENTS_PATH)
        if request.path == EVENTS_PATH and version not in API_VERSIONS:
            return _error(400, "Bad request. api-version is invalid or was not specified in the "
                          "request. For more information refer to aka.ms/azureimds",
                          newest=True)
        return None

    def _name(self, request: RecordedRequest) -> Reply:
        fmt = request.query.get("format", "text")
        if fmt == "text":
            return Reply(200, [("Content-Type", TEXT_TYPE)], self.vm_name.encode())
        if fmt == "json":
            return Reply(200, [("Content-Type", JSON_TYPE)], json.dumps(self.vm_name).encode())
        return _error(400, f"Bad request. Unsupported format {fmt!r}: use text or json")

    def _compute(self, request: RecordedRequest) -> Reply:
        """The whole compute object as JSON, or one field (``.../compute/zone``) as text."""
        fields = {"name": self.vm_name, **self.identity}
        name = request.path[len(COMPUTE_PATH):].lstrip("/")
        if name and name not in fields:  # a vmId not given
            return _error(404, f"Not found: {request.path}")
        fmt = request.query.get("format", "json" if not name else "text")
        if not name:
            if fmt != "json":
                return _error(400, f"Bad request. Unsupported format {fmt!r}: use json")
            return Reply(200, [("Content-Type", JSON_TYPE)], json.dumps(fields).encode())
        if fmt == "text":
            return Reply(200, [("Content-Type", TEXT_TYPE)], fields[name].encode())
        if fmt == "json":
            return Reply(200, [("Content-Type", JSON_TYPE)], json.dumps(fields[name]).encode())
        return _error(400, f"Bad request. Unsupported format {fmt!r}: use text or json")

    def _events(self, request: RecordedRequest) -> Reply:
        fault = self.faults.draw_get(self._rng)
        if fault is not None:
            kind, code = fault
            if kind == "status":
                reply = _error(code, _FAULT_MESSAGES[code])
                if code in (429, 503) and self.faults.retry_after is not None:
                    reply.headers.append(("Retry-After", f"{self.faults.retry_after:g}"))
                reply.note = "fault"
                return reply
            if kind == "hang":
                return Reply(0, hang=True, note="fault")
            if kind == "notjson":
                return Reply(200, [("Content-Type", JSON_TYPE)], NOT_JSON, note="fault notjson")
            if kind == "notdoc":
                return Reply(200, [("Content-Type", JSON_TYPE)],
                             not_a_document(self._rng.randrange(1 << 16)), note="fault notdoc")
        version = request.query["api-version"]
        document = self.document(version)
        incarnation = document["DocumentIncarnation"]
        headers = [("Content-Type", JSON_TYPE)]
        if self.etag:
            tag = f'"{incarnation}"'
            headers.append(("ETag", tag))
            if _matches(request.headers.get("if-none-match", ""), tag):
                return Reply(304, headers, note=f"incarnation {incarnation}, not modified")
        note = f"incarnation {incarnation}, {len(document['Events'])} event(s)"
        if self.faults.big_mb > 0:
            length, chunks = big_document(document, self.faults.big_mb)
            reply = Reply(200, headers, chunks=chunks, length=length, note=note + ", big")
        else:
            reply = Reply(200, headers, json.dumps(document).encode(), note=note)
        if fault is not None and fault[0] == "truncate":
            reply.truncate = True
            reply.note += ", fault truncate"
        return reply

    def _approve(self, request: RecordedRequest) -> Reply:
        code = self.faults.draw_post(self._rng)
        if code is not None:
            reply = _error(code, _FAULT_MESSAGES[code])
            reply.note = "fault"
            return reply
        ids, problem = _start_requests(request.body)
        if problem:
            return _error(400, f"Bad request. {problem}")
        if self._pinned is not None:
            listed = {str(e.get("EventId", "")).lower() for e in self._pinned.get("Events", [])
                      if isinstance(e, dict)}
            unknown = [i for i in ids if i.lower() not in listed]
        else:
            # An event this version is not shown is not in its document: not approvable.
            t = self.scenario_time(request.time)
            shown = {e.event_id.lower()
                     for e in served(self.timeline.state(t), request.query["api-version"])}
            unknown = [i for i in ids if i.lower() not in shown] \
                or self.timeline.approve(ids, t)
        if unknown:
            return _error(400, f"Bad request. No such event in the current document: "
                          f"{', '.join(unknown)}")
        return Reply(200, note="approved " + ", ".join(ids))


def _start_requests(body: bytes) -> tuple[list[str], str]:
    """EventIds of an approval body, or a message saying what is wrong with it."""
    example = 'expected {"StartRequests": [{"EventId": "..."}]}'
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return [], f"The body is not JSON; {example}"
    if not isinstance(data, dict) or "StartRequests" not in data:
        return [], f"StartRequests is missing; {example}"
    requests = data["StartRequests"]
    if not isinstance(requests, list) or not requests:
        return [], f"StartRequests must be a non-empty list; {example}"
    ids: list[str] = []
    for item in requests:
        if not isinstance(item, dict) or not isinstance(item.get("EventId"), str) \
                or not item["EventId"]:
            return [], f"Every start request needs an EventId string; {example}"
        ids.append(item["EventId"])
    return ids, ""


def _matches(if_none_match: str, tag: str) -> bool:
    candidates = [c.strip().removeprefix("W/") for c in if_none_match.split(",")]
    return "*" in candidates or tag in candidates


def _error(status: int, message: str, *, newest: bool = False) -> Reply:
    body: dict[str, Any] = {"error": message}
    if newest:
        body["newest-versions"] = NEWEST_VERSIONS
    return Reply(status, [("Content-Type", JSON_TYPE)], json.dumps(body).encode(),
                 note=message if status >= 400 else "")
