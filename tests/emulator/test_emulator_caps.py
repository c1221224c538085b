"""The emulator under a hostile client: headers that never finish, bodies that pile up."""

from __future__ import annotations

import socket

import httpx

from setui.emulator.scenario import load_scenario
from setui.emulator.server import Emulator, _size


def test_headers_that_never_finish_get_408_and_the_connection_closes() -> None:
    with Emulator(load_scenario("quiet"), head_timeout=0.5) as emulator:
        with socket.create_connection((emulator.host, emulator.port), timeout=30) as sock:
            sock.sendall(b"GET /metadata/scheduledevents HTTP/1.1\r\nHost: x\r\n")
            answer = b""
            while chunk := sock.recv(4096):  # the server closes after answering
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 408 ")
        assert b"did not arrive within 0.5 s" in answer
        assert emulator.requests == []


def test_the_request_log_is_capped_in_bytes(client: httpx.Client) -> None:
    cap = 300_000
    with Emulator(load_scenario("quiet"), max_recorded_bytes=cap) as emulator:
        url = f"{emulator.url}/metadata/scheduledevents?api-version=2020-07-01"
        for number in range(20):
            client.post(url, headers={"Metadata": "true", "X-Number": str(number)},
                        content=b"x" * 60_000)
        kept = emulator.requests
        assert 0 < len(kept) < 20
        assert sum(_size(r) for r in kept) <= cap
        assert kept[-1].headers["x-number"] == "19"  # the newest are the ones kept
