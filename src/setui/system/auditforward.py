"""Audit records leave the VM as they are written: the journal, syslog, or a collector.

The hash chain proves nothing against someone who can write the data directory: they
can rewrite it whole. A copy that left the VM when each record was written is what
proves otherwise (``setui audit verify --against``). So every record, with its chain
hash, is also sent to one of:

* ``journal`` (``journal:PATH``): journald's native socket, ``/run/systemd/journal/socket``,
  with structured fields (``SETUI_EVENT_ID``, ``SETUI_ACTION``, ``SETUI_ACTOR``,
  ``SETUI_OUTCOME``, ``SETUI_HASH``, ...; ``SYSLOG_IDENTIFIER=setui``);
* ``syslog`` (``syslog:PATH``): the local syslog socket, ``/dev/log`` (RFC 3164 framing,
  the structured data element at the start of the message);
* ``udp://HOST:PORT`` or ``tcp://HOST:PORT``: an RFC 5424 collector, the fields as the
  structured data element ``[setui@32473 ...]`` (TCP with RFC 6587 octet counting);
* ``none``: nothing leaves.

The default, ``auto``, is the journal where journald runs, else syslog where there is a
socket for it, else nothing: then each record is marked as not forwarded, with
:data:`NOWHERE` as the reason, so nobody takes a log with no copy for one that has one.

Every form sends the structured data element first and then a message for people (see
:func:`structured` and :func:`message`). Facility ``authpriv`` (the records name people
and where they came from); severity notice, warning for refusals and failures. Standard
library only (``socket``). A forward that fails never raises: the caller gets the reason, and
the store records it, so ``setui audit`` says which records did not leave.
"""

from __future__ import annotations

import os
import socket
import stat
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from setui.core.textsafe import printable
from setui.system.actor import describe_actor

__all__ = ["JOURNAL_SOCKET", "NOWHERE", "SD_ID", "SYSLOG_SOCKET", "Forwarder", "Target", "fields",
           "message", "parse_target", "rfc5424", "structured"]

JOURNAL_SOCKET = "/run/systemd/journal/socket"
SYSLOG_SOCKET = "/dev/log"
FACILITY = 10  # authpriv
NOTICE, WARNING = 5, 4
# The documentation enterprise number (RFC 5612): setui has none of its own.
SD_ID = "setui@32473"
TIMEOUT = 2.0  # seconds for a TCP collector to accept and take a record (after the commit)
_VALUE_LIMIT = 2000
# Why a record did not leave when auto found neither socket: said by approve, audit and
# audit verify, and kept with each record so written.
NOWHERE = "no copy leaves this VM (no journald, no /dev/log): set audit-forward"


@dataclass(frozen=True)
class Target:
    """Where records go: ``kind`` is journal, syslog, udp, tcp or none."""

    kind: str
    address: str = ""  # a socket path, or a host
    port: int = 0
    nowhere: bool = False  # none because auto found nothing, not because it was asked

    def __str__(self) -> str:
        if self.kind in ("udp", "tcp"):
            host = f"[{self.address}]" if ":" in self.address else self.address
            return f"{self.kind}://{host}:{self.port}"
        if self.kind in ("journal", "syslog"):
            return f"{self.kind}:{self.address}"
        return "none"


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def parse_target(text: str | None) -> Target:
    """A setting (``auto``, ``none``, ``journal[:PATH]``, ``syslog[:PATH]``,
    ``udp://HOST:PORT``, ``tcp://HOST:PORT``) as a Target; ValueError in words."""
    value = (text or "auto").strip()
    low = value.lower()
    if low in ("none", "off", "false", "no"):
        return Target("none")
    if low == "auto":
        if _is_socket(JOURNAL_SOCKET):
            return Target("journal", JOURNAL_SOCKET)
        if _is_socket(SYSLOG_SOCKET):
            return Target("syslog", SYSLOG_SOCKET)
        return Target("none", nowhere=True)
    for kind, default in (("journal", JOURNAL_SOCKET), ("syslog", SYSLOG_SOCKET)):
        if low == kind:
            return Target(kind, default)
        if low.startswith(kind + ":") and not low.startswith(kind + "://"):
            path = value[len(kind) + 1:]
            if not path.startswith("/"):
                raise ValueError(f"audit-forward {printable(value, 80)}: {kind}: takes an "
                                 "absolute socket path")
            return Target(kind, path)
    if low.startswith(("udp://", "tcp://")):
        parts = urlsplit(value)
        try:
            port = parts.port
        except ValueError:
            port = None
        if not parts.hostname or port is None or not 0 < port < 65536 \
                or parts.path not in ("", "/") or parts.query or parts.username:
            raise ValueError(f"audit-forward {printable(value, 80)}: write "
                             f"{parts.scheme}://HOST:PORT (a port from 1 to 65535)")
        return Target(parts.scheme.lower(), parts.hostname, port)
    raise ValueError(f"audit-forward {printable(value, 80)} is not one of: auto, none, "
                     "journal, syslog, udp://HOST:PORT, tcp://HOST:PORT")


# -- what a record says -------------------------------------------------------------------
def _text(value: Any) -> str:
    return printable("" if value is None else str(value), _VALUE_LIMIT)


def _actor(record: Mapping[str, Any]) -> str:
    details = record.get("details")
    return describe_actor(str(record.get("user") or ""), record.get("ssh_client"),
                          str(record.get("host") or ""),
                          details if isinstance(details, dict) else {})


def _outcome(record: Mapping[str, Any]) -> str:
    action = record.get("action")
    if action == "approve-attempt":
        return "sent"
    if action == "approve-outcome":
        details = record.get("details")
        if not isinstance(details, dict):
            details = {}
        if details.get("outcome") == "unknown":  # as the approver wrote it (setui.approval.tries)
            return str(record.get("error") or "outcome unknown")
        if record.get("error"):
            return f"failed: {record['error']}"
        return f"accepted: HTTP {record.get('status')}"
    if action == "refused":
        return f"refused: {record.get('error') or 'no reason'}"
    return str(action or "")


def _severity(record: Mapping[str, Any]) -> int:
    bad = record.get("action") == "refused" or (
        record.get("action") == "approve-outcome" and record.get("error"))
    return WARNING if bad else NOTICE


def fields(record: Mapping[str, Any]) -> dict[str, str]:
    """The structured fields of one record (``record``: AuditRecord.to_json())."""
    return {
        "SETUI_SEQ": _text(record.get("seq")),
        "SETUI_TIME": _text(record.get("time")),
        "SETUI_EVENT_ID": _text(record.get("event_id")),
        "SETUI_ACTION": _text(record.get("action")),
        "SETUI_ACTOR": _text(_actor(record)),
        "SETUI_OUTCOME": _text(_outcome(record)),
        "SETUI_INCARNATION": _text(record.get("incarnation")),
        "SETUI_ENDPOINT": _text(record.get("endpoint")),
        "SETUI_PREV_HASH": _text(record.get("prev_hash")),
        "SETUI_HASH": _text(record.get("hash")),
    }


def message(record: Mapping[str, Any]) -> str:
    """One line for people: ``setui audit record 3: approve-attempt EventId=... by ...``.

    Never read back (``--against`` reads the structured part only), and it holds no ``[``
    or ``]`` (written ``\\x5b``, ``\\x5d``), so no EventId, SSH client or error text in
    it can look like the structured data element or its end, even where a collector kept
    the message alone."""
    f = fields(record)
    text = (f"setui audit record {f['SETUI_SEQ']}: {f['SETUI_ACTION']} EventId="
            f"{f['SETUI_EVENT_ID'] or '-'} by {f['SETUI_ACTOR']}: {f['SETUI_OUTCOME']} "
            f"(hash {f['SETUI_HASH']})")
    return text.replace("[", "\\x5b").replace("]", "\\x5d")


def _sd_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("]", "\\]")


def structured(record: Mapping[str, Any]) -> str:
    """The fields as one RFC 5424 structured data element, ``[setui@32473 seq="3" ...]``,
    each value escaped as RFC 5424 says (``\\``, ``"``, ``]``): nothing in a value can
    end it or add a field. Every form sends it first, before any free text, so the first
    ``[setui@32473 `` on a collector's line is setui's own."""
    params = " ".join(f'{key.removeprefix("SETUI_").lower()}="{_sd_escape(value)}"'
                      for key, value in fields(record).items())
    return f"[{SD_ID} {params}]"


def _line(record: Mapping[str, Any]) -> str:
    """What follows the header in every form: the structured data, then the message."""
    return f"{structured(record)} {message(record)}"


def _hostname() -> str:
    name = "".join(c for c in socket.gethostname() if 33 <= ord(c) <= 126)
    return name[:255] or "-"


def rfc5424(record: Mapping[str, Any]) -> bytes:
    """The record as one RFC 5424 message (UTF-8, no BOM: the text is escaped)."""
    stamp = str(record.get("time") or "-")
    header = (f"<{FACILITY * 8 + _severity(record)}>1 {stamp} {_hostname()} setui "
              f"{os.getpid()} audit")
    return f"{header} {_line(record)}".encode()


def _rfc3164(record: Mapping[str, Any]) -> bytes:
    """RFC 3164, which has no structured data of its own: the element starts the message,
    so a syslog daemon's file and Log Analytics' ``SyslogMessage`` keep it first."""
    try:
        moment = datetime.strptime(str(record.get("time")), "%Y-%m-%dT%H:%M:%S.%fZ")
        stamp = f"{moment:%b} {moment.day:2d} {moment:%H:%M:%S}"
    except ValueError:
        stamp = datetime.now().strftime("%b %d %H:%M:%S")
    return (f"<{FACILITY * 8 + _severity(record)}>{stamp} setui[{os.getpid()}]: "
            f"{_line(record)}").encode()


def _journal(record: Mapping[str, Any]) -> bytes:
    """journald's native protocol: ``KEY=value`` lines, the binary form for a value with a
    newline (the escaped text has none, but an unescaped one must not break framing).
    The message carries the structured data too: journald passes only the message on to
    syslog, and so to Log Analytics."""
    out = bytearray()
    values = {"MESSAGE": _line(record), "PRIORITY": str(_severity(record)),
              "SYSLOG_FACILITY": str(FACILITY), "SYSLOG_IDENTIFIER": "setui",
              **fields(record)}
    for key, value in values.items():
        data = value.encode()
        if b"\n" in data:
            out += key.encode() + b"\n" + struct.pack("<Q", len(data)) + data + b"\n"
        else:
            out += key.encode() + b"=" + data + b"\n"
    return bytes(out)


# -- sending --------------------------------------------------------------------------------
class Forwarder:
    """Sends records to one Target; :meth:`send` returns why it failed, never raises."""

    def __init__(self, target: Target, *, timeout: float = TIMEOUT) -> None:
        self.target = target
        self.timeout = timeout

    @classmethod
    def from_setting(cls, text: str | None) -> Forwarder:
        return cls(parse_target(text))

    @property
    def enabled(self) -> bool:
        """Whether records are meant to leave: false only when told ``none``."""
        return self.target.kind != "none" or self.target.nowhere

    def send(self, records: Sequence[Mapping[str, Any]]) -> str | None:
        """Send each record (``AuditRecord.to_json()``); the reason in words if any did not
        leave, else None."""
        if not self.enabled or not records:
            return None
        if self.target.nowhere:
            return NOWHERE
        try:
            kind = self.target.kind
            if kind == "journal":
                self._unix([_journal(r) for r in records])
            elif kind == "syslog":
                self._unix([_rfc3164(r) for r in records])
            elif kind == "udp":
                self._udp([rfc5424(r) for r in records])
            else:
                self._tcp([rfc5424(r) for r in records])
        except (OSError, UnicodeError, ValueError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            return f"cannot send to {self.target}: {reason}"
        return None

    def _unix(self, datagrams: list[bytes]) -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.settimeout(self.timeout)
            for datagram in datagrams:
                sock.sendto(datagram, self.target.address)

    def _udp(self, datagrams: list[bytes]) -> None:
        info = socket.getaddrinfo(self.target.address, self.target.port,
                                  type=socket.SOCK_DGRAM)[0]
        with socket.socket(info[0], socket.SOCK_DGRAM) as sock:
            sock.settimeout(self.timeout)
            for datagram in datagrams:
                sock.sendto(datagram, info[4])

    def _tcp(self, messages: list[bytes]) -> None:
        payload = b"".join(str(len(m)).encode("ascii") + b" " + m for m in messages)
        with socket.create_connection((self.target.address, self.target.port),
                                      timeout=self.timeout) as sock:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
