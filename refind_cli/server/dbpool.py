"""SQLite connections for a multi-threaded process: a pool of read stores and one group-committing writer.

A ``Store`` (one ``sqlite3`` connection) is used by one thread at a time. ``StorePool`` (:mod:`refind_cli.store_pool`,
shared with the Python API) lends them out: one per request while it runs, kept for reuse afterwards. ``GroupWriter`` owns the process's write connection for Adds:
every Add runs on its thread, and Adds that arrive together are committed in one transaction (one savepoint each,
so one refused request never takes another down) — one fsync for many requests, and no two Adds of this process
ever wait on SQLite's write lock. Rare writes (forget, the retention sweep) and other processes (``refind add``,
a second server worker) serialise with it through SQLite's own lock and busy timeout.
"""

from __future__ import annotations

import queue
import sqlite3
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..contract import AddRequest
from ..errors import DatabaseLocked, RefindError, StorageError
from ..store import AddOutcome, FileIdentity, Store, file_identity, prepare, storage_error
from ..store import check_same_file as check_opened_file
from ..store_pool import (  # (here since round 29; the names stay importable from dbpool)
    StoreFactory,
    StorePool,
    _generation,
    _usable,
    _write_lock,
    file_key,
    heal_lost_wal,
    log,
)

__all__ = [
    "GroupWriter",
    "SerialStore",
    "ShuttingDown",
    "StoreFactory",
    "StorePool",
    "file_key",
    "heal_lost_wal",
    "log",
]


class ShuttingDown(RefindError):
    """A write arrived after shutdown began: the client should retry (against the restarted server)."""

    status = 503
    kind = "unavailable"


# The database file deleted or replaced under a running process (`rm refind.db`, a restore by `mv`): connections
# opened before go on with the old file, whose Adds a restart never sees, and one opened after creates a new file
# beside the old one's -wal and -shm (searches that find nothing, then "file is not a database"). The first store of
# a path records which file it opened; every later open, lend and write batch checks that the path still names it,
# else refuses (503, retried) until the server is restarted on what is there now.
_FILES: dict[str, FileIdentity] = {}


def open_anew(path: Path) -> None:
    """A new server of this process (an app built again) takes whatever file is at ``path`` now."""
    _FILES.pop(file_key(path), None)


def check_same_file(path: Path, key: str) -> None:
    """Raise StorageError when ``path`` no longer names the database file this process opened first."""
    # (named by its absolute path: an Add's check was given the relative one, a search's the absolute)
    check_opened_file(Path(path).absolute(), _FILES.get(key), holder=SerialStore.holder, remedy=SerialStore.remedy)


class SerialStore(Store):
    """A Store whose write transactions first take a lock shared by every SerialStore of the same file in this
    process. Threads then queue on a Python lock, woken the moment it is free, instead of in SQLite's busy handler,
    which sleeps and retries (with 256 agent searches each saving a trace, an Add could wait a second in it).
    Other processes still meet SQLite's own lock and busy timeout."""

    holder = "the server"  # Store.check_file's message (every lend and every write checks the file)
    remedy = "restart the server"

    def __init__(self, path: str | Path, **kwargs: Any) -> None:
        key = file_key(Path(path))
        check_same_file(Path(path), key)  # never create a new file where this process's one was
        super().__init__(path, **kwargs)
        self._key = key  # resolved once: every lend asks `retired`, and resolving costs syscalls
        if self.identity is not None:  # (Store took the identity of the file it opened)
            _FILES.setdefault(key, self.identity)
        try:  # deleted between the check and the open: this connection holds another file than the server's
            check_same_file(self.path, key)
        except StorageError:
            self.close()
            raise
        self._write_lock = _write_lock(self.path)
        self._generation = _generation(self._key)
        self.wal_identity = file_identity(self.wal_path)  # the log this connection writes (heal_lost_wal)

    @property
    def retired(self) -> bool:
        """Opened before a lost WAL was healed: it still holds the deleted file, and must not be used again."""
        return self._generation != _generation(self._key)

    @contextmanager
    def write(self) -> Iterator[Any]:
        until = self.write_until
        if until is None:
            with self._write_lock, super().write() as db:
                yield db
            return
        # inside busy_timeout (an agent search's trace): the queue counts against the same wait as SQLite's lock, or
        # the traces of searches finishing together would each wait in turn behind the one before
        if not self._write_lock.acquire(timeout=max(until - time.monotonic(), 0.0)):
            raise sqlite3.OperationalError("database is locked")
        try:
            left = max(until - time.monotonic(), 0.0)
            self.conn.execute(f"PRAGMA busy_timeout = {int(left * 1000)}")  # (busy_timeout restores its own value)
            with super().write() as db:
                yield db
        finally:
            self._write_lock.release()


class _Job:
    __slots__ = ("future", "request")

    def __init__(self, request: AddRequest) -> None:
        self.request = request
        self.future: Future[Any] = Future()


_STOP = object()
_CHECK = object()  # GroupWriter.recheck: check the file now
# Messages committed in one batch at most (a single bigger Add is a batch alone): bounds how long an Add waits for
# the writer behind others' big Adds (README "Security").
MAX_BATCH_MESSAGES = 5_000


class GroupWriter:
    """The process's one writer thread for Adds; ``submit_add``/``add`` are thread-safe and answer after COMMIT."""

    def __init__(
        self, open_store: StoreFactory, *, max_batch: int = 64, max_batch_messages: int = MAX_BATCH_MESSAGES
    ) -> None:
        self._open = open_store
        self._max_batch = max_batch
        self._max_batch_messages = max_batch_messages
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopped = False
        self.batches = 0  # committed add batches, for benchmarks and tests
        self.batched_requests = 0

    # ---- the public, thread-safe side ---------------------------------------------------------------------

    def submit_add(self, request: AddRequest) -> Future[Any]:
        """Queue one Add; the future resolves to its AddOutcome (or raises its RefindError) after COMMIT."""
        return self._submit(_Job(request))

    def add(self, request: AddRequest) -> AddOutcome:
        outcome: AddOutcome = self.submit_add(request).result()
        return outcome

    def close(self, timeout: float | None = 60.0) -> None:
        """Finish every queued job, then stop the thread and close its connection."""
        with self._lock:
            self._stopped = True
            thread = self._thread
        if thread is not None:
            self._queue.put(_STOP)
            thread.join(timeout)

    def recheck(self) -> None:
        """The file was found deleted or replaced elsewhere (/health, a search): the writer's connection checks it now
        and, the change confirmed, drains what it wrote into the old file and closes (``Store.close``). Its log, named
        after the path, would otherwise wait for the next Add — and a kill -9 before it would let the next open replay
        the old file's pages over the new one (a probe of round 25)."""
        with self._lock:
            if self._thread is not None and not self._stopped:
                self._queue.put(_CHECK)

    def _submit(self, job: _Job) -> Future[Any]:
        with self._lock:
            if self._stopped:
                raise ShuttingDown("the server is shutting down; retry the request")
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="refind-writer", daemon=True)
                self._thread.start()
            self._queue.put(job)
        return job.future

    # ---- the writer thread --------------------------------------------------------------------------------

    def _run(self) -> None:
        store: Store | None = None
        stopping = False
        pending: _Job | None = None  # taken from the queue but left for the next batch (the message cap)
        while pending is not None or not stopping:
            first = pending if pending is not None else self._queue.get()
            pending = None
            if first is _STOP:
                break
            if first is _CHECK:
                if store is not None:
                    try:
                        _usable(store)
                    except StorageError:
                        store.close()  # (drains the moved file's log: Store.close)
                        store = None
                continue
            jobs = [first]
            size = len(first.request.messages)
            while len(jobs) < self._max_batch and size < self._max_batch_messages:
                try:
                    job = self._queue.get_nowait()
                except queue.Empty:
                    break
                if job is _STOP:
                    stopping = True
                    break
                if job is _CHECK:  # (the batch checks its store first)
                    continue
                if size + len(job.request.messages) > self._max_batch_messages:
                    pending = job  # one huge Add is a batch of its own: the small ones behind it do not wait longer
                    break
                jobs.append(job)
                size += len(job.request.messages)
            try:
                if store is not None and not _usable(store):  # a StorageError: the batch fails (503), closed below
                    store.close()
                    store = None
                if store is None:
                    store = self._open()
                self._commit(store, jobs)
            except BaseException as exc:  # the store could not even be opened: fail these jobs, keep serving
                for job in jobs:
                    if not job.future.done():
                        job.future.set_exception(exc)
                if store is not None:
                    store.close()
                    store = None
        if store is not None:
            store.close()

    def _commit(self, store: Store, jobs: list[_Job]) -> None:
        # Claim each future first: one whose waiter gave up (cancelled) is skipped, and a claimed one can no longer
        # be cancelled, so setting its answer after COMMIT cannot raise and fail the rest of the batch.
        jobs = [job for job in jobs if job.future.set_running_or_notify_cancel()]
        if not jobs:
            return
        try:
            outcomes = store.add_many([job.request for job in jobs])
        except Exception as exc:
            if isinstance(storage_error(exc) if isinstance(exc, sqlite3.Error) else exc, DatabaseLocked):
                # another process held SQLite's write lock past the busy timeout: alone, each request would wait
                # that long again, one after another (64 Adds: 32 minutes at the default 30 s), while every Add
                # behind them queued; each gets the same answer now (503, retried), as one Add alone would — but an
                # identical replay of a stored request, which needs nothing written, is answered from what is
                # stored (read on this refused path only)
                replayed = store.stored_replays([prepare(job.request) for job in jobs]) or [None] * len(jobs)
                for job, answer in zip(jobs, replayed):
                    if answer is None:
                        job.future.set_exception(exc)
                    else:
                        job.future.set_result(answer)
                return
            # Something below the per-request savepoints failed (disk full, I/O): nothing of the batch was
            # committed. Retry each request alone so each gets its own answer.
            for job in jobs:
                try:
                    job.future.set_result(store.add(job.request))
                except BaseException as exc:
                    job.future.set_exception(exc)
            return
        self.batches += 1
        self.batched_requests += len(jobs)
        for job, outcome in zip(jobs, outcomes):
            if isinstance(outcome, BaseException):
                job.future.set_exception(outcome)
            else:
                job.future.set_result(outcome)
