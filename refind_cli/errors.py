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
    search_id: str | None = None  # the stored agent search that failed with it, for `refind inspect search ID`

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class OlderDatabase(RefindError):
    """A database an older refind wrote, met by a reader that must not upgrade it (``refind inspect``)."""


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


class DeadlineReached(ModelError):
    """An agent search's deadline passed during a model call (or before the next attempt could start). The planner
    catches it and returns what it has; it reaches a user only from a ``complete`` called outside a planner.

    ``gave_up``: set when the provider answered an error and the deadline left no time for a retry (not a call the
    deadline cut short) — the message of the model failure it is when the provider has answered the search nothing
    else (the planner raises it then: the same outage is a 502 whatever the deadline). ``retry_after``: the seconds
    the provider asked to wait (its Retry-After) when that wait alone would end past the deadline."""

    def __init__(self, message: str, *, gave_up: str | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.gave_up = gave_up
        self.retry_after = retry_after


class Interrupted(ModelError):
    """The process is ending (SIGTERM — an MCP client quitting sends it — or Ctrl-C: ``model.interrupt``) during an agent search's model
    call, or before the next attempt could start. The planner catches it and returns what it has, its trace marked
    interrupted; it reaches a user only from a ``complete`` called outside a planner."""


class StorageError(RefindError):
    """The database file could not be used as asked (no space, locked, read-only, damaged). Nothing partial is
    stored: the transaction that met it rolled back. Raised by ``store.storage_error`` from a ``sqlite3`` error."""

    status = 503
    exit_code = 7
    kind = "storage"


class FileReplaced(StorageError):
    """The database file was deleted or replaced while this process had it open (``store.check_same_file``):
    nothing was read or written, and what this process wrote before is in the file it opened."""


class DiskFull(StorageError):
    """No space left for the database (the disk, or SQLite's page limit)."""

    status = 507
    exit_code = 7
    kind = "no_space"


class DatabaseLocked(StorageError):
    """Another process held the write lock past the busy timeout."""

    status = 503
    exit_code = 8
    kind = "locked"


class LockWaitInterrupted(DatabaseLocked):
    """An interrupted agent search (SIGTERM, Ctrl-C) stopped waiting for another process's write lock to store its
    trace (``Store.busy_timeout``'s ``stop``): nothing was written."""


class ReadOnlyDatabase(StorageError):
    """The database file or its folder cannot be written."""

    status = 503
    exit_code = 9
    kind = "read_only"


class CorruptDatabase(StorageError):
    """The file is not a SQLite database, or is damaged (truncated, overwritten)."""

    status = 500
    exit_code = 10
    kind = "corrupt"
