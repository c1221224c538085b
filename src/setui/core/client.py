"""The client of the Scheduled Events endpoint of the Instance Metadata Service.

Everything the service documents about talking to it lives here: ``Metadata: true``
on every request, never a proxy (the address is link-local), the enabling delay of the
first call, approvals, and its status codes. Every failure leaves as one of the typed
errors of :mod:`setui.core.errors` whose message is written for the operator; no
httpx exception escapes. ``fetch`` and ``approve`` each make one attempt: the poller
owns the pacing of the one, the Approver the retries of the other (a retry is a new
send, to be checked as the first was), and :meth:`ImdsClient.approval_retry` says what
the service asks to retry and when. A failure tells whether the request may have
arrived (``ImdsError.may_have_arrived``): refused before a byte left, it cannot have.
"""

from __future__ import annotations

import asyncio
import errno
import json
import math
import random as _random
import re
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx

from setui import __version__
from setui.core.apiversions import PREVIEW_API_VERSION
from setui.core.backoff import Backoff, parse_http_date, parse_retry_after
from setui.core.endpoint import (
    DEFAULT_API_VERSION,
    DEFAULT_ENDPOINT,
    check_api_version,
    check_endpoint,
)
from setui.core.errors import (
    BadDocument,
    Gone,
    ImdsError,
    MethodNotAllowed,
    NotFound,
    RateLimited,
    Rejected,
    RequestTimeout,
    ServerError,
    TooLarge,
    Unreachable,
)
from setui.core.model import Document, DocumentError, parse_document
from setui.core.quiet import Exchange, Repeat
from setui.core.ratelimit import TokenBucket
from setui.core.textsafe import printable
from setui.core.transport import PlainTransport, within
from setui.core.wire import KEEPALIVE_EXPIRY, declared_length

__all__ = ["ENABLING_TIMEOUT", "KEEPALIVE_EXPIRY", "MAX_BODY_BYTES", "REQUEST_TIMEOUT",
           "ApprovalResult", "FetchResult", "ImdsClient"]

NAME_API_VERSION = "2021-02-01"
EVENTS_PATH = "/metadata/scheduledevents"
COMPUTE_PATH = "/metadata/instance/compute"
NAME_PATH = f"{COMPUTE_PATH}/name"
ENABLING_TIMEOUT = 150.0  # the first call enables the feature: up to two minutes, documented
REQUEST_TIMEOUT = 5.0
NAME_TIMEOUT = 2.0  # the VM name is a nicety; startup must not wait long for it
# What an approval is tried again after: no connection, no answer in time, and what the
# service documents as "retry after some time" (410, 429, 5xx). Never 400.
_APPROVAL_RETRIED = (Unreachable, RequestTimeout, Gone, RateLimited, ServerError)
MAX_BODY_BYTES = 4 * 1024 * 1024  # real documents are a few KB
MAX_REASON_BODY = 16 * 1024  # of an error answer we read only enough to quote it
MAX_TEXT = 200  # network text quoted in a message is cut to this
_TAG_RE = re.compile(r"<[^>]*>")
# Errno values in words; the Windows (WSA) codes too.
_ERRNO_WORDS = {
    errno.ECONNREFUSED: "connection refused", 10061: "connection refused",
    errno.ENETUNREACH: "network unreachable", 10051: "network unreachable",
    errno.EHOSTUNREACH: "no route to host", 10065: "no route to host",
    errno.ECONNRESET: "connection reset", 10054: "connection reset",
    errno.ETIMEDOUT: "connection timed out", 10060: "connection timed out",
    errno.EADDRNOTAVAIL: "address not available here", 10049: "address not available here",
}


@dataclass(frozen=True)
class FetchResult:
    """One answer to a GET of the events document."""

    document: Document | None  # None only for 304 "unchanged"
    status: int
    latency: float  # seconds from sending the request to the end of the body
    server_date: datetime | None  # the Date header (aware UTC), for clock-skew detection
    received_mono: float  # the client's monotonic clock when the answer's head arrived


@dataclass(frozen=True)
class ApprovalResult:
    """An accepted approval; ``latency`` from sending the request to its answer."""

    event_ids: tuple[str, ...]
    status: int
    latency: float


@dataclass
class _Answer:
    status: int
    phrase: str
    headers: Mapping[str, str]  # by lowercase name (httpx.Headers, or the lean transport's)
    body: bytes
    sent: float
    head: float
    done: float


@dataclass
class _Progress:
    """How far an exchange got, so a failure can say where it stopped."""

    head: bool = False
    status: int | None = None  # the answer's, once its head arrived
    received: int = 0
    declared: int | None = None
    # Whether the request went out on a pooled keep-alive connection; cleared when the
    # transport reports opening a new one (a transport that reports nothing counts as
    # reused, which only allows the one retry below).
    reused: bool = True
    # Whether the request has begun to leave: False while a new connection is being
    # made, True once its bytes go out; None when the transport tells nothing of it, so
    # that it may have left.
    sending: bool | None = None

    async def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's trace hook: ``connection.connect_tcp.started`` and the like (both
        transports name the steps so)."""
        if event.startswith("connection.connect_"):
            self.reused = False
            if self.sending is None:
                self.sending = False
        elif event.endswith(".send_request_headers.started"):
            self.sending = True

    def may_have_arrived(self) -> bool:
        """Whether a failure now leaves the request perhaps received: it had begun to
        leave (or nothing says it had not) and no answer came back."""
        return self.sending is not False and not self.head


class ImdsClient:
    """One pooled HTTP connection to IMDS, shared by polling and approving."""

    def __init__(self, endpoint: str = DEFAULT_ENDPOINT, api_version: str = DEFAULT_API_VERSION,
                 *, timeout: float = REQUEST_TIMEOUT, enabling_timeout: float = ENABLING_TIMEOUT,
                 max_body: int = MAX_BODY_BYTES,
                 transport: httpx.AsyncBaseTransport | None = None,
                 rate: float = 4.0, burst: int = 3, mono: Callable[[], float] = time.monotonic,
                 random: Callable[[], float] = _random.random,
                 backoff: Backoff | None = None,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        for name, value in (("timeout", timeout), ("enabling_timeout", enabling_timeout)):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number of seconds, got {value}")
        if max_body < 1:
            raise ValueError(f"max_body must be at least 1 byte, got {max_body}")
        self.endpoint = check_endpoint(endpoint)
        api_version = check_api_version(api_version)
        self.api_version = api_version
        self.url = f"{self.endpoint}{EVENTS_PATH}?api-version={quote(api_version)}"
        self.name_url = (f"{self.endpoint}{NAME_PATH}?api-version={NAME_API_VERSION}"
                         "&format=text")
        self.timeout = float(timeout)
        self.enabling_timeout = float(enabling_timeout)
        self.max_body = max_body
        self.first_call_pending = True  # until the first answer to a GET of the events
        self._mono = mono
        # The rate limit waits on ``mono`` with ``sleep``: tests pass fake ones together.
        self._bucket = TokenBucket(rate, burst, mono=mono, sleep=sleep)
        self._backoff = backoff or Backoff(base=0.5, cap=10.0, random=random)
        self._etag: str | None = None
        # The last document parsed and the bytes it came from (see fetch).
        self._last_body: bytes | None = None
        self._last_document: Document | None = None
        if transport is None and self.endpoint.startswith("http://"):
            # IMDS is plain http: a lean transport (one kept-alive connection, a second
            # only while an approval overlaps a poll in flight) costs a fraction of the
            # CPU of httpx's general one. It is kept across the longest gap the poller
            # makes by itself, so a slow pace or a backoff does not mean a new TCP
            # connection per poll; one the server closed meanwhile is noticed before it
            # is used or, in a race, retried once by _request.
            transport = PlainTransport(keepalive_expiry=KEEPALIVE_EXPIRY, mono=mono)
        elif transport is None:
            # https (a proxy or test endpoint): httpx's own transport, TLS included.
            transport = httpx.AsyncHTTPTransport(
                limits=httpx.Limits(max_connections=2, max_keepalive_connections=1,
                                    keepalive_expiry=KEEPALIVE_EXPIRY),
                retries=0)
        # Requests go straight to the transport: no httpx.AsyncClient, so no proxy from
        # the environment (HTTP(S)_PROXY, ALL_PROXY, NO_PROXY, .netrc: a proxy in front of
        # a link-local address answers 400/403 of its own), no cookies kept, no redirect
        # followed, and none of a client's per-request bookkeeping.
        self._transport = transport
        self._headers = {"Metadata": "true", "User-Agent": f"setui/{__version__}",
                         "Accept": "application/json", "Accept-Encoding": "identity"}
        # Bodiless requests (the polls) are built once per URL and headers and sent
        # again: a request's construction cost as much as a tenth of a poll.
        self._requests: dict[tuple[str, str, tuple[tuple[str, str], ...]], httpx.Request] = {}

    # -- public -----------------------------------------------------------------------------
    async def fetch(self, made: Exchange | None = None) -> FetchResult:
        """GET the events document: one attempt, no retries. Raises ImdsError only.

        ``made``: the GET that :meth:`repeat` described, made already by another thread
        (core.quiet): its answer, or how it failed, is read here as if it had been made
        here, so every answer has one reading and every failure one wording."""
        first = self.first_call_pending
        headers = self._poll_headers()
        answer = await self._request("GET", self.url, headers=headers,
                                     timeout=self.enabling_timeout if first else self.timeout,
                                     limit=self.max_body, strict=True, enables=True, made=made)
        latency = answer.done - answer.sent
        date = parse_http_date(answer.headers.get("date"))
        if answer.status == 304:
            if not headers:
                raise BadDocument("the service answered 304 Not Modified to a request that had "
                                  "nothing cached", status=304)
            return FetchResult(None, 304, latency, date, answer.head)
        if not 200 <= answer.status < 300:
            raise self._status_error(answer)
        if answer.body == self._last_body and self._last_document is not None:
            # The same bytes as the last document read: the same document (parsing is a
            # function of the bytes alone), so the very object is handed back and the
            # poller knows it has nothing new. Any other document read since replaced
            # the bytes kept: only the last one read is ever handed back again.
            document = self._last_document
        else:
            self._last_body, self._last_document = None, None
            try:
                document = parse_document(answer.body)
            except DocumentError as exc:
                raise BadDocument("the answer is not a scheduled-events document: "
                                  f"{_clean(str(exc))}", status=answer.status) from None
            self._last_body, self._last_document = answer.body, document
        self._etag = _etag(answer.headers)
        return FetchResult(document, answer.status, latency, date, answer.head)

    def repeat(self) -> Repeat | None:
        """The next poll as another thread can make it and judge it (core.quiet): the
        request's bytes, and whether an answer says nothing new, that is what
        :meth:`fetch` would read as the document of the last answer again, or as 304.
        None while there is no last document to compare with, or the first call (the
        one that may take minutes) has not been answered."""
        if self.first_call_pending or self._last_document is None \
                or not self.endpoint.startswith("http://"):
            return None
        url = httpx.URL(self.url)
        headers = {"Host": url.netloc.decode("ascii"), **self._headers,
                   **self._poll_headers()}
        return Repeat(host=url.host, port=url.port or 80, target=url.raw_path,
                      headers=tuple((k.encode("ascii"), v.encode("ascii"))
                                    for k, v in headers.items()),
                      timeout=self.timeout, max_body=self.max_body, token=self._bucket.take,
                      nothing_new=partial(_nothing_new, self._last_body, self._etag))

    def _poll_headers(self) -> dict[str, str]:
        return {"If-None-Match": self._etag} if self._etag else {}

    def forget_etag(self) -> None:
        """Make the next fetch a full GET (for a caller that lost the cached document)."""
        self._etag = None

    async def approve(self, event_ids: Sequence[str], *, incarnation: int | None = None,
                      timeout: float | None = None) -> ApprovalResult:
        """POST StartRequests for ``event_ids``: one try, within ``timeout`` (default the
        client's). Raises ImdsError only; see :meth:`approval_retry` for another try."""
        ids = _event_ids(event_ids)
        body: dict[str, object] = {"StartRequests": [{"EventId": i} for i in ids]}
        if self.api_version == PREVIEW_API_VERSION and incarnation is not None:
            body = {"DocumentIncarnation": incarnation, **body}
        started = self._mono()
        try:
            answer = await self._request(
                "POST", self.url, headers={"Content-Type": "application/json"},
                content=json.dumps(body).encode(), timeout=timeout or self.timeout,
                limit=MAX_REASON_BODY, strict=False)
        except BadDocument as exc:
            if exc.status is not None and 200 <= exc.status < 300:
                # Accepted: the answer's body carries nothing an approval needs.
                return ApprovalResult(tuple(ids), exc.status, self._mono() - started)
            raise
        if 200 <= answer.status < 300:
            return ApprovalResult(tuple(ids), answer.status, answer.done - answer.sent)
        raise self._status_error(answer)

    def approval_retry(self, attempt: int, error: ImdsError) -> float | None:
        """Seconds to wait before trying an approval again, its try number ``attempt``
        having failed with ``error``; None when another try cannot help (400 and other
        answers the service does not ask to retry). A Retry-After is obeyed. Within
        :data:`setui.core.backoff.APPROVAL_DEADLINE` of the first try, which the caller
        keeps."""
        if not isinstance(error, _APPROVAL_RETRIED):
            return None
        return self._backoff.delay(attempt, error.retry_after)

    async def vm_name(self) -> str | None:
        """This VM's name from IMDS compute metadata; None on any failure, never raises."""
        try:
            answer = await self._request("GET", self.name_url,
                                         timeout=min(self.timeout, NAME_TIMEOUT),
                                         limit=1024, strict=False)
            if answer.status != 200:
                return None
            name = answer.body.decode("utf-8").strip()
        except Exception:  # a name is optional: the caller falls back to the host name
            return None
        return name if name and len(name) <= 256 and name.isprintable() else None

    async def compute(self) -> dict[str, str] | None:
        """This VM's compute metadata (name, vmScaleSetName, zone...) as printable text
        fields of at most 256 characters; None on any failure, never raises."""
        url = f"{self.endpoint}{COMPUTE_PATH}?api-version={NAME_API_VERSION}"
        try:
            answer = await self._request("GET", url, timeout=min(self.timeout, NAME_TIMEOUT),
                                         limit=64 * 1024, strict=False)
            if answer.status != 200:
                return None
            data = json.loads(answer.body.decode("utf-8"))
        except Exception:  # the identity is optional: labels say "" for what is unknown
            return None
        if not isinstance(data, dict):
            return None
        return {str(key)[:64]: value[:256] for key, value in data.items()
                if isinstance(value, str) and value.isprintable()}

    async def aclose(self) -> None:
        await self._transport.aclose()

    async def __aenter__(self) -> ImdsClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<ImdsClient {self.url}>"

    # -- the exchange -----------------------------------------------------------------------
    async def _request(self, method: str, url: str, *, timeout: float, limit: int,
                       strict: bool, enables: bool = False,
                       headers: dict[str, str] | None = None,
                       content: bytes | None = None, made: Exchange | None = None) -> _Answer:
        """One exchange within ``timeout`` (the rate-limit wait is not counted), with
        every failure turned into an ImdsError. ``made``: an exchange made already (its
        thread kept the pace and the time limit): only read."""
        if made is None:
            await self._bucket.acquire()
        progress = _Progress()
        first = enables and self.first_call_pending
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            try:
                return await within(timeout, self._send(
                    method, url, headers or {}, content, timeout, limit, strict, enables,
                    progress, made))
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
                if not (method == "GET" and progress.reused and not progress.head):
                    raise
            # The server closed the kept-alive connection just as the request went out
            # (its idle timeout fired): nothing is wrong with the service, so this is not
            # an error to show. A GET is safe to repeat; once, on a new connection.
            await self._bucket.acquire()
            progress = _Progress()
            remaining = max(deadline - loop.time(), 0.05)
            return await within(remaining, self._send(
                method, url, headers or {}, content, remaining, limit, strict, enables,
                progress))
        except ImdsError:
            raise
        # Connecting failed: not a byte of the request left.
        except httpx.ConnectTimeout as exc:
            raise Unreachable(f"nothing answers at {self.endpoint} — is this an Azure VM? "
                              f"(no connection within {_secs(min(timeout, self.timeout))} s)"
                              ) from exc
        except httpx.ConnectError as exc:
            raise Unreachable(f"nothing answers at {self.endpoint} — is this an Azure VM? "
                              f"({_os_reason(exc)})") from exc
        # From here on the request may have left, and then arrived.
        except (asyncio.TimeoutError, httpx.TimeoutException) as exc:
            raise _sent(self._timeout(timeout, first, progress), progress) from exc
        except httpx.RemoteProtocolError as exc:
            if progress.head:  # the body was cut off mid-way
                raise BadDocument(f"the answer was cut off: {_cut_off(progress)}",
                                  status=progress.status) from exc
            raise _sent(Unreachable(f"the connection to {self.endpoint} closed before any "
                                    f"answer ({_clean(str(exc)) or 'disconnected'})"),
                        progress) from exc
        except (httpx.HTTPError, httpx.StreamError, httpx.InvalidURL, OSError) as exc:
            reason = _os_reason(exc)
            if isinstance(exc, (httpx.TransportError, OSError)):
                raise _sent(Unreachable(f"cannot talk to {self.endpoint}: {reason}"),
                            progress) from exc
            raise _sent(ImdsError(f"request to {self.endpoint} failed: {reason}"),
                        progress) from exc

    async def _send(self, method: str, url: str, headers: dict[str, str], content: bytes | None,
                    timeout: float, limit: int, strict: bool, enables: bool,
                    progress: _Progress, made: Exchange | None = None) -> _Answer:
        # The connect phase never gets the enabling delay: that delay is the service
        # thinking, not the TCP handshake; a VM without IMDS should hear so in seconds.
        # Sending and reading have no limits of their own: _request bounds the whole
        # exchange by ``timeout`` already, and a limit per read or write was a timer made
        # and cancelled around each of them, every poll, for nothing.
        extensions = {"timeout": {"connect": min(timeout, self.timeout), "read": None,
                                  "write": None, "pool": timeout},
                      "trace": progress.trace}
        key = (method, url, tuple(headers.items()))
        request = self._requests.get(key) if content is None else None
        if request is None:
            request = httpx.Request(method, url, headers={**self._headers, **headers},
                                    content=content)
            if content is None:
                if len(self._requests) >= 8:  # an ETag per document: keep only a few
                    self._requests.clear()
                self._requests[key] = request
        request.extensions = extensions
        sent = self._mono()
        transport = self._transport
        fields: Mapping[str, str]
        stream: httpx.AsyncByteStream | _Decoded
        if made is not None:
            # Made on another thread: its times, how far it got, and then its answer (or
            # its failure, raised here as the transport would have raised it).
            sent = made.sent
            progress.reused = made.reused
            progress.sending = made.sending
            opened = made.answer()
            status, fields = opened.head.status_code, opened.fields()
            phrase, stream = opened.reason, opened.body
        elif isinstance(transport, PlainTransport):
            # The lean transport's own answer: its head as h11 read it and the body's
            # stream, with no httpx.Response (nor its Headers) made around them.
            opened = await transport.open(request)
            status, fields = opened.head.status_code, opened.fields()
            phrase, stream = opened.reason, opened.body
        else:
            response = await transport.handle_async_request(request)
            response.request = request
            status, fields, phrase = response.status_code, response.headers, \
                response.reason_phrase
            # Asked for "identity", the body is the bytes sent: read from the
            # transport's stream, not through httpx's decoding and re-chunking layers. A
            # server that encodes anyway is decoded.
            stream = response.stream if isinstance(response.stream, httpx.AsyncByteStream) \
                and "content-encoding" not in fields else _Decoded(response)
        head = self._mono() if made is None else made.head_mono
        progress.head = True
        progress.status = status
        if enables:
            self.first_call_pending = False
        try:
            body = await _read(stream, fields, status, limit, strict, progress)
        finally:
            await stream.aclose()  # an unread rest closes the connection: reading stops
        return _Answer(status, phrase, fields, body, sent, head,
                       self._mono() if made is None else made.done_mono)

    # -- errors -----------------------------------------------------------------------------
    def _timeout(self, timeout: float, first: bool, progress: _Progress) -> RequestTimeout:
        if progress.head:
            text = (f"the answer from {self.endpoint} did not complete within {_secs(timeout)} s "
                    f"({progress.received} bytes arrived)")
        else:
            text = f"no answer from {self.endpoint} within {_secs(timeout)} s"
        if first:
            text += " (the first call enables scheduled events and can take up to 2 minutes)"
        return RequestTimeout(text)

    def _status_error(self, answer: _Answer) -> ImdsError:
        status = answer.status
        said = _service_reason(answer) or answer.phrase or "no reason given"
        retry_after = parse_retry_after(answer.headers.get("retry-after"))
        if status == 400:
            return Rejected(f"rejected: {said}", status=status)
        if status == 404:
            return NotFound(f"not found (404): {said} — is {self.endpoint} the metadata "
                            "service?", status=status)
        if status == 405:
            return MethodNotAllowed(f"method not allowed (405): {said}", status=status)
        if status == 410:
            return Gone(f"not ready yet (410 Gone): the service says to retry for up to "
                        f"70 seconds ({said})", status=status, retry_after=retry_after)
        if status == 429:
            wait = f"it asks to wait {_secs(retry_after)} s" if retry_after is not None else \
                "backing off"
            return RateLimited(f"rate limited (429): more than about 5 requests a second from "
                               f"this VM; {wait}", status=status, retry_after=retry_after)
        if status >= 500:
            return ServerError(f"the metadata service failed ({status} {answer.phrase}): {said}",
                               status=status, retry_after=retry_after)
        if 300 <= status < 400:
            where = _clean(answer.headers.get("location", "?"), 80)
            return ImdsError(f"unexpected redirect ({status}) to {where}: the metadata service "
                             "never redirects — is a proxy in the way?", status=status)
        return ImdsError(f"unexpected answer ({status} {answer.phrase}): {said}", status=status)


async def _read(stream: AsyncIterable[bytes], fields: Mapping[str, str], status: int,
                limit: int, strict: bool, progress: _Progress) -> bytes:
    """At most ``limit`` bytes of the body. ``strict``: more is TooLarge (known from
    Content-Length before reading, or as soon as the limit is passed); otherwise the
    rest is simply not read."""
    progress.declared = declared_length(fields)
    if strict and progress.declared is not None and progress.declared > limit:
        raise TooLarge(f"the answer is {_size(progress.declared)}, more than the "
                       f"{_size(limit)} any real document needs; not read", status=status)
    body = bytearray()
    async for chunk in stream:
        body += chunk
        progress.received = len(body)
        if len(body) > limit:
            if strict:
                raise TooLarge(f"the answer grew past {_size(limit)}, more than any real "
                               "document needs; reading stopped", status=status)
            del body[limit:]
            break
    return bytes(body)


class _Decoded:
    """An httpx response's body decoded as its Content-Encoding says, closed with it."""

    def __init__(self, response: httpx.Response) -> None:
        self._response = response

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._response.aiter_bytes()

    async def aclose(self) -> None:
        await self._response.aclose()


def _service_reason(answer: _Answer) -> str:
    """The service's own words: the JSON ``error`` field, else the text of the body."""
    text = answer.body.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        said = data.get("error") or data.get("message")
        if isinstance(said, str):
            newest = data.get("newest-versions")
            if isinstance(newest, list) and all(isinstance(v, str) for v in newest):
                said += f" (newest api-versions: {', '.join(newest[:5])})"
            return _clean(said)
    if "html" in answer.headers.get("content-type", "").lower():
        text = _TAG_RE.sub(" ", text)  # a proxy's error page: its words, not its markup
    return _clean(text)


def _nothing_new(body: bytes | None, etag: str | None, status: int, fields: Mapping[str, str],
                 got: bytes) -> bool:
    """Whether fetch would read this answer as the last document again (the same bytes,
    and the same ETag kept) or as 304 to the ETag it sent: nothing to hand on."""
    if status == 304:
        return etag is not None
    return 200 <= status < 300 and got == body and _etag(fields) == etag


def _etag(fields: Mapping[str, str]) -> str | None:
    """The answer's ETag, if it is one to send back in If-None-Match."""
    tag = fields.get("etag")
    return tag if tag and len(tag) <= 200 and tag.isascii() and tag.isprintable() else None


def _clean(text: str, limit: int = MAX_TEXT) -> str:
    """Network text made safe to print: whitespace runs made one space, then the one
    escaping rule (setui.core.textsafe) on one line, cut."""
    return printable(" ".join(text.split()), limit)


def _os_reason(exc: BaseException) -> str:
    """The underlying socket error in words ("connection refused"), else the text."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        number = getattr(cause, "errno", None)
        if isinstance(cause, OSError) and isinstance(number, int):
            return _ERRNO_WORDS.get(number) or _clean(cause.strerror or str(cause), 120)
        cause = cause.__cause__ or cause.__context__
    return _clean(str(exc), 120) or type(exc).__name__


def _cut_off(progress: _Progress) -> str:
    of = f" of {progress.declared}" if progress.declared is not None else ""
    return f"the connection closed after {progress.received}{of} bytes"


def _sent(error: ImdsError, progress: _Progress) -> ImdsError:
    """``error``, saying whether its request may have arrived regardless."""
    error.may_have_arrived = progress.may_have_arrived()
    return error


def _event_ids(event_ids: Sequence[str]) -> list[str]:
    if isinstance(event_ids, (str, bytes)):  # a lone id would be iterated letter by letter
        raise TypeError("event_ids must be a sequence of EventIds, not one string")
    ids: list[str] = []
    for event_id in event_ids:
        if not isinstance(event_id, str) or not event_id.strip():
            raise ValueError(f"not an EventId: {event_id!r}")
        if event_id not in ids:
            ids.append(event_id)
    if not ids:
        raise ValueError("no EventId to approve")
    return ids


def _secs(seconds: float | None) -> str:
    return "?" if seconds is None else f"{seconds:g}" if seconds < 10 else f"{seconds:.0f}"


def _size(n: int) -> str:
    return f"{n / 1024 / 1024:.1f} MiB" if n >= 1024 * 1024 else f"{n} bytes"
