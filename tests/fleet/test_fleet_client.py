"""The Prometheus client over real loopback HTTP: credentials sent as configured, and
every failure a state in words (refused, unreachable, not the API, too large)."""

from __future__ import annotations

import base64
import gc
import json
import threading
import time
import tracemalloc
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from setui.fleet import (
    QUERY,
    FleetWatcher,
    LinkState,
    PrometheusAuth,
    PrometheusClient,
    PrometheusError,
    check_credentials_safe,
    check_prometheus_url,
)
from tests.support.promtest import free_port

OK: dict[str, object] = {"status": "success", "data": {"resultType": "vector", "result": [
    {"metric": {"__name__": "setui_last_success_timestamp_seconds", "vm_name": "v"},
     "value": [1800000000.5, "1800000000"]}]}}


class Canned:
    """A loopback server answering every GET with (status, body); it keeps the requests."""

    def __init__(self, status: int, body: bytes, headers: dict[str, str] | None = None
                 ) -> None:
        self.status, self.body = status, body
        self.headers = headers or {}
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.release = threading.Event()  # cleared: each answer waits until it is set
        self.release.set()
        canned = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                canned.requests.append((self.path, dict(self.headers)))
                canned.release.wait(30)
                self.send_response(canned.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(canned.body)))
                for name, value in canned.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(canned.body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def canned() -> Iterator[list[Canned]]:
    made: list[Canned] = []
    yield made
    for server in made:
        server.stop()


def serve(canned: list[Canned], status: int, body: bytes | dict[str, object],
          headers: dict[str, str] | None = None) -> Canned:
    server = Canned(status, body if isinstance(body, bytes) else json.dumps(body).encode(),
                    headers)
    canned.append(server)
    return server


def test_one_instant_query_with_a_bearer_token(canned: list[Canned]) -> None:
    server = serve(canned, 200, OK)
    client = PrometheusClient(server.url + "/", PrometheusAuth(token="s3cret"))
    answer = client.query()
    client.close()
    assert answer.evaluated_at == 1800000000.5 and len(answer.result) == 1
    path, headers = server.requests[0]
    assert path.startswith("/api/v1/query?query=")
    assert headers["Authorization"] == "Bearer s3cret"
    assert "s3cret" not in repr(client.auth)
    from urllib.parse import parse_qs, urlsplit
    assert parse_qs(urlsplit(path).query)["query"] == [QUERY]


def test_basic_auth(canned: list[Canned]) -> None:
    server = serve(canned, 200, OK)
    client = PrometheusClient(server.url, PrometheusAuth(user="ops", password="pw"))
    client.query()
    client.close()
    expected = "Basic " + base64.b64encode(b"ops:pw").decode()
    assert server.requests[0][1]["Authorization"] == expected


@pytest.mark.parametrize(("status", "body", "kind", "words"), [
    (401, b"Unauthorized", "refused", "refused the credentials"),
    (403, b"{}", "refused", "HTTP 403"),
    (200, b"<html>a login page</html>", "bad answer", "not the query API's JSON"),
    (502, b"Bad gateway", "error", "HTTP 502"),
    (400, json.dumps({"status": "error", "errorType": "bad_data",
                      "error": "parse error \x1b[31m"}).encode(), "error", "bad_data"),
    (200, json.dumps({"status": "success", "data": {"resultType": "matrix",
                                                     "result": []}}).encode(),
     "bad answer", "not an instant vector"),
])
def test_failures_in_words(canned: list[Canned], status: int, body: bytes, kind: str,
                           words: str) -> None:
    server = serve(canned, status, body)
    client = PrometheusClient(server.url)
    with pytest.raises(PrometheusError) as caught:
        client.query()
    client.close()
    assert caught.value.kind == kind
    assert words in str(caught.value)
    assert "\x1b" not in str(caught.value)


def test_a_body_over_the_limit_is_refused(canned: list[Canned]) -> None:
    server = serve(canned, 200, OK)
    client = PrometheusClient(server.url, max_body=20)
    with pytest.raises(PrometheusError, match="bytes"):
        client.query()
    client.close()


def _gzip(data: bytes, times: int = 1) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return b"".join([*(packer.compress(data) for _ in range(times)), packer.flush()])


def test_a_gzip_bomb_is_stopped_at_the_cap_while_it_streams(canned: list[Canned]) -> None:
    """100 KB of gzip that decodes to 100 MB, read with a cap of 1 MB: refused in words,
    and never more than a few MB in memory (httpx decodes a whole network chunk at once:
    64 KB of it is 64 MB)."""
    bomb = _gzip(b"\0" * (1 << 20), times=100)
    assert len(bomb) < 200_000
    server = serve(canned, 200, bomb, {"Content-Encoding": "gzip"})
    client = PrometheusClient(server.url, max_body=1 << 20)
    tracemalloc.start()
    try:
        with pytest.raises(PrometheusError) as caught:
            client.query()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        client.close()
    assert peak < 8 << 20, f"{peak} bytes at the peak"
    assert caught.value.kind == "bad answer"
    assert "decompresses to more than the 1048576 bytes this view reads" in str(caught.value)
    assert server.requests[0][1]["Accept-Encoding"] == "gzip"


def test_a_gzip_answer_is_read_and_other_encodings_are_refused(
        canned: list[Canned]) -> None:
    packed = serve(canned, 200, _gzip(json.dumps(OK).encode()), {"Content-Encoding": "gzip"})
    client = PrometheusClient(packed.url)
    assert len(client.query().result) == 1
    client.close()
    for encoding, body in (("gzip, gzip", _gzip(_gzip(json.dumps(OK).encode()))),
                           ("br", b"\x0b\x02\x80{}\x03")):
        server = serve(canned, 200, body, {"Content-Encoding": encoding})
        client = PrometheusClient(server.url)
        with pytest.raises(PrometheusError, match="asks for gzip and decodes nothing else"):
            client.query()
        client.close()
    damaged = serve(canned, 200, _gzip(json.dumps(OK).encode())[:-12],
                    {"Content-Encoding": "gzip"})
    client = PrometheusClient(damaged.url)
    with pytest.raises(PrometheusError, match=r"cut short|damaged"):
        client.query()
    client.close()


def test_unreachable_keeps_the_last_fleet(canned: list[Canned]) -> None:
    server = serve(canned, 200, OK)
    watcher = FleetWatcher(PrometheusClient(server.url))
    first = watcher.refresh()
    assert first.state is LinkState.LIVE and first.fleet is not None
    server.stop()
    canned.clear()
    second = watcher.refresh()
    assert second.state is LinkState.UNREACHABLE and second.failures == 1
    assert second.fleet is first.fleet and second.answered_mono == first.answered_mono
    assert "cannot reach" in (second.error or "")
    watcher.close()


def test_the_collector_runs_while_prometheus_is_awaited_and_after(
        canned: list[Canned]) -> None:
    """The watcher pauses the cyclic collector over decoding and the model only: never
    over a wait for Prometheus (which may last the whole timeout), never left paused."""
    server = serve(canned, 200, OK)
    server.release.clear()
    watcher = FleetWatcher(PrometheusClient(server.url))
    box: list[object] = []
    thread = threading.Thread(target=lambda: box.append(watcher.refresh()))
    thread.start()
    deadline = time.monotonic() + 10
    while not server.requests:
        assert time.monotonic() < deadline, "the query never arrived"
        time.sleep(0.01)
    assert gc.isenabled()  # the query is waiting for its answer
    server.release.set()
    thread.join(10)
    assert box and box[0].state is LinkState.LIVE  # type: ignore[attr-defined]
    assert gc.isenabled()
    server.body = json.dumps({"status": "error", "errorType": "bad_data",
                              "error": "no"}).encode()
    assert watcher.refresh().state is LinkState.ERROR
    assert gc.isenabled()
    watcher.close()


def test_nothing_listening() -> None:
    client = PrometheusClient(f"http://127.0.0.1:{free_port()}")
    with pytest.raises(PrometheusError) as caught:
        client.query()
    client.close()
    assert caught.value.kind == "unreachable"


@pytest.mark.parametrize(("url", "words"), [
    ("ftp://x", "not an http(s) URL"), ("http://u:p@x:9090", "holds a user or password"),
    ("http://x/?a=1", "query or fragment"), ("localhost:9090", "not an http(s) URL")])
def test_urls_refused(url: str, words: str) -> None:
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        check_prometheus_url(url)


@pytest.mark.parametrize(("url", "auth"), [
    ("http://prom.example:9090", PrometheusAuth(token="t0k")),
    ("http://10.0.0.5:9090", PrometheusAuth(user="ops", password="pw")),
    ("http://[2001:db8::1]:9090", PrometheusAuth(token="t0k")),
])
def test_credentials_never_go_over_plain_http_beyond_loopback(
        url: str, auth: PrometheusAuth) -> None:
    with pytest.raises(ValueError, match="clear text") as caught:
        PrometheusClient(url, auth)
    assert "use https://" in str(caught.value)
    check_credentials_safe("https://prom.example:9090", auth)
    check_credentials_safe("http://prom.example:9090", PrometheusAuth())
    for loopback in ("http://127.0.0.1:9090", "http://localhost:9090", "http://[::1]:9090"):
        check_credentials_safe(loopback, auth)


def test_plain_http_credentials_to_loopback_skip_the_environments_proxy(
        canned: list[Canned], monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy would read a token sent over plain http: with credentials, http:// goes
    straight to the loopback Prometheus whatever HTTP_PROXY says."""
    proxy = serve(canned, 200, OK)
    server = serve(canned, 200, OK)
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, proxy.url)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    client = PrometheusClient(server.url, PrometheusAuth(token="s3cret"))
    client.query()
    client.close()
    assert not proxy.requests
    assert server.requests[0][1]["Authorization"] == "Bearer s3cret"
