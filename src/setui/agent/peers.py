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
namespace, about 10 ms on a quiet 2-core VM, a cost per connection that another user
could raise at will.
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


def _requests(peer: tuple[str, int], mine: tuple[str, int]) -> list[bytes]:
    """A sock_diag request for each family the other end's socket may be of (its source:
    ``peer``; its destination: ``mine``)."""
    found: list[tuple[int, bytes, bytes]] = []
    a = ipaddress.ip_address(peer[0].split("%")[0])
    b = ipaddress.ip_address(mine[0].split("%")[0])
    a4 = a.ipv4_mapped if isinstance(a, ipaddress.IPv6Address) else a
    b4 = b.ipv4_mapped if isinstance(b, ipaddress.IPv6Address) else b
    if a4 is not None and b4 is not None:  # an IPv4 socket, or an IPv6 one mapping it
        found.append((socket.AF_INET, a4.packed.ljust(16, b"\0"), b4.packed.ljust(16, b"\0")))
        found.append((socket.AF_INET6, ipaddress.IPv6Address(f"::ffff:{a4}").packed,
                      ipaddress.IPv6Address(f"::ffff:{b4}").packed))
    else:
        found.append((socket.AF_INET6, a.packed.rjust(16, b"\0"), b.packed.rjust(16, b"\0")))
    requests = []
    for family, source, destination in found:
        body = (_REQ.pack(family, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF)
                + _ID.pack(peer[1], mine[1], source, destination)
                + _TAIL.pack(0, _NO_COOKIE, _NO_COOKIE))
        requests.append(_HEADER.pack(_HEADER.size + len(body), _BY_FAMILY, _REQUEST, 1, 0)
                        + body)
    return requests


class _Asking:
    """One netlink socket kept for the lookups (one descriptor, made at the first)."""

    sock: socket.socket | None = None
    refused = False  # netlink is not allowed here: not tried again


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
        try:
            while True:  # anything left of an earlier lookup is not this one's answer
                asking.recv(8192)
        except OSError:
            pass
        try:
            asking.send(request)
            answer = asking.recv(8192)
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
        address = ipaddress.ip_address(str(peer[0]).split("%")[0])
    except (OSError, ValueError, IndexError, TypeError):
        return ("", None)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if isinstance(address, ipaddress.IPv6Address):
        key = str(ipaddress.IPv6Network((address, 64), strict=False).network_address)
    else:
        key = str(address)
    if not (address.is_loopback or str(peer[0]) == str(mine[0])):
        return (key, None)
    return (key, owner((str(peer[0]), int(peer[1])), (str(mine[0]), int(mine[1]))))
