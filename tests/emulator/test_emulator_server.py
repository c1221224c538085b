"""Start, stop and come back: the endpoint disappears and reappears on the same port."""

from __future__ import annotations

import socket
import threading

import httpx
import pytest

from setui.emulator.clock import ManualClock
from setui.emulator.scenario import load_scenario
from setui.emulator.server import Emulator
from tests.support.emulator_helpers import MakeEmulator, get_document


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def test_stop_refuses_and_restart_serves_on_the_same_port(
        make_emulator: MakeEmulator, clock: ManualClock, client: httpx.Client) -> None:
    emulator = make_emulator()
    url, port = emulator.url, emulator.port
    assert url == f"http://127.0.0.1:{port}" and port > 0
    clock.advance(61)
    before = get_document(client, emulator)
    emulator.stop()
    assert _refused(port)
    with pytest.raises(httpx.ConnectError):
        get_document(client, emulator)
    emulator.stop()  # idempotent
    emulator.restart()
    assert (emulator.url, emulator.port) == (url, port)
    # The scenario went on; the same state gives the same incarnation.
    assert get_document(client, emulator) == before
    emulator.restart()  # also while running
    assert get_document(client, emulator) == before


def test_context_manager_and_start_twice(clock: ManualClock) -> None:
    with Emulator(load_scenario("quiet"), clock=clock) as emulator:
        assert emulator.running
        assert emulator.start() == emulator.url
        port = emulator.port
        with httpx.Client(trust_env=False) as http:
            assert get_document(http, emulator) == {"DocumentIncarnation": 1, "Events": []}
    assert not emulator.running
    assert _refused(port)


def test_a_taken_port_is_a_clear_error(make_emulator: MakeEmulator, clock: ManualClock) -> None:
    first = make_emulator()
    second = Emulator(load_scenario("quiet"), port=first.port, clock=clock)
    with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{first.port}"):
        second.start()
    assert not second.running


def test_speed_must_be_positive() -> None:
    with pytest.raises(ValueError, match="speed"):
        Emulator(load_scenario("quiet"), speed=0)


def test_concurrent_clients_are_all_recorded(make_emulator: MakeEmulator) -> None:
    emulator = make_emulator()
    failures: list[BaseException] = []

    def poll() -> None:
        try:
            with httpx.Client(trust_env=False, timeout=5) as http:
                for _ in range(10):
                    assert get_document(http, emulator)["DocumentIncarnation"] == 1
        except BaseException as exc:  # reported in the main thread
            failures.append(exc)

    threads = [threading.Thread(target=poll) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert len(emulator.requests) == 50


def test_a_request_is_dated_when_it_arrives_not_when_the_connection_waited(
        make_emulator: MakeEmulator, clock: ManualClock) -> None:
    emulator = make_emulator()
    headers = {"Metadata": "true"}
    url = f"{emulator.url}/metadata/scheduledevents?api-version=2020-07-01"
    # One kept-alive connection: the server is already waiting for its next request
    # while the clock moves on.
    with httpx.Client(trust_env=False) as client:
        assert client.get(url, headers=headers).status_code == 200
        first = emulator.requests[-1].time
        clock.advance(90)
        assert client.get(url, headers=headers).status_code == 200
    assert emulator.requests[-1].time == first + 90
