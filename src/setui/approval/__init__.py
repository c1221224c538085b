"""Approval: the one path to starting maintenance early, and the values it hands out.

* ``approver``: Approver, the one path to an approval for ``setui approve``, the
  dashboard and the agent alike: the document read again, the checks (also alone, as a
  dry run), the audit record, the POST, each retry checked as the first send was.
* ``snapshot``: what the operator was shown, and the rules asked before and after a
  confirmation (which events, what changed since, a repeated EventId, other VMs'
  consent, whether it is still as shown: asked before every send).
* ``tries``: the tries of one approval as they happen, and what they came to (approved,
  failed, or unknown when a try may have arrived), logged for the outcome's record.
* ``outcome``: those results (ApprovalOutcome, Progress) as values every front end
  shows; no I/O, so a front end attached to the agent imports them without the approver.

Nothing here imports textual; nothing but ``approver`` sends a request.
"""
