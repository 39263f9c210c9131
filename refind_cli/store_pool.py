"""SQLite connections lent to threads, one thread at a time: the pool ``refind serve`` runs its searches on and a
:class:`~refind_cli.api.Memory` runs its agent searches on (so a slow one never holds up the Memory's other calls).

A ``Store`` (one ``sqlite3`` connection) is used by one thread at a time. ``StorePool`` lends them out: one per call
while it runs, kept for reuse afterwards. Every lend checks the file (deleted or replaced: ``StorageError``) and its
write-ahead log (deleted: healed, :func:`heal_lost_wal`). Imports nothing heavy: the Python API loads it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import FileReplaced, StorageError
from .store import Store, file_identity

StoreFactory = Callable[[], Store]
log = logging.getLogger("refind.store")  # (the server's and a Memory's alike: not refind.server)


_WRITE_LOCKS: dict[str, threading.RLock] = {}
_WRITE_LOCKS_GUARD = threading.Lock()


def _write_lock(path: Path) -> threading.RLock:
    key = file_key(path)
    with _WRITE_LOCKS_GUARD:
        return _WRITE_LOCKS.setdefault(key, threading.RLock())


# A WAL deleted under a running process (a cleanup script, `rm refind.db-*`): the connections opened before keep
# writing into the deleted file, and any opened after fail ("disk I/O error") or, worse, start a second WAL. Every
# lend and every write batch checks that the -wal file is still there; when it is not, one older connection copies
# what the deleted WAL held into the database file (a TRUNCATE checkpoint), and every connection opened before is
# retired (closed at its next use), so nothing acknowledged is lost and no two WALs are ever written.
_GENERATIONS: dict[str, int] = {}


def file_key(path: str | Path) -> str:
    """What this process knows a database file by (its resolved path)."""
    return str(Path(path).resolve())


def _generation(key: str) -> int:
    return _GENERATIONS.get(key, 0)


def heal_lost_wal(store: Store) -> bool:
    """If the database's -wal file vanished under this open connection, checkpoint through it and retire every
    connection of this file opened so far. True when it healed (the caller must close this store).

    Another process may have healed first (``refind serve --workers N``: each worker is one): the -wal at the path is
    then a new file, not the one this connection opened (``wal_identity``), and what the old one held is in the
    database already — this process's connections are retired without a checkpoint (each one would write the old
    log's pages over the newer ones). Before, "a -wal is there" passed, and the other workers' connections went on with
    the deleted log: "disk I/O error" on their Adds until a restart."""
    wal = store.wal_path  # a symlinked path's log is beside its target: there was "deleted" on every lend
    there = file_identity(wal)
    opened = getattr(store, "wal_identity", None)
    if there is not None and (opened is None or there == opened):
        return False
    with _write_lock(store.path):
        if getattr(store, "retired", False):
            return True
        there = file_identity(wal)
        if there is not None and (opened is None or there == opened):
            return False
        if there is None:
            store.checkpoint()
        key = file_key(store.path)
        _GENERATIONS[key] = _GENERATIONS.get(key, 0) + 1
    if there is None:
        log.warning("the database's -wal file was deleted while open: its content was checkpointed; reconnecting")
    else:
        log.warning("the database's -wal file was replaced (another process healed its deletion); reconnecting")
    return True


def _usable(store: Store) -> bool:
    """Whether a held connection may serve the next request: raises StorageError (503) when its file was deleted or
    replaced — checked before the WAL is healed, which would otherwise checkpoint into the deleted file — and is
    False when its WAL was lost (healed now) or it was retired."""
    store.check_file()
    return not (heal_lost_wal(store) or getattr(store, "retired", False))


class StorePool:
    """Stores lent to one thread at a time; at most ``max_idle`` are kept open between requests."""

    def __init__(
        self, open_store: StoreFactory, *, max_idle: int = 64, on_replaced: Callable[[], None] | None = None
    ) -> None:
        self._open = open_store
        self._max_idle = max_idle
        self._on_replaced = on_replaced  # told when a lend finds the file deleted or replaced (the writer drains)
        self._idle: list[Store] = []
        self._lock = threading.Lock()
        self._closed = False

    @contextmanager
    def store(self) -> Iterator[Store]:
        try:
            with self._lend() as store:
                yield store
        except FileReplaced:
            self.replaced()
            raise

    def replaced(self) -> None:
        """The database file was found deleted or replaced (a lend, /health): the old file's log is drained now — by
        the idle connections, which are all of the old file (each drains what it wrote as it closes: Store.close),
        and by whoever ``on_replaced`` tells (the writer) — not at the next Add: a kill -9 before that would let the
        next open replay the old file's pages over the new one (a probe of round 25)."""
        self.close_idle()
        if self._on_replaced is not None:
            self._on_replaced()

    @contextmanager
    def _lend(self) -> Iterator[Store]:
        with self._lock:
            store = self._idle.pop() if self._idle else None
        if store is not None:
            try:
                usable = _usable(store)
            except StorageError:
                store.close()
                raise
            if not usable:
                self._drop_retired()
                store.close()
                store = None
        if store is None:
            store = self._open()
        try:
            yield store
        except BaseException:
            store.close()  # a failure may have left it mid-transaction: never lend it again
            raise
        with self._lock:
            if (
                not self._closed
                and len(self._idle) < self._max_idle
                and not store.conn.in_transaction
                and not getattr(store, "retired", False)
            ):
                self._idle.append(store)
                return
        store.close()

    def _drop_retired(self) -> None:
        with self._lock:
            retired = [s for s in self._idle if getattr(s, "retired", False)]
            self._idle = [s for s in self._idle if not getattr(s, "retired", False)]
        for store in retired:
            store.close()

    def close_idle(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for store in idle:
            store.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self.close_idle()
