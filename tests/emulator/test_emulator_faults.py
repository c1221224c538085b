"""Every fault breaks the answer the way it says, and repeatably with a seed."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import pytest

from setui.emulator.clock import ManualClock
from setui.emulator.faults import Faults, parse_faults
from setui.emulator.server import Emulator
from tests.support.emulator_helpers import (
    EVENTS,
    HEADERS,
    LIVE_MIGRATION_ID,
    PARAMS,
    MakeEmulator,
    approve,
)


def _get(http: httpx.Client, url: str, **kwargs: object) -> httpx.Response:
    return http.get(url + EVENTS, headers=HEADERS, params=PARAMS, **kwargs)  # type: ignore[arg-type]


def _is_document(body: object) -> bool:
    return (isinstance(body, dict) and isinstance(body.get("DocumentIncarnation"), int)
            and isinstance(body.get("Events"), list))


def _raw_get(port: int, timeout: float = 5) -> tuple[bytes, bytes]:
    """(head, body) of one GET, reading until the server closes the connection."""
    request = (f"GET {EVENTS}?api-version=2020-07-01 HTTP/1.1\r\nHost: x\r\nMetadata: true\r\n"
               "Connection: close\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return head, body


def test_parse_faults_reads_every_key() -> None:
    faults = parse_faults(" first-delay=2, 500=0.1,429=0.2 ,503=0.05,410=0.05,400=0.01,404=0.01,"
                          "retry-after=3,slow=0.5,notjson=0.1,notdoc=0.1,truncate=0.1,"
                          "big=2,trickle=0.01,skew=-30,hang=0.05,approve-500=0.5,seed=7,"
                          "idle-close=4,idle-drop=5,compute-503=1")
    assert faults == Faults(
        first_delay=2, statuses={500: 0.1, 429: 0.2, 503: 0.05, 410: 0.05, 400: 0.01, 404: 0.01},
        approve_statuses={500: 0.5}, compute_statuses={503: 1}, notjson=0.1, notdoc=0.1,
        truncate=0.1, hang=0.05, retry_after=3, slow=0.5, big_mb=2, trickle=0.01, skew=-30,
        seed=7, idle_close=4, idle_drop=5)
    assert parse_faults("") == Faults()
    assert parse_faults(faults.describe()) == faults


@pytest.mark.parametrize(("spec", "needle"), [
    ("500", "key=value"),
    ("500=", "key=value"),
    ("boom=1", "unknown fault"),
    ("500=lots", "expected a number"),
    ("500=1.5", "probability"),
    ("418=0.5", "cannot inject status 418"),
    ("500=0.7,429=0.7", "at most 1"),
    ("slow=-1", "0 or more"),
    ("seed=x", "whole number"),
    ("approve-x=1", "approve-CODE"),
    ("compute-x=1", "compute-CODE"),
    ("compute-418=1", "cannot inject status 418"),
    ("skew=nan", "finite"),
    ("idle-close=-1", "idle-close: must be 0 or more"),
    ("idle-drop=inf", "idle-drop: must be 0 or more"),
])
def test_parse_faults_explains_bad_specs(spec: str, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        parse_faults(spec)


@pytest.mark.parametrize("code", [400, 404, 410, 429, 500, 503])
def test_status_faults(make_emulator: MakeEmulator, client: httpx.Client, code: int) -> None:
    emulator = make_emulator(faults=parse_faults(f"{code}=1,retry-after=7"))
    response = _get(client, emulator.url)
    assert response.status_code == code
    assert "error" in response.json()
    assert response.headers.get("retry-after") == ("7" if code in (429, 503) else None)
    # Only the events GET is broken: the VM name still answers.
    name = client.get(emulator.url + "/metadata/instance/compute/name", headers=HEADERS,
                      params={"api-version": "2021-02-01", "format": "text"})
    assert name.status_code == 200


def test_compute_faults_break_the_vms_name_until_they_change(
        make_emulator: MakeEmulator, client: httpx.Client) -> None:
    emulator = make_emulator(faults=parse_faults("compute-503=1"))
    params = {"api-version": "2021-02-01", "format": "text"}
    name = client.get(emulator.url + "/metadata/instance/compute/name", headers=HEADERS,
                      params=params)
    whole = client.get(emulator.url + "/metadata/instance/compute", headers=HEADERS,
                       params={"api-version": "2021-02-01"})
    assert (name.status_code, whole.status_code) == (503, 503)
    assert _get(client, emulator.url).status_code == 200  # the events are not touched
    emulator.set_faults(None)
    healed = client.get(emulator.url + "/metadata/instance/compute/name", headers=HEADERS,
                        params=params)
    assert (healed.status_code, healed.text) == (200, emulator.vm_name)


def test_no_retry_after_unless_asked(make_emulator: MakeEmulator, client: httpx.Client) -> None:
    emulator = make_emulator(faults=parse_faults("429=1"))
    assert "retry-after" not in _get(client, emulator.url).headers


def test_shares_are_repeatable_with_a_seed(make_emulator: MakeEmulator,
                                           client: httpx.Client) -> None:
    spec = parse_faults("500=0.3,429=0.2,notjson=0.1,seed=42")
    runs = []
    for _ in range(2):
        emulator = make_emulator(faults=spec)
        runs.append([_get(client, emulator.url).status_code for _ in range(40)])
    assert runs[0] == runs[1]
    assert {200, 429, 500} <= set(runs[0])
    assert 8 <= runs[0].count(500) <= 20


def test_set_faults_at_runtime(make_emulator: MakeEmulator, client: httpx.Client) -> None:
    emulator = make_emulator()
    assert _get(client, emulator.url).status_code == 200
    emulator.set_faults(Faults(statuses={503: 1.0}))
    assert _get(client, emulator.url).status_code == 503
    emulator.set_faults(None)
    assert _get(client, emulator.url).status_code == 200


def test_first_delay_holds_only_the_first_answer(make_emulator: MakeEmulator,
                                                 client: httpx.Client) -> None:
    emulator = make_emulator(faults=Faults(first_delay=1.5))
    began = time.monotonic()
    assert _get(client, emulator.url).status_code == 200
    assert time.monotonic() - began >= 1.5
    # The second is not held: a held answer takes the whole delay.
    began = time.monotonic()
    assert _get(client, emulator.url).status_code == 200
    assert time.monotonic() - began < 1.5


def test_slow_delays_every_answer(make_emulator: MakeEmulator, client: httpx.Client) -> None:
    emulator = make_emulator(faults=Faults(slow=0.15))
    for _ in range(2):
        began = time.monotonic()
        _get(client, emulator.url)
        assert time.monotonic() - began >= 0.15


def test_notjson(make_emulator: MakeEmulator, client: httpx.Client) -> None:
    emulator = make_emulator(faults=parse_faults("notjson=1"))
    response = _get(client, emulator.url)
    assert response.status_code == 200
    with pytest.raises(ValueError):
        json.loads(response.content)


def test_notdoc(make_emulator: MakeEmulator, client: httpx.Client) -> None:
    emulator = make_emulator(faults=parse_faults("notdoc=1,seed=1"))
    bodies = [_get(client, emulator.url) for _ in range(8)]
    assert all(b.status_code == 200 for b in bodies)
    parsed = [b.json() for b in bodies]
    assert not any(_is_document(body) for body in parsed)
    assert len({json.dumps(body) for body in parsed}) > 1


def test_truncate_closes_mid_body(make_emulator: MakeEmulator, client: httpx.Client) -> None:
    emulator = make_emulator(faults=parse_faults("truncate=1"))
    head, body = _raw_get(emulator.port)
    promised = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
    assert 0 < len(body) < promised
    with pytest.raises(httpx.RemoteProtocolError):
        _get(client, emulator.url)


def test_big_is_valid_json_of_the_size_asked(make_emulator: MakeEmulator,
                                             clock: ManualClock) -> None:
    emulator = make_emulator(faults=parse_faults("big=1.5"))
    clock.advance(61)
    head, body = _raw_get(emulator.port)
    assert int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0]) == len(body)
    assert 1_450_000 <= len(body) <= 1_500_000
    document = json.loads(body)
    assert _is_document(document)
    assert document["Events"][0]["EventId"] == LIVE_MIGRATION_ID
    assert len(document["Events"]) > 1000


def test_trickle_sends_one_byte_at_a_time(make_emulator: MakeEmulator,
                                          client: httpx.Client) -> None:
    emulator = make_emulator(faults=Faults(trickle=0.005))
    began = time.monotonic()
    response = _get(client, emulator.url)
    elapsed = time.monotonic() - began
    assert response.json() == {"DocumentIncarnation": 1, "Events": []}
    assert elapsed >= 0.005 * len(response.content) * 0.9


def test_hang_never_answers_and_stop_does_not_wait_for_it(make_emulator: MakeEmulator,
                                                          client: httpx.Client) -> None:
    emulator = make_emulator(faults=parse_faults("hang=1"))
    with pytest.raises(httpx.ReadTimeout):
        _get(client, emulator.url, timeout=0.3)
    assert emulator.requests[-1].path == EVENTS  # it was received, just not answered
    sock = socket.create_connection(("127.0.0.1", emulator.port))
    sock.sendall(f"GET {EVENTS}?api-version=2020-07-01 HTTP/1.1\r\nMetadata: true\r\n\r\n"
                 .encode())
    _stops(emulator)  # the request it holds would never be answered
    sock.settimeout(30)
    try:
        answer = sock.recv(100)
    except ConnectionResetError:  # closed with the request still unread
        answer = b""
    finally:
        sock.close()
    assert answer == b""  # closed without an answer


def _keep_alive_get(sock: socket.socket) -> bytes:
    """One GET on a kept-alive connection: the answer's bytes, or b"" if it was closed."""
    sock.sendall(f"GET {EVENTS}?api-version=2020-07-01 HTTP/1.1\r\nHost: x\r\n"
                 "Metadata: true\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    length = int(data.split(b"Content-Length: ")[1].split(b"\r\n")[0])
    while len(data.partition(b"\r\n\r\n")[2]) < length:
        data += sock.recv(65536)
    return data


def test_idle_close_closes_a_kept_alive_connection(make_emulator: MakeEmulator) -> None:
    emulator = make_emulator(faults=parse_faults("idle-close=0.2"))
    with socket.create_connection(("127.0.0.1", emulator.port), timeout=30) as sock:
        assert _keep_alive_get(sock).startswith(b"HTTP/1.1 200 ")
        assert _keep_alive_get(sock).startswith(b"HTTP/1.1 200 ")  # not idle yet
        began = time.monotonic()
        assert sock.recv(100) == b""  # closed by the server, unasked, not a timeout
        assert time.monotonic() - began >= 0.15  # but only once idle


def test_idle_drop_drops_a_request_after_the_idle_time(make_emulator: MakeEmulator) -> None:
    emulator = make_emulator(faults=parse_faults("idle-drop=0.2"))
    with socket.create_connection(("127.0.0.1", emulator.port), timeout=3) as sock:
        assert _keep_alive_get(sock).startswith(b"HTTP/1.1 200 ")
        assert _keep_alive_get(sock).startswith(b"HTTP/1.1 200 ")
        time.sleep(0.3)
        assert _keep_alive_get(sock) == b""  # read, recorded, never answered
    assert len(emulator.requests) == 3


def _stops(emulator: Emulator) -> None:
    """stop() returns while a connection is still held: no deadline is this long."""
    stopping = threading.Thread(target=emulator.stop, daemon=True)
    stopping.start()
    stopping.join(timeout=60)
    assert not stopping.is_alive(), "stop() waited for a connection that never ends"


def test_stop_does_not_wait_for_a_trickle(make_emulator: MakeEmulator) -> None:
    emulator = make_emulator(faults=Faults(trickle=60.0))  # the body would take an hour
    with socket.create_connection(("127.0.0.1", emulator.port), timeout=30) as sock:
        sock.sendall(f"GET {EVENTS}?api-version=2020-07-01 HTTP/1.1\r\nMetadata: true\r\n\r\n"
                     .encode())
        assert sock.recv(100).startswith(b"HTTP/1.1 200 ")  # the head, then a byte a minute
        _stops(emulator)


def test_approve_faults(make_emulator: MakeEmulator, clock: ManualClock,
                        client: httpx.Client) -> None:
    emulator = make_emulator(faults=parse_faults("approve-500=1"))
    clock.advance(61)
    assert approve(client, emulator, LIVE_MIGRATION_ID).status_code == 500
    clock.advance(5)
    assert _get(client, emulator.url).json()["Events"][0]["EventStatus"] == "Scheduled"
