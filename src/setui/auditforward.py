"""Audit records leave the VM as they are written: the journal, syslog, or a collector.

The hash chain proves nothing against someone who can write the data directory: they
can rewrite it whole. A copy that left the VM when each record was written is what
proves otherwise (``setui audit verify --against``). So every record, with its chain
hash, is also sent to one of:

* ``journal`` (``journal:PATH``): journald's native socket, ``/run/systemd/journal/socket``,
  with structured fields (``SETUI_EVENT_ID``, ``SETUI_ACTION``, ``SETUI_ACTOR``,
  ``SETUI_OUTCOME``, ``SETUI_HASH``, ...; ``SYSLOG_IDENTIFIER=setui``);
* ``syslog`` (``syslog:PATH``): the local syslog socket, ``/dev/log`` (RFC 3164 framing,
  the fields as ``key="value"`` in the message);
* ``udp://HOST:PORT`` or ``tcp://HOST:PORT``: an RFC 5424 collector, the fields as the
  structured data element ``[setui@32473 ...]`` (TCP with RFC 6587 octet counting);
* ``none``: nothing leaves.

The default, ``auto``, is the journal where journald runs, else syslog where there is a
socket for it, else nothing. Facility ``authpriv`` (the records name people and where
they came from); severity notice, warning for refusals and failures. Standard library
only (``socket``). A forward that fails never raises: the caller gets the reason, and
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

from setui.textsafe import printable

__all__ = ["JOURNAL_SOCKET", "SYSLOG_SOCKET", "Forwarder", "Target", "fields",
           "message", "parse_target", "rfc5424"]

JOURNAL_SOCKET = "/run/systemd/journal/socket"
SYSLOG_SOCKET = "/dev/log"
FACILITY = 10  # authpriv
NOTICE, WARNING = 5, 4
# The documentation enterprise number (RFC 5612): setui has none of its own.
SD_ID = "setui@32473"
TIMEOUT = 2.0  # seconds for a TCP collector to accept and take a record (after the commit)
_VALUE_LIMIT = 2000


@dataclass(frozen=True)
class Target:
    """Where records go: ``kind`` is journal, syslog, udp, tcp or none."""

    kind: str
    address: str = ""  # a socket path, or a host
    port: int = 0

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
        return Target("none")
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
    details = record.get("details") if isinstance(record.get("details"), dict) else {}
    notes = [f"{word} {details[key]}" for key, word in
             (("login_user", "login"), ("sudo_user", "sudo by"), ("session", "session"))
             if details.get(key) not in (None, "")]
    who = str(record.get("user") or "unknown")
    if notes:
        who += f" ({', '.join(str(n) for n in notes)})"
    if record.get("ssh_client"):
        who += f" from {record['ssh_client']}"
        if details.get("ssh_claimed"):
            who += " (claimed)"
    return f"{who} on {record.get('host') or 'unknown'}"


def _outcome(record: Mapping[str, Any]) -> str:
    action = record.get("action")
    if action == "approve-attempt":
        return "sent"
    if action == "approve-outcome":
        details = record.get("details") if isinstance(record.get("details"), dict) else {}
        if details.get("outcome") == "unknown":  # as the approver wrote it (setui.tries)
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
    """One line for people: ``setui audit record 3: approve-attempt EventId=... by ...``."""
    f = fields(record)
    return (f"setui audit record {f['SETUI_SEQ']}: {f['SETUI_ACTION']} EventId="
            f"{f['SETUI_EVENT_ID'] or '-'} by {f['SETUI_ACTOR']}: {f['SETUI_OUTCOME']} "
            f"(hash {f['SETUI_HASH']})")


def _sd_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("]", "\\]")


def _sd_name(key: str) -> str:
    return key.removeprefix("SETUI_").lower()


def _hostname() -> str:
    name = "".join(c for c in socket.gethostname() if 33 <= ord(c) <= 126)
    return name[:255] or "-"


def rfc5424(record: Mapping[str, Any]) -> bytes:
    """The record as one RFC 5424 message (UTF-8, no BOM: the text is escaped)."""
    sd = " ".join(f'{_sd_name(k)}="{_sd_escape(v)}"' for k, v in fields(record).items())
    stamp = str(record.get("time") or "-")
    header = (f"<{FACILITY * 8 + _severity(record)}>1 {stamp} {_hostname()} setui "
              f"{os.getpid()} audit")
    return f"{header} [{SD_ID} {sd}] {message(record)}".encode()


def _rfc3164(record: Mapping[str, Any]) -> bytes:
    try:
        moment = datetime.strptime(str(record.get("time")), "%Y-%m-%dT%H:%M:%S.%fZ")
        stamp = f"{moment:%b} {moment.day:2d} {moment:%H:%M:%S}"
    except ValueError:
        stamp = datetime.now().strftime("%b %d %H:%M:%S")
    sd = " ".join(f'{_sd_name(k)}="{_sd_escape(v)}"' for k, v in fields(record).items())
    return (f"<{FACILITY * 8 + _severity(record)}>{stamp} setui[{os.getpid()}]: "
            f"{message(record)} [{SD_ID} {sd}]").encode()


def _journal(record: Mapping[str, Any]) -> bytes:
    """journald's native protocol: ``KEY=value`` lines, the binary form for a value with a
    newline (the escaped text has none, but an unescaped one must not break framing)."""
    out = bytearray()
    values = {"MESSAGE": message(record), "PRIORITY": str(_severity(record)),
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
        return self.target.kind != "none"

    def send(self, records: Sequence[Mapping[str, Any]]) -> str | None:
        """Send each record (``AuditRecord.to_json()``); the reason in words if any did not
        leave, else None."""
        if not self.enabled or not records:
            return None
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
