"""What every front end sets up the same way: the client, the store, this VM's name."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from setui.config import Config

if TYPE_CHECKING:
    from setui.core.client import ImdsClient
    from setui.store import Store

__all__ = ["make_client", "open_store", "resolve_vm_name", "run_until_stopped"]


def make_client(config: Config) -> ImdsClient:
    from setui.core.client import ImdsClient

    return ImdsClient(config.endpoint, config.api_version)


def open_store(config: Config) -> tuple[Store | None, str | None]:
    """The store, or None and the reason in words: setui keeps working without one."""
    from setui.store import Store, StoreError

    try:
        return Store.open_dir(config.data_dir, history_days=config.history_days,
                              forward=config.audit_forward), None
    except StoreError as exc:
        return None, str(exc)


async def resolve_vm_name(client: ImdsClient, config: Config) -> str:
    """--vm-name / config, else the name IMDS gives, else the host name."""
    if config.vm_name:
        return config.vm_name
    name = await client.vm_name()
    return name or socket.gethostname()


def run_until_stopped(coro: Coroutine[Any, Any, int]) -> int:
    """Run a coroutine; SIGTERM (where there are signals) ends it as cleanly as Ctrl-C."""

    async def main() -> int:
        task = asyncio.ensure_future(coro)
        loop = asyncio.get_running_loop()
        try:
            import signal

            loop.add_signal_handler(signal.SIGTERM, task.cancel)
        except (ImportError, NotImplementedError, AttributeError, RuntimeError):
            pass  # Windows: Ctrl-C / Ctrl-Break still end the process
        try:
            return await task
        except asyncio.CancelledError:
            return 0

    return asyncio.run(main())
