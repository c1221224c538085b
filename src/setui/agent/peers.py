"""Who a connection to the agent's HTTP endpoints comes from: the unit one client's share
of the server is counted in (agent.scrape).

Across the network a client is its address: the load balancer's probe comes from
168.63.129.16, a scraper from its own VM, another VM of the network from its own, and a
user of this VM who connects to the VNet address the probe is bound to comes from this
VM's own address. An IPv6 client is its /64, the block one host is usually given.

On loopback every local user shares an address; there the kernel's word on the user who
owns the other end tells them apart: one exact lookup of that socket through netlink's
sock_diag (what ``ss`` uses; no privilege needed, a few microseconds). Where netlink is
not allowed (the agent's unit restricts its address families to AF_UNIX, AF_INET and
AF_INET6) or the other end is gone, a local client is its address alone. Not from
``/proc/net/tcp``: the kernel writes that table by walking every socket of the network
namespace (8 to 14 ms on this project's 2-core machine), a cost per connection that
another user could raise at will.
"""

from __future__ import annotations

import ipaddress
import socket
import struct

__all__ = ["Client", "client_of", "owner"]

# A client: its address (an IPv6 one cut to its /64), and for a client on this host the
# uid owning the other end (None when not known or not local).
Client = tuple[str, int | None]

_SOCK_DIAG = 4  # NETLINK_SOCK_DIAG
_BY_FAMILY = 20  # SOCK_DIAG_BY_FAMILY
_REQUEST = 1  # NLM_F_REQUEST
_ERROR = 2  # NLMSG_ERROR
_HEADER = struct.Struct("=IHHII")  # nlmsghdr
_REQ = struct.Struct("=BBBBI")  # inet_diag_req_v2 up to its socket id
_ID = struct.Struct(">HH16s16s")  # inet_diag_sockid: ports and addresses, network order
_TAIL = struct.Struct("=III")  # the id's interface, and its cookie (none: all ones)
_UID_AT = _HEADER.size + 64  # inet_diag_msg: 4 bytes, the id (48), 3 words, then uid
_NO_COOKIE = 0xFFFFFFFF
_BODY = _REQ.size + _ID.size + _TAIL.size
_MAPPED = bytes(10) + b"\xff\xff"  # ::ffff:0:0/96, IPv4 in IPv6


def _packed(host: str) -> bytes:
    """An address as 4 bytes (IPv4, or IPv4 mapped in IPv6) or 16 (IPv6); ValueError if
    it is not one."""
    try:
        return socket.inet_pton(socket.AF_INET, host)
    except OSError:
        pass
    try:
        raw = socket.inet_pton(socket.AF_INET6, host.split("%")[0])
    except OSError as exc:
        raise ValueError(host) from exc
    return raw[12:] if raw.startswith(_MAPPED) else raw


def _requests(peer: tuple[str, int], mine: tuple[str, int]) -> list[bytes]:
    """A sock_diag request for each family the other end's socket may be of (its source:
    ``peer``; its destination: ``mine``): an IPv4 one, or an IPv6 one mapping IPv4."""
    a, b = _packed(peer[0]), _packed(mine[0])
    if len(a) == len(b) == 4:
        found = [(socket.AF_INET, a + bytes(12), b + bytes(12)),
                 (socket.AF_INET6, _MAPPED + a, _MAPPED + b)]
    else:
        found = [(socket.AF_INET6, _MAPPED + a if len(a) == 4 else a,
                  _MAPPED + b if len(b) == 4 else b)]
    return [_HEADER.pack(_HEADER.size + _BODY, _BY_FAMILY, _REQUEST, 0, 0)
            + _REQ.pack(family, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF)
            + _ID.pack(peer[1], mine[1], source, destination)
            + _TAIL.pack(0, _NO_COOKIE, _NO_COOKIE)
            for family, source, destination in found]


class _Asking:
    """One netlink socket kept for the lookups (one descriptor, made at the first)."""

    sock: socket.socket | None = None
    refused = False  # netlink is not allowed here: not tried again
    seq = 0  # of the last request: its answer carries it


def owner(peer: tuple[str, int], mine: tuple[str, int]) -> int | None:
    """The uid owning the socket at ``peer`` connected to ``mine`` (both on this host), as
    the kernel says; None when it cannot be asked or does not know it."""
    if _Asking.refused or not hasattr(socket, "AF_NETLINK"):
        return None
    try:
        requests = _requests(peer, mine)
    except ValueError:
        return None
    asking = _Asking.sock
    if asking is None:
        try:
            asking = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _SOCK_DIAG)
        except OSError:
            _Asking.refused = True
            return None
        asking.setblocking(False)  # the kernel answers within the send, or not at all
        _Asking.sock = asking
    for request in requests:
        _Asking.seq = (_Asking.seq + 1) & 0xFFFFFFFF
        try:
            asking.send(request[:8] + struct.pack("=I", _Asking.seq) + request[12:])
            for _ in range(8):  # an answer left of an earlier lookup is not this one's
                answer = asking.recv(8192)
                if len(answer) >= _HEADER.size and _HEADER.unpack_from(answer)[3] == \
                        _Asking.seq:
                    break
            else:
                return None
        except OSError:
            return None
        if len(answer) >= _UID_AT + 4 and _HEADER.unpack_from(answer)[1] != _ERROR:
            return int(struct.unpack_from("=I", answer, _UID_AT)[0])
    return None


def client_of(conn: socket.socket) -> Client:
    """The client ``conn`` (just accepted) counts for."""
    try:
        peer = conn.getpeername()
        mine = conn.getsockname()
        host, port = str(peer[0]), int(peer[1])
        raw, ours = _packed(host), _packed(str(mine[0]))
    except (OSError, ValueError, IndexError, TypeError):
        return ("", None)
    if len(raw) == 4:
        key = socket.inet_ntop(socket.AF_INET, raw)
        local = raw[0] == 127
    else:
        key = str(ipaddress.IPv6Network((raw[:8] + bytes(8), 64)).network_address)
        local = raw == bytes(15) + b"\x01"
    if not local and ours != raw:
        return (key, None)
    return (key, owner((host, port), (str(mine[0]), int(mine[1]))))
