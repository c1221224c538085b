"""Whether a host name or address is this machine's loopback: the one place that says so.

Strict on purpose, because secrets ride on the answer (a Prometheus token over plain
http) and the emulator's warning about listening beyond this machine: ``localhost`` and
loopback addresses (IPv4-mapped ones too), nothing a resolver could send elsewhere.
"""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback"]


def is_loopback(host: str) -> bool:
    """``localhost``, ``127.0.0.0/8`` or ``::1`` (brackets, case and a final dot aside)."""
    name = host.strip().strip("[]").rstrip(".").lower()
    if name == "localhost":
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback
