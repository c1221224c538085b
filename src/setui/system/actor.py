"""How an actor is written: the one sentence for who did something.

The confirmation dialog shows it before an approval, ``setui audit`` lists it, the event's
story tells it and the copy forwarded off the VM carries it: an auditor comparing them
must find the same words, so there is one function and every one of them calls it. It sits
below the store, the identity and the forwarder, which all need it, and needs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["describe_actor"]


def describe_actor(user: str, ssh_client: str | None, host: str,
                   details: Mapping[str, Any]) -> str:
    """``root (login alice, sudo by alice, session 7) from 10.1.2.3 (claimed) on vm-web-0``.

    ``details`` is an audit record's (identity.Identity.details()): a login that is the
    account itself adds nothing. The caller escapes what it prints."""
    notes = []
    login = details.get("login_user")
    if login not in (None, "") and login != user:
        notes.append(f"login {login}")
    if details.get("sudo_user") not in (None, ""):
        notes.append(f"sudo by {details['sudo_user']}")
    if details.get("session") not in (None, ""):
        notes.append(f"session {details['session']}")
    who = user or "unknown"
    if notes:
        who += f" ({', '.join(notes)})"
    if ssh_client:
        who += f" from {ssh_client}" + (" (claimed)" if details.get("ssh_claimed") else "")
    return f"{who} on {host or 'unknown'}"
