"""Attach to the agent, or say why not: the first thing every front end does.

One poller, recorder and approver per VM: a front end (the dashboard, ``events``,
``approve``, ``history``, ``audit``, ``report``, ``replay``) that can reach the agent uses
its API and asks IMDS nothing itself; one that cannot runs standalone, as on a machine
without the agent, and says so.

Nothing approves around the agent without being told to: where it should answer (a
socket given on purpose, or the agent installed as the service) and does not, reading
goes on standalone, said in a line, but approving is refused with what to do
(:attr:`Reach.around`), unless ``--standalone`` was given.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from setui.api.attached import agent_words
from setui.api.client import DEFAULT_SOCKET, AgentClient, ApiError, NotASocket, Subscription
from setui.core.clock import utc_now
from setui.core.health import ConnectionState, Health
from setui.core.textsafe import printable
from setui.core.timefmt import duration
from setui.settings.config import Config

__all__ = ["GIVEN", "Reach", "attach", "attached_words", "not_live", "reach", "socket_of"]

# Where a socket given on purpose comes from: said beside a path that does not answer.
GIVEN = "the socket named by --socket, SETUI_SOCKET or socket = in the config"
_STANDALONE = "--standalone approves from this process, outside the agent's approvers and audit log"


@dataclass(frozen=True)
class Reach:
    """What a front end found where the agent should answer (see :func:`reach`)."""

    client: AgentClient | None
    words: str  # the status line's: "attached to the agent (...)", or why standalone
    told: bool = False  # standalone because told so: it did not look
    given: bool = False  # the socket was named on purpose, not the service's default
    service: Path | None = None  # what shows the agent is installed as this VM's service
    wrong: bool = False  # the socket given is not there, or is not a socket: fix the setting
    why: str = ""  # why it was not reached, in the client's words

    @property
    def line(self) -> str | None:
        """What a read-only command says of it, in one line, running standalone where
        the agent should have answered; None when there is nothing to say."""
        if self.client is not None or self.told:
            return None
        return self.words if self.given or self.service is not None else None

    @property
    def around(self) -> str | None:
        """Why approving from here, standalone, would go around the agent, and what to do
        instead; None when it would not: attached, told to run standalone, or no agent
        on this machine (none installed, no socket given)."""
        if self.client is not None or self.told:
            return None
        why = self.why.rstrip(".")
        if self.given:
            return (f"{why}. Approving goes through the agent at the socket "
                    f"given: name the one it answers on; {_STANDALONE}.")
        if self.service is not None:
            return (f"the agent is installed as this VM's service "
                    f"({printable(str(self.service), 200)}) and cannot be reached: {why}. "
                    "Approving from here would go around it: start it (systemctl start "
                    f"setui-agent) or ask who runs this VM; {_STANDALONE}.")
        return None


def reach(config: Config, *, default: Path = DEFAULT_SOCKET,
          service: Path | None = None) -> Reach:
    """The agent's API when its socket answers, else why not, and what that means for
    approving (:attr:`Reach.around`) and for reading (:attr:`Reach.line`). ``default``:
    where the service's agent answers; ``service``: what shows it is installed here
    (setui.install.layout), None when it is not. Blocking (a connect and a hello, within
    a second): call it before the event loop, or on a thread."""
    path = socket_of(config, default)
    given = config.socket is not None
    if config.standalone:
        return Reach(None, "standalone (--standalone): polling IMDS itself", told=True,
                     given=given, service=service)
    try:
        client = AgentClient.connect(path)
    except ApiError as exc:
        why = exc.message.rstrip(".")
        missing = not _there(path)
        if given and missing:
            why += f": nothing is there ({GIVEN})"
        words = f"standalone: {why}"
        if not given and service is not None:
            words += (", though the agent is installed as this VM's service "
                      f"({printable(str(service), 200)})")
        return Reach(None, words, given=given, service=service, why=why,
                     wrong=given and (missing or isinstance(exc, NotASocket)))
    return Reach(client, attached_words(client, utc_now()), given=given, service=service)


def attach(config: Config) -> tuple[AgentClient | None, str]:
    """The agent's API when its socket answers, else None; and the words for the status
    line: "attached to the agent (pid N, up 3d 02h)", or why this front end runs standalone.

    One poller, recorder and approver per VM: a front end that can reach the agent uses it
    and polls nothing itself. Standalone when told so (``--standalone``, ``standalone =
    true``), when nothing answers at the socket (no agent on this machine, or it is
    restarting), when this user may not reach it (not in its group), or when it speaks
    another version of the API: each said in words, never a traceback. Blocking (a connect
    and a hello, within a second): call it before the event loop, or on a thread."""
    found = reach(config)
    return found.client, found.words


def socket_of(config: Config, default: Path = DEFAULT_SOCKET) -> Path:
    """Where a front end looks for the agent: ``--socket``, ``socket =``, SETUI_SOCKET
    (config), else the service's default."""
    return config.socket or default


def _there(path: Path) -> bool:
    """Whether anything is at ``path``, or would be but this user may not look."""
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:  # the directory keeps this user out: something of the agent's
        return True
    return True


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
