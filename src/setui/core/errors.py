"""What can go wrong talking to the metadata service, as types with messages for people.

The message of each error is what the operator reads in the status line and in
``setui watch``; it says what happened and, where there is one, what to do.
"""

from __future__ import annotations

__all__ = [
    "BadDocument",
    "Gone",
    "ImdsError",
    "MethodNotAllowed",
    "NotFound",
    "RateLimited",
    "Rejected",
    "RequestTimeout",
    "ServerError",
    "TooLarge",
    "Unreachable",
]


class ImdsError(Exception):
    """Base of every failure of a request to the metadata service."""

    kind = "error"
    retryable = False
    # Whether the request may have reached the service although no answer says so: its
    # bytes had begun to leave when the connection failed or the time ran out. A POST
    # that failed so may have approved its events; one refused before a byte left cannot.
    may_have_arrived = False

    def __init__(self, message: str, *, status: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.retry_after = retry_after


class Unreachable(ImdsError):
    """Nothing answers: not an Azure VM, a firewall, or the endpoint is down."""

    kind = "unreachable"
    retryable = True


class RequestTimeout(ImdsError):
    kind = "timeout"
    retryable = True


class Rejected(ImdsError):
    """400: the request itself is wrong; retrying the same request cannot help."""

    kind = "rejected"


class NotFound(ImdsError):
    kind = "not-found"


class MethodNotAllowed(ImdsError):
    kind = "method-not-allowed"


class Gone(ImdsError):
    """410: documented as "retry after some time, for up to 70 seconds"."""

    kind = "gone"
    retryable = True


class RateLimited(ImdsError):
    kind = "rate-limited"
    retryable = True


class ServerError(ImdsError):
    kind = "server-error"
    retryable = True


class BadDocument(ImdsError):
    """The answer is not a scheduled-events document (not JSON, wrong shape)."""

    kind = "bad-document"
    retryable = True


class TooLarge(ImdsError):
    """The body is larger than any real document could be; reading it was stopped."""

    kind = "too-large"
    retryable = True
