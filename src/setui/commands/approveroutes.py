"""The two routes ``setui approve`` takes: standalone (this process reads IMDS, approves
through the Approver and keeps its own audit log and history) or attached (the agent reads,
approves and records; this process asks IMDS nothing and writes no store). Each reads the
document, tells this VM's name, names the record that resolves a typed id, keeps what it
should, and says what an interruption leaves; the command's dialogue (setui.commands.approve)
is one, whichever route.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import IO, TYPE_CHECKING

from setui.commands.common import agent_vm
from setui.core.clock import ServiceClock
from setui.core.errors import ImdsError
from setui.core.model import Document
from setui.session import ONE_SHOT_TRIES, ThisVm

if TYPE_CHECKING:  # sqlite3 and httpx load only when approving, not for `setui --version`
    from setui.api.approving import AgentApprover
    from setui.api.client import AgentClient
    from setui.approval.approver import Approver
    from setui.core.client import ImdsClient
    from setui.store import Store
    from setui.store.reading import Record

__all__ = ["AttachedRoute", "Route", "StandaloneRoute", "attached"]


class StandaloneRoute:
    """This process reads IMDS, keeps the audit log in its own store (the history too)
    and approves through the Approver."""

    def __init__(self, client: ImdsClient, store: Store | None, approver: Approver,
                 wall: Callable[[], datetime]) -> None:
        self.client = client
        self.store = store
        self.approver = approver
        # "In 15 min" is counted on the service's clock (its Date header): NotBefore is
        # its time, and this VM's clock may be off. The history and the audit log are
        # written in the same clock, as every other front end writes them.
        self.clock = ServiceClock(wall=wall)
        approver.wall = self.clock.now

    @property
    def endpoint(self) -> str:
        return self.client.endpoint

    @property
    def record(self) -> Record | None:
        """Where ids typed as a prefix are looked up: the store."""
        return None if self.store is None else self.store.record

    async def read(self) -> tuple[Document | None, str | None]:
        try:
            result = await self.client.fetch()
        except ImdsError as exc:
            return None, exc.message or str(exc)
        self.clock.observe(result.server_date, result.received_mono)
        if result.document is None:
            return None, "the service answered without a document"
        return result.document, None

    async def this_vm(self, given: str | None) -> ThisVm:
        """This VM's name (``given``, else asked from IMDS) and its vmId (asked)."""
        this_vm = ThisVm(given)
        await this_vm.learn(self.client, tries=ONE_SHOT_TRIES)
        await this_vm.learn_id(self.client, tries=ONE_SHOT_TRIES)
        return this_vm

    def keep(self, document: Document | None, seen_at: datetime, err: IO[str]) -> None:
        """Keep the document approved against in the history too: after the approval, so a
        slow or locked database never delays it, and not at all when the log just failed."""
        from setui.store import StoreError

        store, approver = self.store, self.approver
        if store is None or store.readonly or document is None or approver.store_error:
            return
        try:
            store.history.record(document, seen_at=seen_at, endpoint=self.endpoint,
                                 vm_name=approver.vm_name)
        except StoreError as exc:
            err.write(f"setui approve: not recorded in the history: {exc}\n")

    def interrupted(self) -> str:
        # A POST under way may still arrive: the audit log has what became of it.
        return ("interrupted. `setui audit` says what was sent, if anything, and what "
                "became of it; `setui events` whether the event started.")

    async def aclose(self) -> None:
        await self.client.aclose()
        if self.store is not None:
            self.store.close()


class AttachedRoute:
    """The agent reads IMDS, keeps the audit log and approves (api.approving): this
    process asks IMDS nothing and writes no store."""

    def __init__(self, agent: AgentClient, approver: AgentApprover,
                 wall: Callable[[], datetime], err: IO[str]) -> None:
        self.agent = agent
        self.approver = approver
        self.clock = ServiceClock(wall=wall)
        self.err = err
        self._said: str | None = None  # the agent's connection not live, said once

    @property
    def endpoint(self) -> str:
        return self.agent.hello.agent.endpoint

    @property
    def record(self) -> Record:
        return self.agent

    async def read(self) -> tuple[Document | None, str | None]:
        """The agent's document; a state it holds while its connection is not live is
        said to be so (once), never shown as live."""
        from setui.api.attach import not_live
        from setui.api.client import ApiError

        try:
            state, _plan = self.agent.state()
        except ApiError as exc:
            return None, f"the agent's state cannot be read: {exc.message}"
        mono = time.monotonic()
        self.clock.observe(state.now, mono)
        stale = not_live(state.state.health, mono)
        if stale is not None and stale != self._said:
            self.err.write(f"setui approve: {stale}\n")
        self._said = stale
        if state.state.document is None:
            return None, "the agent has no events document yet"
        return state.state.document, None

    async def this_vm(self, given: str | None) -> ThisVm:
        return agent_vm(self.agent, given)

    def keep(self, document: Document | None, seen_at: datetime, err: IO[str]) -> None:
        """Nothing: the agent records what it reads."""

    def interrupted(self) -> str:
        if self.approver.abandoned:
            return ("interrupted: the approval runs in the agent, which goes on with it: "
                    "`setui audit` shows the outcome; `setui events` whether the event "
                    "started.")
        return "interrupted: nothing was sent to the agent to approve."

    async def aclose(self) -> None:
        self.agent.close()


Route = StandaloneRoute | AttachedRoute


def attached(agent: AgentClient, read_only: bool, now: Callable[[], datetime],
             err: IO[str]) -> AttachedRoute:
    """The route through ``agent``, said once on ``err`` (attached to the agent, pid, up)."""
    from setui.api.approving import AgentApprover
    from setui.api.attach import attached_words

    err.write(f"setui approve: {attached_words(agent, now())}\n")
    return AttachedRoute(agent, AgentApprover(agent, read_only=read_only), now, err)
