"""What tells this VM from every other: its ``vmId``, from IMDS compute metadata.

An endpoint says how a process reached the metadata service, not which VM it runs on:
``http://169.254.169.254`` and a loopback proxy to it are one VM, and every VM has the
same ``http://169.254.169.254`` (a store copied from another VM, or baked into an image,
holds that VM's approvals under it). So claims, holds and the agent's steps are keyed by
the vmId when it is known (setui.store.vmkeys).

The vmId is a GUID, and is read as one: text from the network that is not a GUID (none,
empty, too long, anything else) is "not known", never a key; in lower case, as Azure
writes it, so two spellings of one id are one key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["COMPUTE_FIELD", "vm_id_key", "vm_id_of"]

COMPUTE_FIELD = "vmId"  # its name in /metadata/instance/compute
_GUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def vm_id_key(value: object) -> str | None:
    """``value`` as a vmId (a GUID, in lower case); None when it is not one."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    text = value.strip().lower()
    return text if _GUID.fullmatch(text) else None


def vm_id_of(compute: Mapping[str, object] | None) -> str | None:
    """This VM's vmId from its compute metadata (``ImdsClient.compute()``); None when
    the metadata did not answer or holds none."""
    return vm_id_key((compute or {}).get(COMPUTE_FIELD))
