"""The emulator speaks the documented protocol: headers, status codes, field sets."""

from __future__ import annotations

import json
import socket

import httpx
import pytest

from setui.emulator.clock import ManualClock
from setui.emulator.documents import API_VERSIONS
from tests.support.emulator_helpers import (
    EVENTS,
    HEADERS,
    LIVE_MIGRATION_ID,
    PARAMS,
    MakeEmulator,
    approve,
    get_document,
)

NAME = "/metadata/instance/compute/name"


def test_document_headers_and_shape(make_emulator: MakeEmulator, clock: ManualClock,
                                    client: httpx.Client) -> None:
    emulator = make_emulator()
    response = client.get(emulator.url + EVENTS, headers=HEADERS, params=PARAMS)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json; charset=utf-8"
    assert response.headers["date"] == "Mon, 11 Apr 2022 22:00:00 GMT"
    assert "etag" not in response.headers
    assert response.json() == {"DocumentIncarnation": 1, "Events": []}
    clock.advance(61)
    event = get_document(client, emulator)["Events"][0]
    assert list(event) == ["EventId", "EventStatus", "EventType", "ResourceType", "Resources",
                           "NotBefore", "Description", "EventSource", "DurationInSeconds"]
    assert event["NotBefore"] == "Mon, 11 Apr 2022 22:16:00 GMT"


@pytest.mark.parametrize(("headers", "params", "needle", "newest"), [
    ({}, PARAMS, "metadata header", False),
    ({"Metadata": "false"}, PARAMS, "metadata header", False),
    (HEADERS, {}, "api-version was not specified", True),
    (HEADERS, {"api-version": ""}, "api-version was not specified", True),
    (HEADERS, {"api-version": "2021-01-01"}, "api-version is invalid", True),
    (HEADERS, {"api-version": "latest"}, "api-version is invalid", True),
    (HEADERS, [("api-version", "2020-07-01"), ("api-version", "2020-07-01")], "Duplicate",
     False),
    ({**HEADERS, "X-Forwarded-For": "10.0.0.4"}, PARAMS, "X-Forwarded-For", False),
], ids=["no-header", "header-false", "no-version", "empty-version", "unknown-version",
        "latest", "duplicate-param", "forwarded"])
def test_bad_requests_get_400_with_a_reason(make_emulator: MakeEmulator, client: httpx.Client,
                                            headers: dict[str, str], params: object,
                                            needle: str, newest: bool) -> None:
    emulator = make_emulator()
    response = client.get(emulator.url + EVENTS, headers=headers, params=params)  # type: ignore[arg-type]
    assert response.status_code == 400
    body = response.json()
    assert needle in body["error"]
    if newest:
        assert body["newest-versions"] == ["2020-07-01", "2019-08-01", "2019-04-01"]
    else:
        assert "newest-versions" not in body


@pytest.mark.parametrize("body", [
    b"not json",
    b"[]",
    b'{"StartRequest": [{"EventId": "x"}]}',
    b'{"StartRequests": []}',
    b'{"StartRequests": {"EventId": "x"}}',
    b'{"StartRequests": [{"Id": "x"}]}',
    b'{"StartRequests": [{"EventId": 7}]}',
    b'{"StartRequests": [{"EventId": ""}]}',
    b"\xff\xfe",
])
def test_malformed_approval_bodies_get_400(make_emulator: MakeEmulator, clock: ManualClock,
                                           client: httpx.Client, body: bytes) -> None:
    emulator = make_emulator()
    clock.advance(61)
    response = client.post(emulator.url + EVENTS, headers=HEADERS, params=PARAMS, content=body)
    assert response.status_code == 400
    assert "StartRequests" in response.json()["error"] or "JSON" in response.json()["error"]
    clock.advance(1)
    assert get_document(client, emulator)["Events"][0]["EventStatus"] == "Scheduled"


def test_approval_needs_the_header_too(make_emulator: MakeEmulator, clock: ManualClock,
                                       client: httpx.Client) -> None:
    emulator = make_emulator()
    clock.advance(61)
    body = {"StartRequests": [{"EventId": LIVE_MIGRATION_ID}]}
    response = client.post(emulator.url + EVENTS, params=PARAMS, json=body)
    assert response.status_code == 400


def test_unknown_event_id_is_rejected_and_nothing_is_approved(
        make_emulator: MakeEmulator, clock: ManualClock, client: httpx.Client) -> None:
    emulator = make_emulator()
    assert approve(client, emulator, LIVE_MIGRATION_ID).status_code == 400  # not announced yet
    clock.advance(61)
    response = approve(client, emulator, LIVE_MIGRATION_ID, "00000000-0000-0000-0000-000000000000")
    assert response.status_code == 400
    assert "00000000-0000-0000-0000-000000000000" in response.json()["error"]
    clock.advance(5)
    assert get_document(client, emulator)["Events"][0]["EventStatus"] == "Scheduled"


def test_approval_answers_200_with_an_empty_body(make_emulator: MakeEmulator, clock: ManualClock,
                                                 client: httpx.Client) -> None:
    emulator = make_emulator()
    clock.advance(61)
    response = approve(client, emulator, LIVE_MIGRATION_ID.lower())
    assert (response.status_code, response.content) == (200, b"")
    # The 2017 preview sent the incarnation along (as a string): accepted.
    body = {"DocumentIncarnation": "2", "StartRequests": [{"EventId": LIVE_MIGRATION_ID}]}
    response = client.post(emulator.url + EVENTS, headers=HEADERS,
                           params={"api-version": "2017-03-01"}, json=body)
    assert response.status_code == 200


def test_unknown_paths_get_404(make_emulator: MakeEmulator, client: httpx.Client) -> None:
    emulator = make_emulator()
    for path in ("/", "/metadata", "/metadata/scheduledevent", "/metadata/instance"):
        response = client.get(emulator.url + path, headers=HEADERS, params=PARAMS)
        assert response.status_code == 404, path


@pytest.mark.parametrize(("method", "path", "allow"), [
    ("PUT", EVENTS, "GET, POST"),
    ("DELETE", EVENTS, "GET, POST"),
    ("PATCH", EVENTS, "GET, POST"),
    ("POST", NAME, "GET"),
])
def test_other_methods_get_405(make_emulator: MakeEmulator, client: httpx.Client, method: str,
                               path: str, allow: str) -> None:
    emulator = make_emulator()
    response = client.request(method, emulator.url + path, headers=HEADERS, params=PARAMS)
    assert response.status_code == 405
    assert response.headers["allow"] == allow


def test_compute_name(make_emulator: MakeEmulator, client: httpx.Client) -> None:
    emulator = make_emulator()
    url = emulator.url + NAME
    text = client.get(url, headers=HEADERS, params={"api-version": "2021-02-01",
                                                   "format": "text"})
    assert (text.status_code, text.text) == (200, "WestNO_0")
    assert text.headers["content-type"].startswith("text/plain")
    as_json = client.get(url, headers=HEADERS, params={"api-version": "2021-02-01",
                                                      "format": "json"})
    assert as_json.json() == "WestNO_0"
    assert client.get(url, params={"api-version": "2021-02-01"}).status_code == 400
    assert client.get(url, headers=HEADERS).status_code == 400
    other = make_emulator(vm_name="my-own-vm")
    assert client.get(other.url + NAME, headers=HEADERS,
                      params={"api-version": "2017-08-01"}).text == "my-own-vm"


_FIELDS_2020 = {"EventId", "EventStatus", "EventType", "ResourceType", "Resources", "NotBefore",
                "Description", "EventSource", "DurationInSeconds"}


@pytest.mark.parametrize(("version", "missing"), [
    ("2017-03-01", {"Description", "EventSource", "DurationInSeconds"}),
    ("2017-08-01", {"Description", "EventSource", "DurationInSeconds"}),
    ("2017-11-01", {"Description", "EventSource", "DurationInSeconds"}),
    ("2019-01-01", {"Description", "EventSource", "DurationInSeconds"}),
    ("2019-04-01", {"EventSource", "DurationInSeconds"}),
    ("2019-08-01", {"DurationInSeconds"}),
    ("2020-07-01", set()),
])
def test_older_versions_get_their_own_field_set(make_emulator: MakeEmulator, clock: ManualClock,
                                                client: httpx.Client, version: str,
                                                missing: set[str]) -> None:
    emulator = make_emulator()
    clock.advance(61)
    event = get_document(client, emulator, version)["Events"][0]
    assert set(event) == _FIELDS_2020 - missing
    if version == "2017-03-01":
        assert event["NotBefore"] == "2022-04-11T22:16:00Z"
        assert event["Resources"] == ["_WestNO_0", "_WestNO_1"]
    else:
        assert event["NotBefore"] == "Mon, 11 Apr 2022 22:16:00 GMT"
        assert event["Resources"] == ["WestNO_0", "WestNO_1"]
    assert len(API_VERSIONS) == 7


def test_etag_and_304(make_emulator: MakeEmulator, clock: ManualClock,
                      client: httpx.Client) -> None:
    emulator = make_emulator(etag=True)
    first = client.get(emulator.url + EVENTS, headers=HEADERS, params=PARAMS)
    assert first.headers["etag"] == '"1"'
    again = client.get(emulator.url + EVENTS, headers={**HEADERS, "If-None-Match": '"1"'},
                       params=PARAMS)
    assert (again.status_code, again.content, again.headers["etag"]) == (304, b"", '"1"')
    clock.advance(61)
    changed = client.get(emulator.url + EVENTS, headers={**HEADERS, "If-None-Match": '"1"'},
                         params=PARAMS)
    assert changed.status_code == 200
    assert changed.headers["etag"] == '"2"'
    assert changed.json()["DocumentIncarnation"] == 2
    weak = client.get(emulator.url + EVENTS, headers={**HEADERS, "If-None-Match": 'W/"2"'},
                      params=PARAMS)
    assert weak.status_code == 304


def test_no_etag_unless_asked(make_emulator: MakeEmulator, client: httpx.Client) -> None:
    emulator = make_emulator()
    response = client.get(emulator.url + EVENTS, headers={**HEADERS, "If-None-Match": '"1"'},
                          params=PARAMS)
    assert response.status_code == 200
    assert "etag" not in response.headers


def test_requests_are_recorded(make_emulator: MakeEmulator, clock: ManualClock,
                               client: httpx.Client) -> None:
    emulator = make_emulator()
    clock.advance(61)
    get_document(client, emulator)
    approve(client, emulator, LIVE_MIGRATION_ID)
    get_request, post_request = emulator.requests
    assert (get_request.method, get_request.path) == ("GET", EVENTS)
    assert get_request.query == {"api-version": "2020-07-01"}
    assert get_request.headers["metadata"] == "true"
    assert get_request.time == clock()
    assert post_request.method == "POST"
    assert json.loads(post_request.body) == {"StartRequests": [{"EventId": LIVE_MIGRATION_ID}]}


@pytest.mark.parametrize("request_bytes", [
    b"HELLO THERE\r\n\r\n",
    # Request targets urlsplit refuses (an unclosed IPv6 bracket): once dropped unanswered.
    b"GET http://[ HTTP/1.1\r\nHost: x\r\nMetadata: true\r\n\r\n",
    b"GET http://[::1/metadata/scheduledevents?api-version=2020-07-01 HTTP/1.1\r\n"
    b"Host: x\r\nMetadata: true\r\n\r\n",
])
def test_garbage_gets_400_and_a_closed_connection(make_emulator: MakeEmulator,
                                                  client: httpx.Client,
                                                  request_bytes: bytes) -> None:
    emulator = make_emulator()
    with socket.create_connection(("127.0.0.1", emulator.port), timeout=5) as sock:
        sock.sendall(request_bytes)
        received = b""
        while chunk := sock.recv(4096):
            received += chunk
    assert received.startswith(b"HTTP/1.1 400 "), received
    assert b"Connection: close" in received
    assert get_document(client, emulator)["DocumentIncarnation"] == 1  # still serving


def test_keep_alive_serves_several_requests_on_one_connection(
        make_emulator: MakeEmulator) -> None:
    emulator = make_emulator()
    request = (f"GET {EVENTS}?api-version=2020-07-01 HTTP/1.1\r\nHost: x\r\n"
               "Metadata: true\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", emulator.port), timeout=5) as sock:
        for _ in range(3):
            sock.sendall(request)
            head = b""
            while b"\r\n\r\n" not in head:
                head += sock.recv(1)
            length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
            body = b""
            while len(body) < length:
                body += sock.recv(length - len(body))
            assert json.loads(body)["DocumentIncarnation"] == 1


def test_an_internal_error_is_answered_500_not_dropped(make_emulator: MakeEmulator,
                                                       client: httpx.Client,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    logged: list[str] = []
    emulator = make_emulator(log=logged.append)

    def broken(request: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(emulator._service, "reply", broken)
    response = client.get(emulator.url + EVENTS, headers=HEADERS, params=PARAMS)
    assert response.status_code == 500
    assert response.text == "internal error in the emulator: RuntimeError\n"
    assert any("internal error" in line and "a bug" in line for line in logged)
