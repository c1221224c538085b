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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from setui.api.peer import Authority
from setui.api.protocol import API_VERSION
from setui.api.queries import Queries
from setui.api.server import ApiServer
from setui.api.socketfile import BoundSocket, bind_socket
from setui.config import ConfigError, load_config
from setui.textsafe import printable

if TYPE_CHECKING:
    from setui.api.source import AgentSource
    from setui.monitor import MonitorUpdate

__all__ = ["Api", "open_socket", "start_api"]


@dataclass
class Api:
    """The running API: ``publish`` each update, ``aclose`` at the end."""

    server: ApiServer
    bound: BoundSocket

    def publish(self, update: MonitorUpdate) -> None:
        self.server.publish(update)

    async def aclose(self) -> None:
        with contextlib.suppress(NotImplementedError, RuntimeError, AttributeError):
            asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
        try:
            await self.server.aclose()
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


async def start_api(bound: BoundSocket, source: AgentSource, *,
                    approvers: tuple[str, ...] | None, config_file: Path | None,
                    db_path: Path | None, say: Callable[[str], None]) -> Api:
    """Serve the API on ``bound``; it is closed and removed if that fails."""
    path = bound.path
    try:
        authority = await asyncio.to_thread(Authority, approvers)
        server = ApiServer(source, authority=authority, queries=Queries(
            db_path, source.store_problem), say=say)
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
        return Authority(load_config(config_file).approvers)

    async def reloading() -> None:
        try:
            authority = await asyncio.to_thread(reload)
        except ConfigError as exc:
            say(f"setui agent: SIGHUP: the config is refused, so who may approve is "
                f"unchanged: {exc}")
            return
        server.reload(authority)
        for note in authority.notes:
            say(f"setui agent: approvers: {note}")
        say(f"setui agent: SIGHUP: may approve: {authority.describe()}")

    with contextlib.suppress(NotImplementedError, RuntimeError, AttributeError):
        asyncio.get_running_loop().add_signal_handler(
            signal.SIGHUP, lambda: asyncio.ensure_future(reloading()))
