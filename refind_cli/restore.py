"""``refind restore BACKUP``: a backup put back into the live database through SQLite's online backup API.

The copy is one write transaction of the live database, under SQLite's own locking and WAL: every other process that
has it open (``refind serve``, a ``Memory``, a replay) waits for its write lock meanwhile and then sees the restored
content as another process's commit — never a torn file or stale pages, as ``cp backup.db refind.db`` under a running
process gives. What those processes hold in memory is dropped by the file's write log (index_cache.descended): the
backup's log lacks every write made after it was taken.

Before anything is written the backup is checked (a refind database, not a newer refind's, sound by
``PRAGMA integrity_check``); one of an older refind, or with another page size than the database's (SQLite cannot copy
pages of another size into a database in WAL mode), is first copied beside the database, upgraded or rebuilt there,
and that copy is restored.

The restore's ``restore`` event is part of what is copied: the backup is first copied beside the database, the event
recorded in that copy, and the copy put into the database — one commit holds the restored content and its event, so a
``kill -9`` anywhere leaves the database as it was or restored with the event that says so (recorded after the copy,
a kill between the two left a restore that ``inspect`` and the write log could not tell).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import index_store, migrations
from .errors import CorruptDatabase, InvalidInput, NotFound, RefindError
from .health import give_up_after
from .settings import busy_timeout_s
from .signals import signals_ignored, sigterm_as_ctrl_c
from .store import Store, reading_uri, sqlite_filename, storage_error

_COUNTED = ("requests", "messages", "tombstones")


@dataclass(frozen=True)
class BackupInfo:
    """What :func:`check_backup` found: the backup's counts, and what restoring it over the database undoes."""

    backup: str
    db: str
    bytes: int
    counts: dict[str, int]  # the backup's requests, messages, tombstones
    live: dict[str, int] | None  # the database's now (None: there is none; restore creates it)
    older: bool  # an older refind's schema: upgraded on a copy first
    page_size: int
    # events of the database since the backup was taken (the same database only): add, forget, expire → count
    since: dict[str, int] | None = None
    same_database: bool = True
    # the database's writes continue the backup's (its last write is in the database's write log): else, restored
    # from another backup since (whose events took the same ids) or more than 100,000 writes ago, 'since' is unknown
    descends: bool = True
    damaged: str | None = None  # the database cannot be opened: what SQLite said
    stamp: tuple[int, ...] = ()  # the backup file as checked (_stamp): a file changed since is not restored

    def as_dict(self) -> dict[str, Any]:
        return {
            "backup": self.backup,
            "db": self.db,
            "bytes": self.bytes,
            **self.counts,
            "live": self.live,
            "same_database": self.same_database,
            "descends_from_backup": self.descends,
            "since_backup": self.since,
            "damaged": self.damaged,
        }


def _stamp(path: Path) -> tuple[int, ...]:
    st = path.stat()
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _open_backup(backup: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(reading_uri(backup), uri=True, timeout=busy_timeout_s(), isolation_level=None)
    conn.execute("PRAGMA query_only = ON")
    return conn


def check_backup(db: Path, backup: Path) -> BackupInfo:
    """Refuse a BACKUP that is missing, the database itself, no refind database, a newer refind's or unsound; else
    what it holds and what restoring it over ``db`` undoes. Writes nothing but what opening ``db`` as any refind
    writer does (an older refind's database is upgraded)."""
    if not backup.exists():
        raise NotFound(f"no backup at {backup}; give the path of a copy made by `refind backup`")
    if not backup.is_file():
        raise InvalidInput(f"backup {backup} is not a file; give the path of a copy made by `refind backup`")
    if db.exists() and os.path.samefile(backup, db):
        raise InvalidInput(f"backup {backup} is the database itself (--db {db}); give the path of a copy of it")
    database = db.resolve()
    for suffix in ("-wal", "-shm", "-journal"):
        if backup.resolve() == database.with_name(database.name + suffix):
            raise InvalidInput(f"backup {backup} is the database's {suffix} file, not a backup; give another path")
    if backup.stat().st_size == 0:
        raise NotFound(f"backup {backup}: {migrations.EMPTY.replace('refind add creates one', 'give another path')}")
    conn = _open_backup(backup)
    try:
        try:
            done = migrations.refuse_unknown(conn)
        except RefindError as exc:
            said = exc.message.split(" — give --db", 1)[0]  # (another program's: not --db is to be changed)
            if "nothing was changed" not in said:
                said += "; nothing was changed"
            if "another program's" in said:
                said += " — give the path of a copy made by `refind backup`"
            raise type(exc)(f"backup {backup}: {said}") from None
        conn.execute("BEGIN")  # one snapshot for the check and the counts
        # integrity_check, not quick_check: it also checks that every index agrees with its table (0.6 s against
        # 0.1 s for 200,000 messages, 145 MB: BENCHMARKS.md, "refind restore")
        problems = [row[0] for row in conn.execute("PRAGMA integrity_check").fetchall()]
        if problems != ["ok"]:
            raise CorruptDatabase(
                f"backup {backup}: fails its integrity check ({'; '.join(problems[:3])}); nothing was changed — "
                "restore another backup"
            )
        counts = {t: _count(conn, t) for t in _COUNTED}
        page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        backup_id = index_store.db_id(conn) if index_store.has_table(conn, "index_meta") else ""
        last_event = int(conn.execute("SELECT coalesce(max(id), 0) FROM events").fetchone()[0])
        last_write = index_store.last_write(conn) if index_store.has_table(conn, "write_log") else None
        conn.execute("COMMIT")
    except sqlite3.DatabaseError as exc:
        raise _backup_error(exc, backup) from exc
    finally:
        conn.close()
    older = any(name not in done for name, _ in migrations.MIGRATIONS)
    live, since, same, damaged, descends = None, None, True, None, True
    if db.exists():
        try:
            live, since, same, descends = _live_state(db, backup_id, last_event, last_write)
        except CorruptDatabase as exc:  # what a restore is for: tried as it is (restore, below)
            damaged = str(exc.__cause__ or exc.message)
    return BackupInfo(
        backup=str(backup),
        db=str(db),
        bytes=backup.stat().st_size,
        stamp=_stamp(backup),
        counts=counts,
        live=live,
        older=older,
        page_size=page_size,
        since=since,
        same_database=same,
        descends=descends,
        damaged=damaged,
    )


def _count(conn: sqlite3.Connection, table: str) -> int:
    return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def _backup_error(exc: sqlite3.Error, backup: Path) -> RefindError:
    error = storage_error(exc, backup)
    if isinstance(error, CorruptDatabase):
        return CorruptDatabase(
            f"backup {backup}: damaged or not a SQLite database ({exc}); nothing was changed — restore another backup"
        )
    return type(error)(error.message.replace(f"database {backup}", f"backup {backup}", 1))


def _live_state(
    db: Path, backup_id: str, last_event: int, last_write: int | None
) -> tuple[dict[str, int], dict[str, int] | None, bool, bool]:
    """The database's counts, whether it is the backup's database, and whether it descends from the backup; when it
    does, its events since the backup's last. Event ids are reused after a restore: restore backup 1, add, then
    restore backup 2 (taken between them) — the events with ids past backup 2's last were none, so 'undoes nothing'
    was said while it dropped the adds made since the first restore (a probe of round 28's review)."""
    with Store(db) as store, store.reading():
        live = {t: _count(store.conn, t) for t in _COUNTED}
        if backup_id != index_store.db_id(store.conn):
            return live, None, False, True
        if last_write is not None and not index_store.descends(store.conn, last_write):
            return live, None, True, False
        rows = store.conn.execute(
            "SELECT kind, count(*) FROM events WHERE id > ? AND kind IN ('add', 'forget', 'expire', 'restore') "
            "GROUP BY kind",
            (last_event,),
        )
        return live, dict(rows.fetchall()), True, True


def restore(db: Path, backup: Path, info: BackupInfo) -> dict[str, Any]:
    """Put ``backup`` (checked by :func:`check_backup`) back as the content of ``db`` — created when none is there —
    with its ``restore`` event, in one write transaction of ``db``, then empty the WAL (best effort). A database
    that cannot be opened (damaged) is tried with a plain connection."""
    with sigterm_as_ctrl_c():
        if info.live is None and info.damaged is None:
            return _into_new(db, backup, info)
        if info.damaged is not None:
            restored = _into_damaged(db, backup, info)
            with Store(db) as store:
                return _result(store, info, restored)
        with Store(db) as store:
            page_size = int(store.conn.execute("PRAGMA page_size").fetchone()[0])
            before = _schema_version(store.conn)  # (the backup API's commit sets it to one more)
            counts: dict[str, int] = {}
            try:
                with _source(backup, db, info, page_size) as (source, counts):
                    store.check_file()  # the path still names the file this Store opened
                    _copy(source, store.conn, db)
            except KeyboardInterrupt:
                # Ctrl-C, or SIGTERM (sigterm_as_ctrl_c), is seen by Python only after SQLite's step returns: after a
                # step that copied every page the restore is committed, and it was said to be stopped (exit 143,
                # 'the file it was writing was removed') with no restore event. It is finished as any, below.
                if _schema_version(store.conn) == before or not counts:
                    raise  # stopped before the copy committed: nothing changed
            with signals_ignored():  # the restore and its event are committed: its result is said
                return _result(store, info, counts)


def _into_new(db: Path, backup: Path, info: BackupInfo) -> dict[str, Any]:
    """Where no database was: made from the backup beside it (upgraded, its event recorded) and linked into place
    whole, so that a restore that fails leaves nothing at ``db`` (it left a new empty database there, made before the
    copy); one made at ``db`` meanwhile is not replaced."""
    from .health import publish

    new = _beside(db)
    try:
        source = _checked(backup, info)
        try:
            dest = sqlite3.connect(sqlite_filename(new), isolation_level=None)
            try:
                source.backup(dest)  # (a new file takes the backup's page size: nothing to rebuild)
            finally:
                dest.close()
        finally:
            source.close()
        with Store(new) as store:  # upgraded where the backup is an older refind's, as any open that writes
            result = _recorded(store, backup, info)
        publish(  # (where --db is a symbolic link to no file yet: where it points, as Store makes a database)
            new,
            Path(os.path.realpath(db)),
            f"a database was made at {db} while the backup was restored; nothing was changed — run the command again",
        )
    except sqlite3.Error as exc:
        raise _copy_error(exc, db, backup, new, info) from exc
    finally:
        _remove(new)
    return result


def _schema_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA schema_version").fetchone()[0])


def _copy(source: sqlite3.Connection, dest: sqlite3.Connection, db: Path) -> None:
    try:
        # all pages in one step: one write transaction of the database. Waits for another writer's lock as long as a
        # write does (REFIND_BUSY_TIMEOUT), then fails as locked, nothing changed
        source.backup(dest, progress=give_up_after(busy_timeout_s()))
    except sqlite3.Error as exc:
        raise storage_error(exc, db) from exc


def _into_damaged(db: Path, backup: Path, info: BackupInfo) -> dict[str, int]:
    """The backup API into a database that refind cannot open. SQLite refuses most such files as its destination (a
    truncated one, one whose header is overwritten): refused then, nothing changed, with what to do."""
    with open(db, "rb") as fh:  # (not PRAGMA page_size: it reads the schema, which a damaged file may not hold)
        header = fh.read(18)
    page_size = int.from_bytes(header[16:18], "big") if len(header) == 18 else 0
    page_size = 65536 if page_size == 1 else page_size or info.page_size
    conn = sqlite3.connect(sqlite_filename(db), timeout=busy_timeout_s(), isolation_level=None)
    try:
        with _source(backup, db, info, page_size) as (source, counts):
            _copy(source, conn, db)
        return counts
    except CorruptDatabase as exc:
        raise CorruptDatabase(
            f"database {db}: damaged ({info.damaged}), and SQLite cannot write into it either; nothing was changed "
            "— stop every process using it, move it and its -wal and -shm files aside (`refind inspect --check "
            "--db MOVED` says what is wrong), and run the same command again: it creates the database from the "
            "backup"
        ) from exc
    finally:
        conn.close()


def _recorded(store: Store, backup: Path, info: BackupInfo) -> dict[str, Any]:
    counts = _record(store, backup, info)
    return _result(store, info, counts)


def _record(store: Store, backup: Path, info: BackupInfo) -> dict[str, int]:
    """The ``restore`` event, recorded in the content to be restored; its counts."""
    with store.write():  # (a new id in the write log: the restored content is a new write of the file)
        counts = {t: _count(store.conn, t) for t in _COUNTED}
        store.record_event(
            "restore",
            rows=counts["messages"],
            # what it undoes goes with it (the events that told of it do): a forget undone, its messages back, is
            # on record — None where it is not counted (another database's backup, one the file no longer continues)
            detail={"backup": str(backup), "bytes": info.bytes, "requests": counts["requests"]}
            | ({} if info.live is None else {"undoes": info.since}),
        )
    return counts


def _result(store: Store, info: BackupInfo, counts: dict[str, int]) -> dict[str, Any]:
    """The WAL emptied (best effort) once the restore committed; what the result says."""
    checkpointed = store.checkpoint(2.0)
    return {**info.as_dict(), **counts, "checkpointed": checkpointed}


def _checked(backup: Path, info: BackupInfo) -> sqlite3.Connection:
    """The backup opened again to be copied: refused when the file changed since check_backup (replaced or written
    to, while a confirmation was asked, say)."""
    if not backup.exists() or _stamp(backup) != info.stamp:
        raise RefindError(f"backup {backup} changed since it was checked; nothing was changed — run the command again")
    return _open_backup(backup)


@contextmanager
def _source(
    backup: Path, db: Path, info: BackupInfo, live_page_size: int
) -> Iterator[tuple[sqlite3.Connection, dict[str, int]]]:
    """The connection the pages are copied from — a copy of the backup beside the database, holding the restore's
    event (upgraded first where the backup is an older refind's, rebuilt where its page size is not the database's),
    removed afterwards — and the counts the event recorded."""
    copy = _beside(db)
    try:
        source = _checked(backup, info)
        try:
            dest = sqlite3.connect(sqlite_filename(copy), isolation_level=None)
            try:
                dest.execute("PRAGMA synchronous = OFF")  # (a scratch file: a crash leaves nothing to keep)
                source.backup(dest)
                if info.older or info.page_size != live_page_size:
                    dest.execute("PRAGMA journal_mode = DELETE")
                    dest.execute(f"PRAGMA page_size = {live_page_size}")
                    dest.execute("VACUUM")  # (rewrites every page at the new size)
                dest.execute("PRAGMA journal_mode = WAL")  # (here, unsynced: a Store's open would sync every page)
            finally:
                dest.close()
        finally:
            source.close()
        with Store(copy) as store:  # upgraded where the backup is an older refind's, as any command that writes it
            store.conn.execute("PRAGMA synchronous = OFF")  # (its close's checkpoint need not sync the copy either)
            counts = _record(store, backup, info)
        conn = _open_backup(copy)
        try:
            yield conn, counts
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise _copy_error(exc, db, backup, copy, info) from exc
    finally:
        _remove(copy)


def _beside(db: Path) -> Path:
    """A new private file beside the database, for a copy of the backup (``.NAME.<random>.restoring``)."""
    fd, name = tempfile.mkstemp(prefix=f".{db.name}.", suffix=".restoring", dir=db.resolve().parent)
    os.close(fd)
    return Path(name)


def _remove(copy: Path) -> None:
    for leftover in (copy, *(copy.with_name(copy.name + s) for s in ("-journal", "-wal", "-shm"))):
        with contextlib.suppress(OSError):
            leftover.unlink()


def _copy_error(exc: sqlite3.Error, db: Path, backup: Path, copy: Path, info: BackupInfo) -> RefindError:
    """A failed write of the copy beside the database, named as what it is: its path is a name the user never gave."""
    error = storage_error(exc, copy, growing_to=info.bytes)
    made = f"database {db}: the copy of backup {backup} made beside it to restore ({copy.name}, removed)"
    return type(error)(error.message.replace(f"database {copy}", made, 1))
