"""A metadata service on loopback that does exactly what the test says, when it says it.

The emulator plays scenarios and draws its faults by chance; some cases need one
exact sequence instead: "answer the first POST 503 and, from that moment, serve a
changed document", "time the first POST out, answer the second 400". ``ScriptedImds``
serves ``document`` to every GET of the events, this VM's name to the compute metadata,
and answers each POST with the next step of its script (200 once the script is used
up); GETs of the events have a script of their own (the document once it is used up).
A step may replace the document as the request arrives, before anything is answered,
so a client's next read is certain to see the change; ``Refuse`` answers and then stops
listening, so that every later connection is refused. It runs on threads of its own,
so a test can drive it while a real ``setui`` process talks to it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

__all__ = ["Answer", "Drop", "Hang", "Recorded", "Refuse", "ScriptedImds", "document",
           "event", "scripted"]

EVENTS = "/metadata/scheduledevents"
FAR = "Mon, 01 Jan 2035 00:00:00 GMT"


def event(event_id: str, resources: list[str], *, kind: str = "Freeze",
          status: str = "Scheduled", not_before: str = FAR) -> dict[str, Any]:
    """One event as the service writes it."""
    return {"EventId": event_id, "EventType": kind, "ResourceType": "VirtualMachine",
            "Resources": resources, "EventStatus": status,
            "NotBefore": not_before if status == "Scheduled" else "",
            "Description": "maintenance", "EventSource": "Platform", "DurationInSeconds": 5}


def document(incarnation: int, *events: dict[str, Any]) -> dict[str, Any]:
    return {"DocumentIncarnation": incarnation, "Events": list(events)}


@dataclass(frozen=True)
class Answer:
    """Answer the POST with ``status`` (and a Retry-After, if given)."""

    status: int
    retry_after: float | None = None
    then: dict[str, Any] | None = None  # the document served from this POST on


@dataclass(frozen=True)
class Hang:
    """Read the POST whole and never answer it: the client times out, and the request
    may well have arrived (it did)."""

    then: dict[str, Any] | None = None


@dataclass(frozen=True)
class Drop:
    """Read the POST whole, then close the connection without a word."""

    then: dict[str, Any] | None = None


@dataclass(frozen=True)
class Refuse:
    """Answer as ``Answer(status)`` would, close the connection and stop listening: from
    then on every connection is refused, as when the service went down."""

    status: int = 200
    retry_after: float | None = None
    then: dict[str, Any] | None = None


Step = Answer | Hang | Drop | Refuse


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    body: bytes


@dataclass
class ScriptedImds:
    """See the module docstring; ``url`` once started."""

    document: dict[str, Any]
    vm_name: str = "web-0"
    script: list[Step] = field(default_factory=list)
    get_script: list[Step] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="scripted-imds")
        self._thread.start()

    def serve(self, document: dict[str, Any]) -> None:
        with self._lock:
            self.document = document

    def on_posts(self, *steps: Step) -> None:
        """What the next POSTs get, in order."""
        with self._lock:
            self.script.extend(steps)

    def on_gets(self, *steps: Step) -> None:
        """What the next GETs of the events get, in order (``Answer(200)``: the document)."""
        with self._lock:
            self.get_script.extend(steps)

    def posts(self) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.method == "POST"]

    def gets(self) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.method == "GET" and r.path == EVENTS]

    def close(self) -> None:
        self._closing.set()  # hanging answers end: their connections close
        self._server.shutdown()
        self._server.server_close()

    # -- the handler's side ------------------------------------------------------------------
    def _record(self, request: Recorded) -> None:
        with self._lock:
            self.requests.append(request)

    def _current(self) -> bytes:
        with self._lock:
            return json.dumps(self.document).encode()

    def _next_step(self, script: list[Step]) -> Step:
        with self._lock:
            step = script.pop(0) if script else Answer(200)
            if step.then is not None:
                self.document = step.then
        if isinstance(step, Refuse):  # nothing new is accepted from here on
            self._server.shutdown()
            self._server.socket.close()
        return step


def _handler(imds: ScriptedImds) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            imds._record(Recorded("GET", path, b""))
            if self.headers.get("Metadata") != "true":
                self._answer(400, b'{"error": "Bad request. Required metadata header not '
                                  b'specified"}')
            elif path == EVENTS:
                self._reply(imds._next_step(imds.get_script), imds._current())
            elif path == "/metadata/instance/compute/name":
                self._answer(200, imds.vm_name.encode(), "text/plain")
            elif path == "/metadata/instance/compute":
                self._answer(200, json.dumps({"name": imds.vm_name}).encode())
            else:
                self._answer(404, b'{"error": "Not found"}')

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            path = self.path.split("?", 1)[0]
            imds._record(Recorded("POST", path, body))
            self._reply(imds._next_step(imds.script), b"")

        def _reply(self, step: Step, ok: bytes) -> None:
            if isinstance(step, Hang):
                imds._closing.wait()
            if isinstance(step, (Hang, Drop)):
                self.close_connection = True
                return
            if isinstance(step, Refuse):
                self.close_connection = True  # and the listener is closed already
            headers = {} if step.retry_after is None else {
                "Retry-After": f"{step.retry_after:g}"}
            said = ok if step.status == 200 else b'{"error": "scripted answer"}'
            self._answer(step.status, said, **headers)

        def _answer(self, status: int, body: bytes, kind: str = "application/json",
                    **headers: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            for name, value in headers.items():
                self.send_header(name.replace("_", "-"), value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@pytest.fixture
def scripted() -> Iterator[ScriptedImds]:
    """A ScriptedImds serving an empty document; the test sets what it serves."""
    imds = ScriptedImds(document(1))
    yield imds
    imds.close()
