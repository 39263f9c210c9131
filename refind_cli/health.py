"""The database's health: ``refind inspect --check`` (is the file sound, does derived data agree with the messages)
and ``refind backup`` (a consistent copy, taken with SQLite's online backup API while others write).

Both open the file themselves, without migrations: a damaged file is reported, never "repaired" by a
migration, and a check never waits on a writer (WAL readers do not block writers, nor writers readers).
"""

from __future__ import annotations

import errno
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import index_store, migrations, tokenize, trace
from .errors import CorruptDatabase, DiskFull, RefindError
from .settings import busy_timeout_s
from .signals import sigterm_as_ctrl_c
from .store import no_database, reading_uri, sqlite_filename, storage_error


def _open(path: Path) -> sqlite3.Connection:
    """A plain connection (no migrations: nothing is changed); read-only where the folder cannot be written."""
    if not path.exists():
        raise no_database(path)
    # (read-write where it can be: its close removes -wal and -shm)
    return sqlite3.connect(reading_uri(path), uri=True, timeout=busy_timeout_s())


def derived_problems(conn: sqlite3.Connection) -> list[str]:
    """What derived or duplicated data disagrees with the messages — request rows and the maintained search index
    (:func:`index_store.verify`); the one function ``inspect --check`` calls for it. Empty when all agree. A database
    from before the index (not yet opened by this version) has no index to check."""
    q = conn.execute
    problems = [
        f"request {rid!r} of user {uid!r}: {want} message(s) recorded, {got} stored"
        for uid, rid, want, got in q(
            "SELECT r.user_id, r.request_id, r.message_count, count(m.id) FROM requests r "
            "LEFT JOIN messages m ON m.user_id = r.user_id AND m.request_id = r.request_id "
            "GROUP BY r.user_id, r.request_id HAVING count(m.id) != r.message_count"
        )
    ]
    problems += [
        f"{n} message(s) of user {uid!r}, request {rid!r} without their request row"
        for uid, rid, n in q(
            "SELECT m.user_id, m.request_id, count(*) FROM messages m LEFT JOIN requests r "
            "ON r.user_id = m.user_id AND r.request_id = m.request_id WHERE r.request_id IS NULL "
            "GROUP BY m.user_id, m.request_id"
        )
    ]
    if index_store.has_table(conn, "index_segments"):
        problems += index_store.verify(conn)
    searches = q("SELECT id, returned_ids, trace FROM searches") if index_store.has_table(conn, "searches") else ()
    for sid, returned, stored in searches:
        try:
            trace.decode(sid, returned, stored)
        except CorruptDatabase as exc:  # `inspect searches` refuses to list past it
            problems.append(exc.message)
    return problems


def check(path: Path) -> dict[str, Any]:
    """``PRAGMA integrity_check``, then (on a sound file) ``derived_problems``. ``ok`` only when both are clean."""
    conn = _open(path)
    notes: list[str] = []
    try:
        _refuse_unknown(conn, path)
        # one read transaction: every statement sees the same commit, so a writer (refind serve) committing between
        # reading the messages and the index is not reported as damage
        conn.execute("BEGIN")
        integrity = [row[0] for row in conn.execute("PRAGMA integrity_check").fetchall()]
        derived = derived_problems(conn) if integrity == ["ok"] else []
        if integrity == ["ok"] and index_store.has_table(conn, "index_segments"):
            built = index_store.stale_analyzer(conn)
            if built is not None:
                notes.append(
                    f"the search index was built by analyzer version {built} (this refind's is "
                    f"{tokenize.ANALYZER_VERSION}): every message is indexed again on the next open; nothing to repair"
                )
    except sqlite3.DatabaseError as exc:
        error = storage_error(exc, path)
        if not isinstance(error, CorruptDatabase):
            raise error from exc
        integrity, derived = [str(exc)], []
    finally:
        conn.close()
    return {
        "db": str(path),
        "ok": integrity == ["ok"] and not derived,
        "integrity": integrity,
        "derived": derived,
        "notes": notes,
    }


def _refuse_unknown(conn: sqlite3.Connection, path: Path) -> None:
    """A zero-byte file, another program's database or a newer refind's: what inspect says of it (not "no such table:
    requests", nor a check or a copy of a schema this version does not know)."""
    try:
        migrations.refuse_unknown(conn)
    except RefindError as exc:
        raise type(exc)(f"database {path}: {exc.message}") from None


def backup(path: Path, target: Path) -> dict[str, Any]:
    """Copy the database to ``target`` with SQLite's online backup API: one read transaction, so the copy is the
    database as of one commit even while ``refind serve`` writes (in WAL mode the writers are not blocked). Written
    to a new private file beside it (never one that was there: not the database, not a user's file), checked, then
    renamed: ``target`` is either a whole, sound copy or absent, readable by its owner only, as the database is."""
    if target.is_dir():  # `refind backup backups/`: a folder is no copy's name; one inside it is
        raise RefindError(
            f"{target} is a folder; give the path of a new file in it, e.g. {target / ('backup-' + path.name)} (a "
            "backup never overwrites)"
        )
    if target.exists():
        raise RefindError(f"{target} already exists; give a new path (a backup never overwrites)")
    if not target.parent.is_dir():
        raise RefindError(f"cannot write {target}: folder {target.parent} does not exist")
    database = path.resolve()
    for suffix in ("-wal", "-shm", "-journal"):  # SQLite reads, truncates or deletes these on the next open
        if target.resolve() == database.with_name(database.name + suffix):
            raise RefindError(f"{target} is the name of the database's {suffix} file; give another path")
    with sigterm_as_ctrl_c():  # a SIGTERM's exit left the partial copy, every user's messages, hidden beside target
        return _copy(path, target)


def _copy(path: Path, target: Path) -> dict[str, Any]:
    """The checked copy of :func:`backup`, made under a hidden name and published, or nothing left behind."""
    try:
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
    except OSError as exc:
        raise RefindError(f"cannot write {target}: {exc.strerror}") from exc
    os.close(fd)
    partial = Path(name)
    try:
        source = _open(path)
        try:
            _refuse_unknown(source, path)
            dest = sqlite3.connect(sqlite_filename(partial))
            try:
                # all pages in one step: one snapshot. A writer's lock (a database not in WAL mode) makes the step
                # answer BUSY, which Python's loop retries without end: given up after the busy timeout, as a write is
                source.backup(dest, progress=give_up_after(busy_timeout_s()))
                dest.execute("PRAGMA journal_mode = DELETE")  # one self-contained file, no -wal beside it
                integrity = [row[0] for row in dest.execute("PRAGMA integrity_check").fetchall()]
                counts = {t: dest.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("requests", "messages")}
            finally:
                dest.close()
        finally:
            source.close()
        if integrity != ["ok"]:
            raise CorruptDatabase(f"database {path}: the copy fails its integrity check ({'; '.join(integrity[:3])})")
        with open(partial, "rb+") as fh:
            os.fsync(fh.fileno())
        publish(partial, target)
    except sqlite3.Error as exc:
        error = storage_error(exc, path)
        if isinstance(error, DiskFull):  # the database is only read: no space is the copy's folder's
            error = storage_error(exc, target)
        raise error from exc
    finally:
        for leftover in (partial, *(partial.with_name(partial.name + s) for s in ("-journal", "-wal", "-shm"))):
            leftover.unlink(missing_ok=True)
    return {"db": str(path), "backup": str(target), "bytes": target.stat().st_size, **counts}


_BUSY = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)  # what a backup step answers while a writer holds the database


def give_up_after(seconds: float) -> Callable[[int, int, int], None]:
    """A ``Connection.backup`` progress callback that ends a backup still refused as busy ``seconds`` after it began
    (raising aborts it): "database is locked", as a write that waited out REFIND_BUSY_TIMEOUT."""
    deadline = time.monotonic() + seconds

    def progress(status: int, remaining: int, total: int) -> None:
        if status in _BUSY and time.monotonic() >= deadline:
            raise sqlite3.OperationalError("database is locked")

    return progress


# link(2)'s answers where the file system has no hard links (FAT, some network and FUSE file systems)
NO_HARD_LINKS = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS})


def publish(partial: Path, target: Path, exists: str = "") -> None:
    """Give the checked copy its name without overwriting anything: a hard link fails when ``target`` exists, also
    when it was made after the caller's check (the caller then removes ``partial``; ``exists``: what it says). Where
    the file system has no hard links, a rename instead, which would replace a file made at ``target`` in the instant
    since that check."""
    try:
        os.link(partial, target)
    except FileExistsError:
        raise RefindError(exists or f"{target} already exists; give a new path (a backup never overwrites)") from None
    except OSError as exc:
        if exc.errno not in NO_HARD_LINKS:
            raise RefindError(f"cannot write {target}: {exc.strerror}") from exc
        os.replace(partial, target)
