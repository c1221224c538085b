"""What every front end sets up the same way: the client, the store, this VM's name and
id."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from setui.core.backoff import Backoff
from setui.core.textsafe import printable
from setui.core.vmid import vm_id_of
from setui.settings.config import Config

if TYPE_CHECKING:
    from setui.core.client import ImdsClient
    from setui.store import Store

__all__ = ["ONE_SHOT_TRIES", "ThisVm", "make_client", "open_store", "run_until_stopped",
           "until_answered"]

_T = TypeVar("_T")
MAX_PAUSE = 60.0  # seconds, at most, between two questions to IMDS about this VM

# How often a command that answers once (events, approve) asks IMDS for the name before
# it goes on without it; the long-running ones ask until they know.
ONE_SHOT_TRIES = 3


def make_client(config: Config) -> ImdsClient:
    from setui.core.client import ImdsClient

    return ImdsClient(config.endpoint, config.api_version)


def open_store(config: Config, *, or_read: bool = False) -> tuple[Store | None, str | None]:
    """The store, or None and the reason in words: setui keeps working without one.

    ``or_read``: a store this user may read but not write (another's that lets it read)
    is opened to read, with the reason it is not written: a dashboard then shows that
    history and records nothing of its own beside it (its approvals are refused, in those
    words). The agent's store is root's alone: anyone else is told so, and how to read it
    (through the agent); a standalone front end of theirs keeps a store of its own."""
    from setui.store import ReadOnlyStore, Store, StoreError

    try:
        return Store.open_dir(config.data_dir, history_days=config.history_days,
                              forward=config.audit_forward), None
    except ReadOnlyStore as exc:
        if not or_read:
            return None, str(exc)
        try:
            return Store.open_dir(config.data_dir, readonly=True,
                                  forward=config.audit_forward), str(exc)
        except StoreError as again:
            return None, f"{exc}; and it cannot be read either: {again}"
    except StoreError as exc:
        return None, str(exc)


class ThisVm:
    """This VM's name as the events' Resources spell it, and where it came from.

    Given (``--vm-name``, ``vm-name``) or learned from IMDS, never guessed: on a scale set
    the host name is not the instance name, and a guess would make every "this VM" test
    miss for the life of the process. Until it is known, ``name`` is None and every front
    end says "not known" rather than pretend.

    ``vm_id``, this VM's vmId, is only ever learned (compute metadata): it keys the claims
    and holds (setui.store.vmkeys), and until it is known they fall back to the endpoint.
    """

    def __init__(self, given: str | None) -> None:
        self.name: str | None = given or None
        self.source: str | None = "--vm-name / vm-name" if self.name else None
        self.vm_id: str | None = None

    def __str__(self) -> str:
        if self.name is None:
            return "this VM's name is not known (IMDS did not give it; --vm-name sets it)"
        return f"this VM is {printable(self.name, 80)}, from {self.source}"

    async def learn(self, client: ImdsClient, *, tries: int | None = None,
                    on_miss: Callable[[], None] | None = None,
                    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
                    ) -> str | None:
        """Ask IMDS until it names this VM (see :func:`until_answered`); the name, or None
        when it is still not known."""
        if self.name is None:
            name = await until_answered(client.vm_name, tries=tries, on_miss=on_miss,
                                        sleep=sleep)
            if name:
                self.name, self.source = name, "IMDS"
        return self.name

    async def learn_id(self, client: ImdsClient, *, tries: int | None = None,
                       sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
                       ) -> str | None:
        """Ask IMDS for the compute metadata until it answers (see :func:`until_answered`);
        this VM's vmId, or None when it is not known (no answer within ``tries``, or an
        answer without one)."""
        if self.vm_id is None:
            self.vm_id = vm_id_of(await until_answered(client.compute, tries=tries,
                                                       sleep=sleep))
        return self.vm_id


async def until_answered(ask: Callable[[], Awaitable[_T | None]], *, tries: int | None = None,
                         on_miss: Callable[[], None] | None = None,
                         sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
                         ) -> _T | None:
    """``ask()`` again, with a longer pause after each None (up to a minute, jittered so
    that a fleet does not ask in step), until it answers; ``tries``: give up after that
    many. ``on_miss`` hears of the first None."""
    pause = Backoff(base=0.5, cap=MAX_PAUSE)
    attempt = 0
    while (answer := await ask()) is None:
        attempt += 1
        if attempt == 1 and on_miss is not None:
            on_miss()
        if tries is not None and attempt >= tries:
            break
        await sleep(pause.delay(attempt))
    return answer


def run_until_stopped(coro: Coroutine[Any, Any, int]) -> int:
    """Run a coroutine; SIGTERM (where there are signals) ends it as cleanly as Ctrl-C.
    Once: a second SIGTERM while it stops would cut its cleanup short (the agent waiting
    for a hook, the last writes); systemd's SIGKILL after TimeoutStopSec= is the bound."""

    async def main() -> int:
        task = asyncio.ensure_future(coro)
        loop = asyncio.get_running_loop()
        stopping: list[bool] = []

        def stop() -> None:
            if not stopping:
                stopping.append(True)
                task.cancel()

        try:
            import signal

            loop.add_signal_handler(signal.SIGTERM, stop)
        except (ImportError, NotImplementedError, AttributeError, RuntimeError):
            pass  # Windows: Ctrl-C / Ctrl-Break still end the process
        try:
            return await task
        except asyncio.CancelledError:
            return 0

    return asyncio.run(main())
