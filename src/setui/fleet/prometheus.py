"""One instant query to Prometheus's HTTP API (``/api/v1/query``), and its answer checked.

The fleet view reads what the agents export from whatever already scrapes them
(Prometheus, Azure Managed Prometheus, Thanos, Mimir: the same API). The client is
synchronous on purpose: the dashboard calls it from a thread worker, where parsing tens of
thousands of series cannot stall Textual's event loop. Credentials (a bearer token, or a
user and password) come from the config file or the environment, never the command line.
Every failure is a :class:`PrometheusError` whose message is for people; a body too large
or not shaped like the API's is refused, not half-read.
"""

from __future__ import annotations

import contextlib
import json
import math
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx

from setui import __version__
from setui.core.metricnames import (
    EVENT_METRIC,
    IMPACT_METRIC,
    NOT_REPORTED_METRIC,
    SUCCESS_METRIC,
    WAITING_METRIC,
)
from setui.core.textsafe import printable
from setui.system.gctune import collector_paused
from setui.system.loopback import is_loopback

if TYPE_CHECKING:
    from setui.settings.config import Config

__all__ = [
    "MAX_BODY",
    "QUERY",
    "InstantVector",
    "PrometheusAuth",
    "PrometheusClient",
    "PrometheusError",
    "auth_from",
    "check_credentials_safe",
    "check_prometheus_url",
]

# One query, a selector and nothing to compute (docs/metrics.md, "What setui fleet asks"):
# every current event's series, every VM's last good answer from IMDS, the last stall or
# boot each agent measured, the VMs not scraped now with since when (the shipped recording
# rule, and whether it is there), and the agents whose early approvals wait (a disruption
# budget; no series otherwise).
QUERY = (f'{{__name__=~"{EVENT_METRIC}|{SUCCESS_METRIC}|{IMPACT_METRIC}|'
         f'{NOT_REPORTED_METRIC}|{WAITING_METRIC}"}}')
MAX_BODY = 256 * 1024 * 1024  # decoded; 10,000 VMs x 3 events is about 20 MB of JSON
STEP = 1024 * 1024  # decoded bytes made at a time, at most
ACCEPT_ENCODING = "gzip"  # Prometheus compresses with it; nothing else is decoded here
TIMEOUT = 30.0  # seconds for the whole answer; a large fleet's query takes a while


class PrometheusError(Exception):
    """A query that brought nothing usable. ``kind`` is ``unreachable`` (no answer at
    all), ``refused`` (401/403: the credentials), ``error`` (Prometheus answered with an
    error) or ``bad answer`` (not the API's shape)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class PrometheusAuth:
    """How to log in: a bearer token, or basic auth; neither for an open Prometheus."""

    token: str | None = field(default=None, repr=False)
    user: str | None = None
    password: str | None = field(default=None, repr=False)

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def basic(self) -> httpx.BasicAuth | None:
        if self.user and self.password is not None:
            return httpx.BasicAuth(self.user, self.password)
        return None

    @property
    def described(self) -> str:
        if self.token:
            return "bearer token"
        return f"user {printable(self.user, 40)}" if self.user else "no credentials"

    @property
    def kind(self) -> str:
        """What is secret in it, in words."""
        return "bearer token" if self.token else "password" if self.password else "nothing"


@dataclass(frozen=True)
class InstantVector:
    """An instant vector: ``result`` as the API gave it, ``evaluated_at`` the query's
    time in Prometheus's clock (Unix seconds), ``warnings`` what Prometheus added."""

    result: list[dict[str, Any]]
    evaluated_at: float | None
    warnings: tuple[str, ...] = ()
    size: int = 0  # bytes of the body


def auth_from(config: Config) -> PrometheusAuth:
    """The credentials the config file or the environment give (never the command line:
    other users of the machine can read it)."""
    return PrometheusAuth(token=config.prometheus_token, user=config.prometheus_user,
                          password=config.prometheus_password)


def check_prometheus_url(text: str) -> str:
    """An http(s) URL with a host, without credentials in it (they belong in the config);
    returned without a trailing slash. Raises ValueError with the reason."""
    text = text.strip()
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL with a host: {printable(text, 200)}")
    if parts.username or parts.password:
        raise ValueError("the URL holds a user or password: put them in the config file "
                         "(prometheus-user, prometheus-password) or the environment "
                         "(SETUI_PROMETHEUS_USER, SETUI_PROMETHEUS_PASSWORD), where other "
                         "users of this machine cannot read them")
    if parts.query or parts.fragment:
        raise ValueError(f"the URL has a query or fragment: {printable(text, 200)}")
    return text.rstrip("/")


def check_credentials_safe(url: str, auth: PrometheusAuth) -> None:
    """Refuse to send a bearer token or a password in clear text: over plain ``http://``
    they go only to this machine's loopback. Raises ValueError with what to do."""
    parts = urlsplit(url)
    if parts.scheme != "http" or auth.kind == "nothing" or is_loopback(parts.hostname or ""):
        return
    raise ValueError(f"the {auth.kind} would cross the network in clear text to "
                     f"{printable(parts.hostname, 100)} over plain http://: use https:// "
                     "(plain http carries credentials only to this machine's loopback)")


class PrometheusClient:
    """``query(promql)`` against one Prometheus; one pooled connection, closed by
    :meth:`close`. Proxies from the environment are honoured: unlike IMDS, a remote
    Prometheus may well sit behind one."""

    def __init__(self, url: str, auth: PrometheusAuth | None = None, *,
                 timeout: float = TIMEOUT, max_body: int = MAX_BODY,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.url = check_prometheus_url(url)
        self.auth = auth or PrometheusAuth()
        check_credentials_safe(self.url, self.auth)
        self.max_body = max_body
        # A proxy from the environment would see plain http's credentials: none then.
        private = self.url.startswith("http://") and self.auth.kind != "nothing"
        self._http = httpx.Client(
            transport=transport, trust_env=not private,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            follow_redirects=False, auth=self.auth.basic(),
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            headers={"User-Agent": f"setui/{__version__}", "Accept": "application/json",
                     "Accept-Encoding": ACCEPT_ENCODING, **self.auth.headers()})

    def close(self) -> None:
        self._http.close()

    def query(self, promql: str = QUERY) -> InstantVector:
        """One instant query, evaluated at Prometheus's "now"."""
        return self.decode(*self.fetch(promql))

    def fetch(self, promql: str = QUERY) -> tuple[int, bytes]:
        """The wire half of :meth:`query`: the HTTP status and the body (bounded), not yet
        decoded, so a caller can decode it where it wants (the watcher: in one pause of
        the collector with the model made from it)."""
        where = f"{self.url}/api/v1/query"
        try:
            with self._http.stream("GET", where, params={"query": promql}) as response:
                body = self._read(response)
                status = response.status_code
        except PrometheusError:
            raise
        except httpx.TimeoutException:
            raise PrometheusError("unreachable", f"no answer from {self.url} within "
                                  f"{self._http.timeout.read:g} s") from None
        except httpx.HTTPError as exc:
            reason = printable(str(exc) or type(exc).__name__, 200)
            raise PrometheusError("unreachable", f"cannot reach {self.url}: {reason}") from None
        return status, body

    def decode(self, status: int, body: bytes) -> InstantVector:
        """The answer checked: an instant vector, or a :class:`PrometheusError` in words."""
        return _answer(status, body, self.url)

    def _read(self, response: httpx.Response) -> bytes:
        """The body, decompressed here while it streams, stopped at :attr:`max_body`
        decoded bytes. httpx would decompress each network chunk whole before anyone
        could count it: one 64 KB chunk of a gzip bomb is 64 MB, and a 600 KB answer
        once took 3.5 GB."""
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body:
            raise PrometheusError("bad answer", f"the answer is {int(declared)} bytes, over "
                                  f"the {self.max_body} this view reads")
        encoding = response.headers.get("content-encoding", "").strip().lower()
        inflate = _decompressor(encoding)
        chunks: list[bytes] = []
        size = raw = 0
        try:
            for chunk in response.iter_raw():
                raw += len(chunk)
                while chunk:
                    if inflate is None:
                        piece, chunk = chunk, b""
                    else:
                        piece = inflate.decompress(chunk, min(self.max_body - size + 1, STEP))
                        chunk = inflate.unconsumed_tail
                    size += len(piece)
                    if size > self.max_body:
                        raise PrometheusError("bad answer", _too_large(
                            self.max_body, encoding if inflate is not None else "", raw))
                    chunks.append(piece)
            if inflate is not None and not inflate.eof:
                raise PrometheusError("bad answer", f"the answer's {encoding} stream is cut "
                                      "short")
        except zlib.error as exc:
            raise PrometheusError("bad answer", f"the answer's {encoding} is damaged: "
                                  f"{printable(str(exc), 100)}") from None
        return b"".join(chunks)


def _decompressor(encoding: str) -> Any:
    """A zlib decompressor for the one Content-Encoding the client asks for (gzip) or
    deflate; None for none. Anything else, stacked encodings included, is refused."""
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return zlib.decompressobj()
    raise PrometheusError("bad answer", f"the answer is encoded as {printable(encoding, 60)!r}"
                          f"; this view asks for {ACCEPT_ENCODING} and decodes nothing else")


def _too_large(cap: int, encoding: str, raw: int) -> str:
    if not encoding:
        return f"the answer is over the {cap} bytes this view reads"
    return (f"the answer decompresses to more than the {cap} bytes this view reads "
            f"({raw} bytes of {encoding} read so far): stopped there")


def _answer(status: int, body: bytes, url: str) -> InstantVector:
    document: Any = None
    with contextlib.suppress(ValueError, UnicodeDecodeError), collector_paused():
        document = json.loads(body)  # not JSON: said below, with the status
    if status in (401, 403):
        raise PrometheusError("refused", f"{url} refused the credentials (HTTP {status}); "
                              "check prometheus-token or prometheus-user/password")
    if not isinstance(document, dict):
        snippet = printable(body[:200].decode("utf-8", "replace"), 120)
        raise PrometheusError("bad answer" if status == 200 else "error",
                              f"HTTP {status} from {url}, not the query API's JSON: {snippet}")
    if document.get("status") != "success":
        kind = printable(document.get("errorType") or "error", 40)
        message = printable(document.get("error") or "no reason given", 300)
        raise PrometheusError("error", f"Prometheus said {kind} (HTTP {status}): {message}")
    data = document.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "vector" \
            or not isinstance(data.get("result"), list):
        raise PrometheusError("bad answer", "the answer is not an instant vector")
    result: list[dict[str, Any]] = data["result"]
    evaluated = None
    if result:
        evaluated = _time_of(result[0])
    warnings = tuple(printable(w, 300) for w in document.get("warnings") or ()
                     if isinstance(w, str))[:10]
    return InstantVector(result, evaluated, warnings, len(body))


def _time_of(sample: Any) -> float | None:
    try:
        value = float(sample["value"][0])
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None
