"""What an approval came to, and how it is getting on: values every front end shows.

They live apart from the approver that makes them, so a front end attached to the agent
(setui.api.client) can read and show them without loading the approver, the store or
the HTTP client.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HELD", "ApprovalOutcome", "Progress"]

# A Progress of this kind: the try sent nothing, as the event could not be checked first
# (the document could not be read again); its last_error says why.
HELD = "held"


@dataclass(frozen=True)
class ApprovalOutcome:
    """What happened to one EventId; ``message`` is for people."""

    event_id: str
    approved: bool
    refused: bool
    status: int | None
    message: str
    latency: float | None
    record_seq: int | None  # the audit record telling this outcome, if one was written
    # Not approved because what was confirmed is not what would be approved now (the
    # event changed, before the first send or before a retry, or another approval
    # claims it): an operator may be asked again.
    ask_again: bool = False
    changes: tuple[str, ...] = ()  # what changed, field by field, when it did
    # A try may have reached the service and no answer says what became of it: neither
    # approved nor failed, and the event stays claimed.
    unknown: bool = False


@dataclass(frozen=True)
class Progress:
    """An approval still trying: shown on the row while the service fails."""

    event_id: str
    attempt: int  # tries made so far
    last_error: str
    next_in: float  # seconds to the next try
    status: int | None = None  # the HTTP status of the last try, if it had one
    kind: str = "error"  # what failed: "unreachable", "timeout", "server", ..., or HELD
