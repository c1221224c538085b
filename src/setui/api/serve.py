"""The agent's API, started and stopped: what ``setui agent`` calls, and no more.

It makes the socket (setui.api.socketfile), resolves who may approve on a thread (names
may ask the network), starts the server, and reads the approvers again on SIGHUP (only
them: the policy is read once, at start).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from setui.agent.trust import untrusted
from setui.api.codec import AgentInfo
from setui.api.peer import Authority
from setui.api.protocol import API_VERSION
from setui.api.queries import QueryThread
from setui.api.server import ApiServer
from setui.api.socketfile import BoundSocket, bind_socket
from setui.api.source import AgentSource
from setui.core.clock import utc_now
from setui.core.textsafe import printable
from setui.settings.config import Config, ConfigError, load_config

if TYPE_CHECKING:
    from setui.agent.agent import Agent
    from setui.monitor import MonitorUpdate

__all__ = ["Api", "open_socket", "start_api"]


@dataclass
class Api:
    """The running API: ``publish`` each update, ``aclose`` at the end."""

    server: ApiServer
    bound: BoundSocket

    def publish(self, update: MonitorUpdate) -> None:
        self.server.publish(update)

    async def aclose(self, waiting: str = "") -> None:
        """Stop serving; ``waiting``: what the agent waits for before it ends, told to
        every client as it goes."""
        with contextlib.suppress(NotImplementedError, RuntimeError, AttributeError):
            asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
        try:
            await self.server.aclose(waiting)
        finally:
            self.bound.remove()
            self.bound.sock.close()


def open_socket(path: Path, data_dir: Path) -> BoundSocket:
    """The socket made at ``path`` with the data directory's group, listening but not yet
    served (made early: a second agent is refused before it reads or writes anything).
    Blocking (it asks an old socket whether anyone answers); SocketError in words."""
    try:
        group: int | None = os.stat(data_dir).st_gid
    except OSError:
        group = None
    return bind_socket(path, group=group)


async def start_api(bound: BoundSocket, agent: Agent, *, config: Config,
                    config_file: Path | None, policy_path: Path | None,
                    store_problem: str | None, since: datetime | None,
                    say: Callable[[str], None]) -> Api:
    """Serve ``agent`` on ``bound`` (closed and removed if that fails). ``since``: when
    the agent took its lock."""
    path = bound.path
    store = agent.store
    info = AgentInfo(pid=os.getpid(), since=since or utc_now(), vm_name=agent.vm_name,
                     vm_id=agent.vm_id, endpoint=config.endpoint,
                     data_dir=str(store.path.parent) if store is not None else None,
                     policy=str(policy_path) if policy_path is not None else None,
                     dry_run=agent.dry_run)
    source = AgentSource(monitor=agent.monitor, agent=agent, client=agent.client,
                         store=store, info=info, host=socket.gethostname() or "unknown",
                         store_problem=store_problem)
    try:
        authority = await asyncio.to_thread(Authority, config.approvers)
        server = ApiServer(source, authority=authority, queries=QueryThread(
            store.path if store is not None else None, store_problem))
        await server.serve(bound.sock)
    except BaseException:
        bound.remove()
        bound.sock.close()
        raise
    if bound.note:
        say(f"setui agent: {bound.note}")
    for note in authority.notes:
        say(f"setui agent: approvers: {note}")
    say(f"setui agent: API (version {API_VERSION}) at {printable(str(path), 200)}; "
        f"may approve: {authority.describe()}")
    _reload_on_hangup(server, config_file, say)
    return Api(server, bound)


def _reload_on_hangup(server: ApiServer, config_file: Path | None,
                      say: Callable[[str], None]) -> None:
    def reload() -> Authority:
        # Held to the rule it was held to at start (setui.agent.trust), before it is read.
        return Authority(load_config(config_file, trust=untrusted).approvers)

    async def reloading() -> None:
        try:
            authority = await asyncio.to_thread(reload)
        except ConfigError as exc:
            say(f"setui agent: SIGHUP: the config is refused, so the agent keeps the one it "
                f"has and who may approve is unchanged: {exc}")
            return
        server.reload(authority)
        for note in authority.notes:
            say(f"setui agent: approvers: {note}")
        say(f"setui agent: SIGHUP: may approve: {authority.describe()}")

    with contextlib.suppress(NotImplementedError, RuntimeError, AttributeError):
        asyncio.get_running_loop().add_signal_handler(
            signal.SIGHUP, lambda: asyncio.ensure_future(reloading()))
