"""Which of the store's claims, holds and agent steps, hook runs and messages are this
VM's: the one rule.

Each row keeps the VM it is about: its vmId (setui.core.vmid) when the writer knew it,
else the key of the endpoint it was written at (store.endpoints). An approval attempt
keeps the vmId in its details (``details.vm_id``: the audit log's records are evidence
under the hash chain, and the details are hashed with the rest); the agent's steps and
the holds keep it in their ``vm`` column, which is their key (schema version 7), and its
hook runs and messages in theirs (schema version 8); the rows from before keep their
endpoint key there.

The rule (docs/approvals.md, "Once per event"):

* this VM's vmId known: the rows with that vmId, written at any endpoint; and the rows
  without one written at this endpoint (before the vmId was known, or by an older setui:
  this VM's as far as anything says, as before). Rows with another vmId are another
  VM's, whatever endpoint they name: a store copied from it blocks nothing here.
* not known (IMDS compute metadata did not answer, or names no vmId): every row of this
  endpoint, whatever vmId it names, as before: a claim that may be another VM's still
  counts, rather than an event being approved twice on this one, and says whose it is.

A row without a vmId is keyed by the vmId when it is next written with it known, so the
VM's other endpoints find it from then on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from setui.core.vmid import vm_id_key
from setui.store.endpoints import endpoint_column

__all__ = ["DETAIL", "ThisVm", "with_vm_id"]

DETAIL = "vm_id"  # the key of the vmId in an audit record's details


@dataclass(frozen=True)
class ThisVm:
    """This VM as the store finds its rows: its endpoint's key, and its vmId if known."""

    endpoint: str  # as the store keys it (endpoint_column)
    vm_id: str | None

    @classmethod
    def of(cls, endpoint: str, vm_id: str | None) -> ThisVm:
        """From an endpoint as written and a vmId as given (checked here)."""
        return cls(endpoint_column(endpoint), vm_id_key(vm_id))

    @property
    def key(self) -> str:
        """What a row written now keeps as its VM: the vmId, else the endpoint's key
        (the two cannot be mistaken: a vmId is a GUID, an endpoint a URL)."""
        return self.vm_id or self.endpoint

    def owns(self, vm_id: str | None, endpoint: str) -> bool:
        """Whether a row about ``vm_id`` (None: its writer did not know it), written at
        ``endpoint`` (keyed), is this VM's."""
        if self.vm_id is not None and vm_id is not None:
            return vm_id == self.vm_id
        return endpoint == self.endpoint

    def where(self) -> tuple[str, list[str]]:
        """The same rule in SQL, over a table's ``vm`` and ``endpoint`` columns, and its
        arguments."""
        if self.vm_id is None:
            return "endpoint = ?", [self.endpoint]
        return "vm IN (?, ?)", [self.vm_id, self.endpoint]


def with_vm_id(details: Mapping[str, Any], vm_id: str | None) -> dict[str, Any]:
    """An audit record's ``details`` with the VM it was made on when that is known (an
    approval claims its event on that VM alone, a hold says where it was set), and
    without one otherwise, whatever the details held: only the writer's own vmId keys."""
    out = {key: value for key, value in details.items() if key != DETAIL}
    known = vm_id_key(vm_id)
    if known is not None:
        out[DETAIL] = known
    return out
