"""Where the service is and which version of it to ask: the defaults and their checks.

Kept apart from the client so that the config file and the command line can refuse a
bad value where it was given without loading httpx (every command reads the config).

:func:`endpoint_key` is the one answer to "is this the same service?": wherever an endpoint
is a key (a claim, the history, the agent's steps and holds, the recording sessions), two
spellings of one URL must be one key, or ``http://localhost:P/`` approves again what
``HTTP://127.0.0.1:P`` already approved.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import string
from urllib.parse import urlsplit

from setui.core.apiversions import KNOWN_API_VERSIONS, NEWEST_API_VERSION

__all__ = ["DEFAULT_API_VERSION", "DEFAULT_ENDPOINT", "check_api_version", "check_endpoint",
           "endpoint_key"]

DEFAULT_ENDPOINT = "http://169.254.169.254"
DEFAULT_API_VERSION = NEWEST_API_VERSION  # the one that carries every event type and field
_API_VERSION_RE = re.compile(r"[0-9A-Za-z.\-]{1,32}")
_DEFAULT_PORTS = {"http": 80, "https": 443}
# The names of this host's loopback service: one endpoint, whichever was written.
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost",
                             "ip6-loopback"})
_LOOPBACK = "127.0.0.1"
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")  # RFC 3986 2.3
# What inet_aton reads as an IPv4 address (and so does the resolver): 2852039166,
# 0xa9fea9fe, 169.254.43518 are all 169.254.169.254.
_IPV4_FORMS = re.compile(r"(?:0x[0-9a-f]+|[0-9]+)(?:\.(?:0x[0-9a-f]+|[0-9]+)){0,3}")


def check_endpoint(endpoint: str) -> str:
    """The endpoint as the client uses it (no trailing slash), or ValueError saying what is
    wrong with it in words. The command line and the config file call this too, so a bad
    value is refused where it was given instead of when the first request is built."""
    if not isinstance(endpoint, str):
        raise ValueError(f"endpoint must be a URL like {DEFAULT_ENDPOINT}, got {endpoint!r}")
    text = endpoint.strip()
    example = f"give the service's base URL, like {DEFAULT_ENDPOINT}"
    if not text:
        raise ValueError(f"the endpoint is empty; {example}")
    scheme, sep, rest = text.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        raise ValueError(f"endpoint must start with http:// or https://, got {endpoint!r}; "
                         f"{example}")
    if "@" in rest.split("/", 1)[0]:
        # IMDS takes none, and the endpoint is quoted in every other message: so it is
        # not here, nor checked after anything that quotes it, lest a password be logged.
        raise ValueError(f"the endpoint carries a user name or password (before '@'); the "
                         f"metadata service takes none; {example}")
    text = text.rstrip("/")
    # The request URLs are built by appending to this text, so characters that httpx would
    # quietly drop or re-encode (a bare "?", a space) must be refused here, not mangled.
    if any(ch.isspace() or not ch.isprintable() for ch in text):
        raise ValueError(f"endpoint {endpoint!r} contains spaces or control characters; "
                         f"{example}")
    if "?" in text or "#" in text:
        raise ValueError(f"endpoint {endpoint!r} has a query or fragment; {example} "
                         "(setui adds the path and api-version itself)")
    try:
        url = urlsplit(text)
    except ValueError as exc:
        raise ValueError(f"endpoint {endpoint!r} is not a valid URL ({exc}); {example}") \
            from None
    if not url.hostname:
        raise ValueError(f"endpoint {endpoint!r} has no host; {example}")
    _, colon, port = url.netloc.rpartition(":")
    if colon and "]" not in port and port:
        if not port.isdigit() or not port.isascii():
            raise ValueError(f"endpoint {endpoint!r} has port {port!r}, not a number; "
                             f"{example}")
        if not 1 <= int(port) <= 65535:
            raise ValueError(f"endpoint {endpoint!r} has port {int(port)}, outside 1-65535; "
                             f"{example}")
    return text


def check_api_version(api_version: str) -> str:
    """``api_version`` if it is shaped like one (``2020-07-01``), else ValueError in words.

    Only the shape is checked: a newer version than setui knows is the service's to accept
    or refuse (it answers 400 with the versions it has)."""
    if not isinstance(api_version, str) or not _API_VERSION_RE.fullmatch(api_version):
        raise ValueError(f"api-version must look like {DEFAULT_API_VERSION} (letters, digits, "
                         f"dots and dashes), got {api_version!r}; known versions: "
                         f"{', '.join(KNOWN_API_VERSIONS)}")
    return api_version


def endpoint_key(endpoint: str) -> str:
    """One spelling of an endpoint, for comparing and keying: the scheme and host in lower
    case, the default port dropped, the path normalised without a trailing slash, an IP
    address in its usual form, and localhost, 127.0.0.1 and ::1 all written
    ``127.0.0.1``. Text that is not an http or https URL comes back stripped and otherwise
    as it was; never raises."""
    text = endpoint.strip()
    try:
        url = urlsplit(text)
        port = url.port
        host = url.hostname
    except ValueError:
        return text
    scheme = url.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not host:
        return text
    host = _host_key(host)
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        netloc += f":{port}"
    return f"{scheme}://{netloc}{_path_key(url.path)}"


def _path_key(path: str) -> str:
    """The path as RFC 3986 normalises it (a percent-encoded unreserved character as
    itself, other escapes in upper case, ``.`` and ``..`` segments resolved, as the
    client does before sending), without trailing slashes."""
    path = _ESCAPE.sub(_unescape, path)
    kept: list[str] = []
    for segment in path.split("/")[1:]:
        if segment == "..":
            if kept:
                kept.pop()
        elif segment != ".":
            kept.append(segment)
    return ("/" + "/".join(kept)).rstrip("/")


def _unescape(found: re.Match[str]) -> str:
    char = chr(int(found.group(1), 16))
    return char if char in _UNRESERVED else found.group(0).upper()


def _host_key(host: str) -> str:
    """The host's one spelling (``urlsplit`` has made it lower case, without brackets)."""
    name, _, zone = host.partition("%")
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        if _IPV4_FORMS.fullmatch(name):
            try:
                address = ipaddress.ip_address(socket.inet_aton(name))
            except OSError:
                return host.rstrip(".")
        else:
            name = name.rstrip(".")
            return _LOOPBACK if name in _LOOPBACK_NAMES else name
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address in (ipaddress.ip_address(_LOOPBACK), ipaddress.ip_address("::1")):
        return _LOOPBACK
    return f"{address.compressed}%{zone}" if zone and address.version == 6 else \
        address.compressed
