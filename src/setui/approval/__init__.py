"""Approval: the one path to starting maintenance early, and the values it hands out.

* ``approver``: Approver, the one path to an approval for ``setui approve``, the
  dashboard and the agent alike: the document read again, the checks, the POST.
* ``snapshot``: what the operator was shown, and the rules asked before and after a
  confirmation (which events, what changed since, other VMs' consent).
* ``tries``: the tries of one approval as they happen, and what they came to (approved,
  failed, unknown).
* ``outcome``: those results as values every front end shows; no I/O, so a front end
  attached to the agent imports them without the approver.

Nothing here imports textual; nothing but ``approver`` sends a request.
"""
