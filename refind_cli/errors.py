"""The one error type of refind.

Domain code raises :class:`RefindError` (or a subclass) with a message a user can act on. The CLI turns it into a red
line and ``exit_code``; the server turns it into ``{"error": {"type", "message"}}`` with ``status``.
"""

from __future__ import annotations


class RefindError(Exception):
    """A failure the user can understand and act on."""

    status = 400
    exit_code = 1
    kind = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(RefindError):
    """The request or a line of input breaks the contract."""

    status = 422
    exit_code = 2
    kind = "invalid"


class Conflict(RefindError):
    """The same request id was already stored with another payload."""

    status = 409
    exit_code = 3
    kind = "conflict"


class NotFound(RefindError):
    status = 404
    exit_code = 4
    kind = "not_found"


class Forgotten(RefindError):
    """The request was removed by forget; a tombstone keeps it from being stored again (410: not retried)."""

    status = 410
    exit_code = 6
    kind = "forgotten"


class ModelError(RefindError):
    """The language model could not be used (credentials, provider failure, timeout)."""

    status = 502
    exit_code = 5
    kind = "model"
