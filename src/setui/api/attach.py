"""Attach to the agent, or say why not: the first thing every front end does.

One poller, recorder and approver per VM: a front end (the dashboard, ``events``,
``approve``, ``history``, ``audit``, ``report``, ``replay``) that can reach the agent uses
its API and asks IMDS nothing itself; one that cannot runs standalone, as on a machine
without the agent, and says so.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from setui.api.attached import agent_words
from setui.api.client import DEFAULT_SOCKET, AgentClient, ApiError, Subscription
from setui.config import Config
from setui.core.clock import utc_now
from setui.core.health import ConnectionState, Health
from setui.core.timefmt import duration
from setui.textsafe import printable

__all__ = ["attach", "attached_words", "not_live", "socket_of"]


def attach(config: Config) -> tuple[AgentClient | None, str]:
    """The agent's API when its socket answers, else None; and the words for the status
    line: "attached to the agent (pid N, up 3d 02h)", or why this front end runs standalone.

    One poller, recorder and approver per VM: a front end that can reach the agent uses it
    and polls nothing itself. Standalone when told so (``--standalone``, ``standalone =
    true``), when nothing answers at the socket (no agent on this machine, or it is
    restarting), when this user may not reach it (not in its group), or when it speaks
    another version of the API: each said in words, never a traceback. Blocking (a connect
    and a hello, within a second): call it before the event loop, or on a thread."""
    if config.standalone:
        return None, "standalone (--standalone): polling IMDS itself"
    path = socket_of(config)
    try:
        client = AgentClient.connect(path)
    except ApiError as exc:
        return None, f"standalone: {exc.message.rstrip('.')}"
    return client, attached_words(client, utc_now())


def socket_of(config: Config) -> Path:
    """Where a front end looks for the agent: ``--socket``, ``socket =``, SETUI_SOCKET
    (config), else the service's default."""
    return config.socket or DEFAULT_SOCKET


def attached_words(client: AgentClient | Subscription, now: datetime) -> str:
    """What the status line says of the agent a front end is attached to, at ``now``."""
    return agent_words(client.hello.agent, now)


def not_live(health: Health, mono_now: float) -> str | None:
    """Why what the agent holds is not what the service says now, in words; None while its
    connection is live. A stale state is never shown as live (the health at ``mono_now``,
    the agent's ages carried on this process's clock)."""
    health = health.at(mono_now)
    if health.state is ConnectionState.LIVE:
        return None
    age = health.age(mono_now)
    seen = ("it has had no answer from IMDS yet" if age is None else
            f"its last good answer from IMDS was {duration(age)} ago")
    error = f" ({printable(health.last_error, 300)})" if health.last_error else ""
    return (f"the agent's connection is {health.state.value}{error}: {seen}, so this may "
            "not be what the service says now")
