"""The SQLite store: verbatim messages, idempotent Adds, one scoped read per user, the audit log.

Built on sqlite-utils over one ``sqlite3`` connection per ``Store`` (one per thread in the server). WAL, foreign
keys, a busy timeout, and ``synchronous=FULL`` so an acknowledged Add survives a power cut, not only a crash.
Writers take the lock up front (``BEGIN IMMEDIATE``) so two processes adding the same new request serialise: one
writes, the other sees its row and reports a duplicate or a conflict.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from . import index_store, migrations, sealed
from .contract import MAX_LINE_BYTES, AddRequest, exported_bytes
from .derived_ids import message_id, message_ids
from .errors import (
    Conflict,
    CorruptDatabase,
    DatabaseLocked,
    DiskFull,
    FileReplaced,
    Forgotten,
    InvalidInput,
    LockWaitInterrupted,
    NotFound,
    ReadOnlyDatabase,
    RefindError,
    StorageError,
)

if TYPE_CHECKING:
    import sqlite_utils

Clock = Callable[[], int]
EVENT_KINDS = ("add", "expire", "forget", "migrate", "restore")  # every mutation appends one event of these kinds
DAY_MS = 86_400_000
SQLITE_MAX_INT = 2**63 - 1  # the largest number SQLite binds (a LIMIT above it is "all")


def _grant(conn: sqlite3.Connection, path: Path) -> bool:
    """``migrations.grant`` for a write transaction; False (no grant, nothing written) when the file cannot be
    written at all (read-only): the transaction may still read, and change nothing (:meth:`Store.write`)."""
    try:
        migrations.grant(conn)
    except sqlite3.OperationalError as exc:
        if not isinstance(storage_error(exc, path), ReadOnlyDatabase):
            raise
        return False
    return True


def system_clock() -> int:
    """Now, in Unix milliseconds (UTC)."""
    return time.time_ns() // 1_000_000


def iso_time(ms: int) -> str:
    from datetime import datetime

    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


FORGOTTEN_USERS = 16  # users whose forgotten ids a Store keeps read (Store._forgotten_ids) …
FORGOTTEN_IDS = 1_000_000  # … and the ids they hold in all, at most (beyond the last user read: ~100 MB)


class ForgottenIds(NamedTuple):
    """A user's forgotten ids as their tombstones keep them (sealed), each with (tombstone id, at) of the newest one."""

    requests: dict[str, tuple[int, int]]
    messages: dict[str, tuple[int, int]]

    @property
    def size(self) -> int:
        return len(self.requests) + len(self.messages)

    def newest(self, kept: str, first: str, legacy: str) -> tuple[int, int] | None:
        """(id, at) of the newest tombstone naming a request by its id or its first message's (:func:`_as_kept`)."""
        found = [f for f in (self.requests.get(kept), self.messages.get(first), self.messages.get(legacy)) if f]
        return max(found) if found else None


def _as_kept(secret: bytes, user_id: str, request_id: str) -> tuple[str, str, str]:
    """A request id as a tombstone keeps it, and its first message's id in both derivations (the first one still in
    tombstones of older databases), sealed (:mod:`refind_cli.sealed`)."""
    return (
        sealed.request_id(secret, request_id),
        sealed.seal(secret, message_id(user_id, request_id, 0)),
        sealed.seal(secret, legacy_message_id(user_id, request_id, 0)),
    )


def legacy_message_id(user_id: str, request_id: str, index: int) -> str:
    """The first derivation, still found in older databases' rows and tombstones."""
    raw = f"{user_id}\x1f{request_id}\x1f{index}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(raw).hexdigest()[:24]


def sqlite_filename(path: str | Path) -> str:
    """The path as SQLite must be given it: a name that starts with ``file:`` is read as a URI where SQLite is built
    to allow them (``file:x.db`` opened ``x.db``, ``file:x.db?mode=memory`` a database in memory), never the file
    refind created private and checks; ``./`` in front keeps it a plain file name."""
    name = str(path)
    return f"./{name}" if name.startswith("file:") else name


def wal_file(path: str | Path) -> str:
    """Where SQLite keeps the database's write-ahead log: beside the file the path resolves to (a symlink's target),
    not beside the link."""
    import os

    return os.path.realpath(path) + "-wal"


def reading_uri(path: Path) -> str:
    """The URI a reader that must change nothing opens: read-write where the folder can be written (a read-write
    connection, the last to close, removes the -wal and -shm files SQLite makes beside the file; ``PRAGMA
    query_only`` keeps it from writing), read-only where it cannot (SQLite could not make them there), and on a
    read-only file system with no -wal file beside it immutable: SQLite reads a WAL database read-only only through
    its -shm file, which nothing can make there, and no writer can change such a file. The path's bytes are quoted,
    so a name that is not UTF-8 (which a writer opens) is read too."""
    import os
    from urllib.parse import quote

    mode = "rw" if os.access(path.parent if str(path.parent) else ".", os.W_OK) else "ro"
    if mode == "ro" and _read_only_fs(path) and not os.path.exists(wal_file(path)):
        mode += "&immutable=1"
    return f"file:{quote(os.fsencode(path.resolve()))}?mode={mode}"


def _read_only_fs(path: Path) -> bool:
    import os
    import sys

    return sys.platform != "win32" and bool(os.statvfs(path).f_flag & os.ST_RDONLY)


def _create_private(path: Path) -> bool:
    """Create a new database file readable by its owner only (0600): SQLite gives the WAL and shm files it makes
    beside it the same mode. An existing file keeps its mode. True when this call created the file."""
    import os

    if not os.path.lexists(path) and (left := interrupted_removals(path)):
        raise StorageError(
            f"cannot create database {path}: {left[0]} is beside it, left by a removal of an unused database that "
            "was interrupted (remove_if_unused), and may be the database that was at this path — rename it back to "
            f"{path.name} if it is, delete it if not; nothing was created"
        )
    if os.path.islink(path) and not os.path.exists(path):
        # a dangling symlink: O_EXCL refuses the link itself as existing, and SQLite would create its target with the
        # umask's mode (0644) — the target is created private here instead. Not "created" at the path: removing an
        # unused database removes the path, which is the user's link
        try:
            fd = os.open(os.path.realpath(path), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except OSError:  # (made meanwhile, or a loop of links: SQLite's open says what it finds)
            return False
        os.close(fd)
        return False
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return False
    except OSError as exc:
        raise sqlite3.DatabaseError(str(exc)) from exc
    os.close(fd)
    return True


def _check_path(path: Path) -> None:
    """Refuse a path that cannot name a database file: a directory (SQLite said only "unable to open database file",
    as for a disk fault), or one whose folder does not exist — a symlink's target's folder for a link."""
    import os

    from .settings import DEFAULT_DB

    if str(path) == ":memory:":
        return
    if path.is_dir():
        raise InvalidInput(
            f"cannot open database {path}: it is a directory, not a database file; give a file's path, e.g. "
            f"{path / DEFAULT_DB}"
        )
    if path.exists() and not path.is_file():  # (SQLite: "disk I/O error", the words of a failing disk)
        import stat

        mode = path.stat().st_mode
        kinds = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))
        kind = next((name for test, name in kinds if test(mode)), "not a regular file")
        raise InvalidInput(f"cannot open database {path}: it is {kind}, not a database file; give a file's path")
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    for suffix in ("-wal", "-shm", "-journal"):  # a database made there is deleted by the next open of its neighbour
        for named in {path, target}:
            main = named.with_name(named.name.removesuffix(suffix))
            if named.name.endswith(suffix) and main.name and main.is_file():
                raise InvalidInput(
                    f"cannot open database {path}: it is the {suffix[1:]} file SQLite keeps beside the database "
                    f"{main}, and opening that database rewrites or deletes it (what was stored there would be lost); "
                    f"give {main} itself, or a path of its own"
                )
    if target.parent and not target.parent.exists():
        link = f" ({path} is a symbolic link to {target})" if target is not path else ""
        raise RefindError(f"cannot open database {path}: folder {target.parent} does not exist{link}")


class Prepared(NamedTuple):
    """An Add request with what storing it computes ahead of the write (its payload hash and message ids), in plain
    tuples: what a replay's reader process hands the writer (a dataclass per message costs more to pickle and unpickle
    than the rest of the batch). :func:`prepare` makes one of an :class:`AddRequest`."""

    request_id: str
    user_id: str
    session_id: str
    messages: tuple[tuple[str, str, int | None], ...]  # (role, content, said-at) of each message, in order
    digest: str  # AddRequest.payload_hash()
    ids: list[str] | None = None  # message_ids(user_id, request_id, 0, len(messages)); None: derived when stored


def prepare(req: AddRequest, *, ids: bool = False) -> Prepared:
    """The request prepared for storing; its message ids derived now with ``ids`` (else when it is stored: a
    duplicate needs none)."""
    return Prepared(
        req.request_id,
        req.user_id,
        req.session_id,
        tuple((m.role, m.content, m.timestamp) for m in req.messages),
        req.payload_hash(),
        message_ids(req.user_id, req.request_id, 0, len(req.messages)) if ids else None,
    )


MAX_EXPORT_LINE = MAX_LINE_BYTES  # (contract's limit of a replay line; a module global a test can lower)


def _unexportable(req: Prepared) -> InvalidInput | None:
    """Why ``refind export`` could not write ``req`` as a line ``refind add`` reads back (its said-at written, null
    where none was given; JSON's escapes), None when it can: such a request is refused when added, never found
    unreadable in an export later. Measured only past a bound (6 bytes a character at most — an escape —, under 64
    a message's keys): a request of a few MiB costs a sum."""
    limit = MAX_EXPORT_LINE
    chars = len(req.request_id) + len(req.user_id) + len(req.session_id)
    chars += sum(len(role) + len(content) for role, content, _ in req.messages)
    if 6 * chars + 64 * len(req.messages) + 128 <= limit:
        return None
    size = exported_bytes(req.request_id, req.user_id, req.session_id, req.messages)
    if size <= limit:
        return None
    return InvalidInput(
        f"request_id {req.request_id!r}: refind export would write it as a line of {size:,} bytes, over the "
        f"{limit:,} that refind add reads back; split its messages into several requests"
    )


def _ids(req: Prepared) -> list[str]:
    return req.ids if req.ids is not None else message_ids(req.user_id, req.request_id, 0, len(req.messages))


def _conflict(req: AddRequest | Prepared) -> Conflict:
    return Conflict(
        f"request_id {req.request_id!r} of user {req.user_id!r} is already stored with a different "
        "payload; an identical replay is accepted, a changed one is not"
    )


def _forgotten(req: AddRequest | Prepared, stone: tuple[int, int]) -> Forgotten:
    return Forgotten(
        f"request_id {req.request_id!r} of user {req.user_id!r} was forgotten (tombstone {stone[0]}, "
        f"{iso_time(stone[1])}); a forgotten request is not stored again — send it under a new request_id "
        "to store it deliberately"
    )


_INSERT_REQUEST = (
    "INSERT INTO requests (user_id, request_id, session_id, payload_hash, message_count, recorded_at) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
_INSERT_MESSAGE = (
    "INSERT INTO messages (seq, id, user_id, session_id, request_id, idx, role, content, said_at, recorded_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _request_row(req: Prepared, now: int) -> tuple[str, str, str, str, int, int]:
    return (req.user_id, req.request_id, req.session_id, req.digest, len(req.messages), now)


def _message_rows(req: Prepared, first: int, now: int) -> list[tuple[object, ...]]:
    """The ``messages`` rows of a request whose first message gets seq ``first``."""
    user_id, session_id, request_id = req.user_id, req.session_id, req.request_id
    return [
        (first + i, mid, user_id, session_id, request_id, i, role, content, said_at, now)
        for i, (mid, (role, content, said_at)) in enumerate(zip(_ids(req), req.messages))
    ]


# SQLite's primary result codes (the low byte of an extended code) that name a fault of the file, not of the request.
_SQLITE_FULL, _SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_READONLY, _SQLITE_PERM = 13, 5, 6, 8, 3
_SQLITE_CORRUPT, _SQLITE_NOTADB, _SQLITE_CANTOPEN, _SQLITE_IOERR = 11, 26, 14, 10
_SQLITE_READONLY_DBMOVED = 1032  # an extended code: the file was unlinked or renamed while the connection had it


def _read_only(text: str) -> str:
    """The one message of a database that cannot be written, whether opening or writing met it (README's table)."""
    return (
        f"cannot be written ({text}); the file, its folder (SQLite creates the -wal and -shm files beside it) or the "
        "file system is read-only"
    )


def storage_error(exc: sqlite3.Error, path: str | Path | None = None, *, growing_to: int = 0) -> RefindError:
    """The one mapping of a ``sqlite3`` error to refind's error family (the CLI's exit code and the server's status
    follow from the class). The write that met it was rolled back: SQLite stores no part of a transaction.

    A fault of the file (no space, locked, read-only, damaged, I/O) is a :class:`StorageError`; anything else is a
    plain RefindError with status 500, which the server treats as an internal error."""
    if isinstance(exc, RefindError):
        return exc
    extended = getattr(exc, "sqlite_errorcode", None) or 0
    code = extended & 0xFF
    text = str(exc)
    lowered = text.lower()
    where = f"database {path}" if path else "the database"
    if code == _SQLITE_FULL or "disk is full" in lowered or (code == _SQLITE_IOERR and path and _no_space(Path(path))):
        return DiskFull(
            f"{where}: no space left ({text}); nothing of the failed write was stored — free space and retry"
        )
    if code == _SQLITE_IOERR and path and (limit := _size_limit(Path(path), growing_to)) is not None:
        return DiskFull(
            f"{where}: the file size limit of this process ({limit:,} bytes, `ulimit -f`) was reached ({text}); "
            "nothing of the failed write was stored — raise the limit and retry"
        )
    if code in (_SQLITE_BUSY, _SQLITE_LOCKED) or "locked" in lowered:
        return DatabaseLocked(
            f"{where}: locked by another process past the busy timeout ({text}); nothing was written — retry once "
            "the other writer is done (REFIND_BUSY_TIMEOUT waits longer)"
        )
    if extended == _SQLITE_READONLY_DBMOVED:  # not read-only: gone under it
        return FileReplaced(
            f"{where}: the file was deleted or replaced while this process had it open ({text}); nothing was written — "
            "run the command again"
        )
    if code in (_SQLITE_READONLY, _SQLITE_PERM) or "readonly" in lowered or "read-only" in lowered:
        return ReadOnlyDatabase(f"{where}: {_read_only(text)}")
    if code in (_SQLITE_CORRUPT, _SQLITE_NOTADB) or "malformed" in lowered or "not a database" in lowered:
        if path and _holds_json(Path(path)):  # `--db log.jsonl`: not damaged, the wrong file
            from shlex import quote

            return CorruptDatabase(
                f"{where}: damaged or not a SQLite database ({text}); it holds JSON text, not a database: a JSONL log "
                f"is replayed with `refind add --file {quote(str(path))}`, and --db names the database to store it in"
            )
        return CorruptDatabase(
            f"{where}: damaged or not a SQLite database ({text}); restore a copy made by `refind backup` "
            "(`refind inspect --check` reports what is wrong)"
        )
    if code == _SQLITE_CANTOPEN and path and not _writable(Path(path)):
        return ReadOnlyDatabase(f"{where}: {_read_only(text)}")
    if code == _SQLITE_CANTOPEN:
        return StorageError(f"{where}: cannot be opened ({text}); check the path and its folder's permissions")
    if code == _SQLITE_IOERR:
        return StorageError(f"{where}: the disk failed a read or write ({text}); nothing of the write was stored")
    error = RefindError(f"{where}: {text}")  # not a fault of the file (a bug, a schema from elsewhere): exit 1, 500
    error.status, error.kind = 500, "internal"
    return error


def _holds_json(path: Path) -> bool:
    """Whether the file begins as JSON text does (``{`` or ``[`` after a byte order mark or white space): a replay
    log given as --db, which SQLite calls only "not a database"."""
    return _file_head(path, 4096).removeprefix(b"\xef\xbb\xbf").lstrip()[:1] in (b"{", b"[")


def _file_head(path: Path, size: int) -> bytes:
    """The first ``size`` bytes of a regular file (b"" for anything else, or one that cannot be read): opening a
    named pipe would wait for a writer — a hint must never hang the command it explains."""
    try:
        if not path.is_file():
            return b""
        with open(path, "rb") as fh:
            return fh.read(size)
    except OSError:
        return b""


def _no_space(path: Path) -> bool:
    """Whether the database's file system is full (an I/O error there is then the full disk: creating the -shm
    file fails that way)."""
    import shutil

    try:
        return shutil.disk_usage(path.parent if str(path.parent) else ".").free < 64 * 1024
    except OSError:
        return False


def _size_limit(path: Path, growing_to: int = 0) -> int | None:
    """The process's file size limit (RLIMIT_FSIZE: ``ulimit -f``, a container's or a service's limit) when the
    database or its -wal has reached it: a write past it fails with EFBIG (Python ignores SIGXFSZ), which SQLite
    reports as a plain I/O error — "the disk failed", 503 — where it is a limit like a full disk (a probe of round 28).
    None when there is no such limit, or neither file is near it. ``growing_to``: the size the failed write was making
    the file, where the caller knows it — SQLite asks for it at once (a size hint), so a copy of a larger file fails
    with the file still empty."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    except (ImportError, ValueError, OSError):  # not on this platform
        return None
    if soft == resource.RLIM_INFINITY:
        return None
    if growing_to > soft:
        return int(soft)
    for file in (path, Path(f"{path}-wal")):
        with contextlib.suppress(OSError):
            if file.stat().st_size + 64 * 1024 > soft:  # (SQLite wrote up to the limit, a page or a frame at a time)
                return int(soft)
    return None


def _writable(path: Path) -> bool:
    """Whether this process may write the database and its folder (``os.access`` honours a read-only mount)."""
    import os

    folder = path.parent if str(path.parent) else Path(".")
    return os.access(folder, os.W_OK) and (not path.exists() or os.access(path, os.W_OK))


# The database file deleted or replaced under a long-lived process (`rm memory.db`, a restore by `mv`): its open
# connection goes on with the old file, whose writes no later open sees, and a connection opened after creates a new
# file beside the old one's -wal and -shm. Every Store records which file it opened and asks, before each write,
# whether the path still names it (Store.check_file); the long-lived holders (the server, a Memory, `refind mcp`)
# ask before each read too.
FileIdentity = tuple[int, int]
LOCK_SLICE_S = 0.1  # an interruptible write's wait for the lock: how long one wait in C lasts before stop is asked
CHECKPOINT_TIMEOUT_S = 2.0  # how long a forget, sweep or drain waits for readers before it reports the WAL busy
REOPEN = "open the database again (run the command again, restart the server)"  # Store.write's remedy


def _use_wal(conn: sqlite3.Connection, busy_timeout_s: float) -> None:
    """``PRAGMA journal_mode = WAL``, tried again while another process holds the lock it needs, for as long as the
    busy timeout: SQLite answers it "database is locked" at once, without its busy handler (processes opening a new
    file together failed so: 4 of 150 opens in 25 races of six)."""
    waited_until = time.monotonic() + busy_timeout_s
    pause = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc).lower() or time.monotonic() >= waited_until:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


def file_identity(path: str | Path) -> FileIdentity | None:
    """(device, inode) of the file at ``path`` now; None when there is none. While a process holds the file open its
    inode cannot be given to another file of the same device, so an equal identity is the same file."""
    import os

    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def no_database(path: Path, *, from_variable: bool = False) -> NotFound:
    """The refusal of a command that needs a database where none is — naming a file an interrupted removal left
    beside the path, which may be it, and the variable when REFIND_DB, not --db, gave the path."""
    left = interrupted_removals(Path(path))
    hint = f"; {left[0]} beside it was left by an interrupted removal: rename it back if it is yours" if left else ""
    how = "give --db PATH or set REFIND_DB"
    if from_variable:
        how = "REFIND_DB names it: give --db PATH or set REFIND_DB to another"
    return NotFound(f"no database at {path} ({how}){hint or _databases_beside(Path(path))}")


def _databases_beside(path: Path) -> str:
    """A hint naming the SQLite files in ``path``'s folder: the one its name is a typo of (``demo.bd``,
    ``deom.db``), or those there when ``path`` is the default (--db left out: `refind search` after `make demo`)."""
    import difflib
    import itertools
    import os

    from .settings import DEFAULT_DB

    folder = path.parent
    try:
        entries = list(itertools.islice(os.scandir(folder), 1000))
        names = sorted(e.name for e in entries if e.is_file() and _is_sqlite(Path(e.path)))  # (a FIFO's open waits)
    except OSError:
        return ""
    close = difflib.get_close_matches(path.name, names, n=1, cutoff=0.8)
    if close:
        return f"; did you mean {folder / close[0]}?"
    if names and str(path) == DEFAULT_DB:
        listed = ", ".join(names[:3]) + (f" and {len(names) - 3:,} more" if len(names) > 3 else "")
        return f"; SQLite databases in this folder: {listed}"
    return ""


def _is_sqlite(path: Path) -> bool:
    """Whether the file (a regular one: :func:`_file_head`) begins with SQLite's header."""
    return _file_head(path, 16) == b"SQLite format 3\x00"


def _aside_name(path: Path, token: str) -> str:
    """The private name :func:`_unlink_if_same` moves ``path`` to (``token``: 16 hex digits)."""
    return f".{path.name}.{token}.removing"


def interrupted_removals(path: Path) -> list[Path]:
    """The files :func:`_unlink_if_same` moved aside from ``path`` and, interrupted (a process killed between its
    rename and its unlink or putting back), left under their private names."""
    import os
    import re

    pattern = re.compile(re.escape(_aside_name(path, "/")).replace("/", "[0-9a-f]{16}"))  # ("/": in no name)
    try:
        names = os.listdir(path.parent if str(path.parent) else ".")
    except OSError:
        return []
    return [path.with_name(n) for n in sorted(names) if pattern.fullmatch(n)]


def _unlink_if_same(path: Path, identity: FileIdentity | None) -> bool:
    """Unlink the file at ``path`` if it is the one ``identity`` names. It is first moved aside to a private name in
    its folder (a rename is atomic) and checked there: a file renamed onto the path between an earlier check and this
    call is what moves aside, is found not to be it, and is put back — without replacing a file made at the path
    since (a hard link, where the file system has them). True when the file was unlinked."""
    import os
    import secrets
    import warnings

    aside = path.with_name(_aside_name(path, secrets.token_hex(8)))
    os.rename(path, aside)
    if file_identity(aside) == identity:
        os.unlink(aside)
        return True
    try:
        os.link(aside, path, follow_symlinks=False)  # (a symlink put back as itself, not as its target's name)
    except FileExistsError:  # a third file at the path by now: both kept, this one under the private name, said
        warnings.warn(
            f"{path} was replaced while refind removed the empty database it had created there, and another file "
            f"was made at the path since: the file that had replaced it is kept as {aside}",
            RuntimeWarning,
            stacklevel=2,
        )
        return False
    except (OSError, NotImplementedError):  # no hard links here (or none made without following a symlink)
        os.rename(aside, path)
        return False
    os.unlink(aside)
    return False


def check_same_file(path: str | Path, opened: FileIdentity | None, *, holder: str, remedy: str) -> None:
    """Raise FileReplaced (a StorageError) when ``path`` no longer names the file ``opened`` (``file_identity`` when it was opened;
    None: not known, nothing to check). ``holder`` had it open; ``remedy`` makes what is there now usable."""
    if opened is not None and file_identity(path) != opened:
        raise FileReplaced(
            f"database {path}: the file was deleted or replaced while {holder} had it open; nothing was read or "
            f"written — {remedy} to use what is there now"
        )


class StoredMessage(NamedTuple):  # a NamedTuple, not a frozen dataclass: every message read is one (a third the cost)
    seq: int  # arrival order across the whole store
    id: str
    user_id: str
    session_id: str
    request_id: str
    idx: int  # position inside its Add request
    role: str
    content: str
    said_at: int | None  # Unix ms when said (the request's timestamp), None when unknown
    recorded_at: int  # Unix ms when this store received it


@dataclass(frozen=True)
class AddOutcome:
    request_id: str
    user_id: str
    session_id: str
    status: str  # "added" | "duplicate"
    messages: int


@dataclass
class _Batch:
    """What one ``add_many`` transaction has written so far."""

    # The seq of the next message: one above every seq the store ever gave (index_store.last_seq), so never one that
    # a forgotten or expired message had (a message's seq is assigned here, not by SQLite's max(seq) + 1, so every
    # message of the batch is above the index's watermark).
    next_seq: int
    written: list[tuple[int, Prepared]] = field(default_factory=list)  # (first seq, request) of each added request
    added: dict[str, int] = field(default_factory=dict)  # requests added per user
    stoneless: set[str] = field(default_factory=set)  # users seen to have no tombstone at all


def _segments(batch: _Batch, now: int, ahead: Mapping[str, index_store.Segment]) -> dict[str, index_store.Segment]:
    """Each user's new index segment of the batch's written requests, the users in order of their first message: the
    segment built ahead when it holds as many messages as the user's written requests (then they are the same: it
    was built of all of the user's requests of the batch, each of at least one message, and every one was written),
    else one built from the rows written."""
    counts: dict[str, int] = {}
    for _, req in batch.written:
        counts[req.user_id] = counts.get(req.user_id, 0) + len(req.messages)
    usable = {user: seg for user, seg in ahead.items() if counts.get(user) == len(seg.seqs)}
    seqs: dict[str, list[int]] = {user: [] for user in counts}
    rows: list[index_store.Row] = []
    for first, req in batch.written:
        user = req.user_id
        if user in usable:
            seqs[user].extend(range(first, first + len(req.messages)))
        else:
            session = req.session_id
            rows.extend(
                (first + i, user, content, said_at, session, now, i)
                for i, (_, content, said_at) in enumerate(req.messages)
            )
    built = index_store.segments_of_rows(rows)
    return {
        user: built[user] if user not in usable else index_store.placed(usable[user], seqs[user], now)
        for user in counts
    }


MESSAGE_COLUMNS = "seq, id, user_id, session_id, request_id, idx, role, content, said_at, recorded_at"


class Store:
    """One SQLite database file. Not shared across threads: open one per thread."""

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Clock = system_clock,
        retention_days: float | None = None,
        busy_timeout_s: float | None = None,
        index_progress: index_store.Progress | None = None,
        read_only: bool = False,
        until: float | None = None,
    ) -> None:
        """Open (creating and migrating) the database; index messages not yet indexed (an upgraded database's, once),
        reporting to ``index_progress(done, total)``. ``read_only`` (``refind inspect``): open an existing refind
        database of this version and change nothing — no file created, no migration, no index catch-up, no write
        (``PRAGMA query_only``); NotFound for a missing or empty file, RefindError for another program's or another
        version's. ``until`` (``time.monotonic()``): an agent search's deadline — the open's waits for another
        process's lock end by it (at least ``settings.MIN_LOCK_WAIT_S``; then DatabaseLocked, naming the deadline),
        and the index catch-up stops there (resumable: a later open indexes the rest); the connection keeps the
        busy timeout afterwards."""
        from . import settings

        if busy_timeout_s is None:
            busy_timeout_s = settings.busy_timeout_s()
        configured = busy_timeout_s  # what the connection waits for a lock once open
        busy_timeout_s = settings.lock_wait_s(until, configured)  # what the open itself may wait
        self.path = Path(path)
        self.clock = clock
        self.retention_days = retention_days
        self.write_until: float | None = None  # inside busy_timeout(): when a write must stop waiting (monotonic)
        self.write_stop: Callable[[], str | None] | None = None  # inside busy_timeout(): why a write stops waiting
        self.created = False  # this Store created the file (none was at the path): remove_if_unused may remove it
        # each user's forgotten ids, read once while nothing changed the database (_forgotten_ids)
        self._forgotten: dict[str, tuple[tuple[int, int | None, int], ForgottenIds]] = {}
        _check_path(self.path)
        # every write checks that the path still names this file (check_file): no holder — a replay, the server, a
        # Memory — acknowledges writes into a file deleted or replaced under it. Taken before the connection opens
        # the file, so a replacement racing the open can only make a write refuse. Absolute: a chdir changes nothing.
        self._file = self.path.absolute()
        try:
            in_memory = str(path) == ":memory:"  # SQLite's private in-memory database: no file to create or check
            if read_only and not self.path.is_file():
                raise no_database(self.path)
            if not in_memory and not read_only:
                self.created = _create_private(self.path)
            self.identity = None if in_memory else file_identity(self._file)  # which file it opened (device, inode)
            # its -wal file, resolved once (a lend checks it): a symlink swapped later is refused by check_file
            self.wal_path = wal_file(self._file)
            conn = sqlite3.connect(
                reading_uri(self.path) if read_only else sqlite_filename(self.path),
                timeout=busy_timeout_s,
                isolation_level=None,
                check_same_thread=False,
                uri=read_only,
            )
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            try:  # before anything that writes: journal_mode = WAL rewrites the file's header
                migrations.check_current(conn) if read_only else migrations.refuse_foreign(conn)
            except RefindError as exc:
                conn.close()
                raise type(exc)(f"cannot open database {self.path}: {exc.message}") from None
            if read_only:
                conn.execute("PRAGMA query_only = ON")  # (read-write all the same: its close removes the -wal and -shm)
                self._open_done(conn, configured)
                return
            _use_wal(conn, busy_timeout_s)
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = ON")
            # Zero freed and moved bytes on every write, whatever the build's default: forget and expire rely on it
            # (with it off, page splits leave stale copies of text that no later delete can find).
            conn.execute("PRAGMA secure_delete = ON")
            try:
                migrations.apply(conn, self.clock())
            except RefindError as exc:  # a newer refind's schema: refused, nothing written
                conn.close()
                raise RefindError(f"cannot open database {self.path}: {exc.message}") from None
            # a read-only file or a busy writer: searches build from the rows until a later open indexes them. An
            # agent search's open does not wait for another writer's lock to index (its deadline's time is the
            # model's), and stops indexing at the deadline
            with contextlib.suppress(sqlite3.OperationalError):
                if index_store.pending(conn):
                    if until is not None:
                        conn.execute("PRAGMA busy_timeout = 0")
                    index_store.catch_up(conn, index_progress, until=until)
        except sqlite3.Error as exc:
            error = storage_error(exc, self.path)
            if isinstance(error, DatabaseLocked) and busy_timeout_s < configured:  # the deadline ended the wait
                raise DatabaseLocked(
                    f"cannot open database {self.path}: locked by another process until the search's deadline "
                    f"({exc}); nothing was read or written — retry once the other process is done"
                ) from exc
            raise type(error)(f"cannot open {error.message}") from exc
        self._open_done(conn, configured)

    def _open_done(self, conn: sqlite3.Connection, busy_timeout_s: float) -> None:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")  # (the open's own may have been shorter)
        self.conn = conn
        self._drained = False  # _drain_wal ran
        self._db: sqlite_utils.Database | None = None
        self.index_db_id: str | None = None  # the search index's id of this file (index_cache reads it once)

    @property
    def db(self) -> sqlite_utils.Database:
        """sqlite-utils over this connection, for writes (``atomic()``); imported on first use, so the read-only
        search path of a short-lived process does not pay for it."""
        if self._db is None:
            import sqlite_utils

            self._db = sqlite_utils.Database(self.conn)
        return self._db

    holder = "this process"  # who had the file open, and what to do, in check_file's message (a holder may set its own)
    remedy = REOPEN

    def check_file(self) -> None:
        """FileReplaced when the path no longer names the file this Store opened (deleted or replaced since); its
        write-ahead log is drained first (:meth:`_drain_wal`)."""
        try:
            check_same_file(self._file, self.identity, holder=self.holder, remedy=self.remedy)
        except FileReplaced:
            self._drain_wal()
            raise

    def _drain_wal(self) -> None:
        """Move what this connection wrote to the write-ahead log into the file it opened, and empty the log. The log
        is named after the path, and SQLite neither checkpoints nor removes it when the file was moved: left as it
        is, the next open of whatever file the path names now — a backup restored by ``mv``, a new database after
        ``rm`` — replays this file's pages over it, silently. Emptied, it is harmless; and a copy of the old file
        kept under another name (``mv memory.db old.db``) gets its last commits. Only by a connection that wrote (a
        reader has nothing of its own there, and a process that opened the new file meanwhile shares the log: its
        commits must not be moved into the old file), once, and best effort: never inside a transaction."""
        if self._drained:
            return
        with contextlib.suppress(sqlite3.Error):  # (ProgrammingError included: a connection closed already)
            if self.conn.total_changes and not self.conn.in_transaction:
                self.checkpoint(CHECKPOINT_TIMEOUT_S)
                self._drained = True

    @contextmanager
    def busy_timeout(self, seconds: float, stop: Callable[[], str | None] | None = None) -> Iterator[None]:
        """Writes inside wait at most ``seconds`` for another process's write lock (then fail as locked), instead of
        the connection's own busy timeout (REFIND_BUSY_TIMEOUT). With ``stop`` (an agent search's trace:
        ``model.interruption``), :meth:`write` waits for the lock in slices of :data:`LOCK_SLICE_S` and gives up
        (:class:`LockWaitInterrupted`) once ``stop`` names a reason: SQLite's busy wait runs in C, where a SIGTERM's
        handler does not run, and an interrupted search waited out the whole deadline (120 s) to exit."""
        before = self.conn.execute("PRAGMA busy_timeout").fetchone()[0]
        self.conn.execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")
        self.write_until = time.monotonic() + seconds  # a wait before SQLite's (the server's write queue) counts too
        self.write_stop = stop
        try:
            yield
        finally:
            self.write_until = None
            self.write_stop = None
            self.conn.execute(f"PRAGMA busy_timeout = {int(before)}")

    def _begin_immediate(self) -> None:
        """``BEGIN IMMEDIATE``: inside :meth:`busy_timeout` with a ``stop``, its wait for another process's write lock
        is taken in short slices, each followed by a look at ``stop`` — for as long in all as without it."""
        stop, until = self.write_stop, self.write_until
        if stop is None or until is None:
            self.conn.execute("BEGIN IMMEDIATE")
            return
        before = self.conn.execute("PRAGMA busy_timeout").fetchone()[0]
        try:
            while True:
                left = max(until - time.monotonic(), 0.0)
                self.conn.execute(f"PRAGMA busy_timeout = {int(min(left, LOCK_SLICE_S) * 1000)}")
                try:
                    self.conn.execute("BEGIN IMMEDIATE")
                    return
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc).lower() or time.monotonic() >= until:
                        raise
                    if (why := stop()) is not None:
                        raise LockWaitInterrupted(
                            f"database {self.path}: interrupted ({why}) while waiting for another process's lock; "
                            "nothing was written"
                        ) from None
        finally:
            self.conn.execute(f"PRAGMA busy_timeout = {int(before)}")

    def checkpoint(self, timeout_s: float | None = None) -> bool:
        """Copy the WAL into the database file and truncate it to zero bytes; False if readers kept it busy. SQLite
        waits for readers through the busy handler, and new writers wait while it does: ``timeout_s`` caps that
        wait (None: the connection's own busy timeout)."""
        if timeout_s is None:
            busy, _, _ = self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            return not busy
        with self.busy_timeout(timeout_s):
            busy, _, _ = self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return not busy

    def close(self) -> None:
        with contextlib.suppress(FileReplaced):  # (drains a moved file's log: see _drain_wal)
            self.check_file()
        self.conn.close()

    def remove_if_unused(self) -> bool:
        """Close, and remove the database file when this Store created it and it holds nothing but what opening it
        wrote (the schema, its migrate events, the index's and the tombstones' keys): a command that stored nothing
        (a replay whose every line was refused) leaves no trace. True when the file was removed.

        Never a file that was there before the open (``created``), nor one that anyone else may use: the path must
        still name the file this Store opened; leaving WAL mode (which also removes the -wal and -shm files) needs
        the only connection to the file, so any other connection that has read it refuses the change at once (busy
        timeout 0); the exclusive lock then taken keeps every other connection out while the file is checked again
        and unlinked. A process that opened the path meanwhile but has not read it yet gets the unlinked file: a
        refind Store refuses to write there (``check_file``: the path no longer names it). Anything unexpected
        keeps the file; the connection is closed either way (``close`` after it does nothing more). The file is
        unlinked under a private name it was first moved to (:func:`_unlink_if_same`), so a database renamed onto
        the path after the last check is never the one removed."""
        removed = False
        conn = self.conn
        try:
            if self.created and file_identity(self._file) == self.identity and self._unused():
                conn.execute("PRAGMA busy_timeout = 0")
                if str(conn.execute("PRAGMA journal_mode = DELETE").fetchone()[0]).lower() == "delete":
                    conn.execute("BEGIN EXCLUSIVE")
                    try:
                        if file_identity(self._file) == self.identity and self._unused():
                            removed = _unlink_if_same(self._file, self.identity)
                    finally:
                        conn.execute("ROLLBACK")
        except (sqlite3.Error, OSError):  # locked, another connection, a folder that cannot be written: kept
            pass
        if removed:
            self.identity = None  # nothing to check or drain: the file is gone, by this Store's own hand
            conn.close()
        else:
            self.close()
        return removed

    def _unused(self) -> bool:
        """Nothing is stored but what opening a new file wrote: no user's data, search, tombstone or setting, and no
        event but migrations."""
        for table in ("requests", "messages", "users", "tombstones", "searches", "settings", "index_segments"):
            if self.conn.execute(f"SELECT EXISTS (SELECT 1 FROM {table})").fetchone()[0]:
                return False
        return not self.conn.execute("SELECT EXISTS (SELECT 1 FROM events WHERE kind != 'migrate')").fetchone()[0]

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- writing -------------------------------------------------------------------------------------------

    @contextmanager
    def write(self) -> Iterator[sqlite_utils.Database]:
        """A write transaction that holds SQLite's write lock from its first statement.

        One that changed nothing — no row (``total_changes`` did not move) and no schema (DDL, which ``total_changes``
        does not count: the file's ``schema_version`` did not move) — is rolled back: no write-log entry, no page written. An identical
        replay, a forget or expire with nothing to remove then answers as it would anywhere, also while a full disk,
        a file size limit or a read-only file refuses every write (its own grant and write-log rows were all it
        wrote). On a read-only file its grant is refused at once: the transaction goes on without one, and a
        statement that writes is refused as read-only, as it would have been."""
        if self.conn.in_transaction:
            with self.db.atomic():
                yield self.db
            return
        self.check_file()  # (outside the transaction: a moved file's log is drained before the refusal)
        self._begin_immediate()
        try:
            _grant(self.conn, self.path)
            before = self.conn.total_changes, self._schema_version()  # (after the grant's own row)
            yield self.db
            if (self.conn.total_changes, self._schema_version()) == before:
                self.conn.execute("ROLLBACK")  # nothing to commit (the grant is undone with it)
                return
            index_store.mark_written(self.conn)  # what a process's cached indexes check they descend from
            migrations.revoke(self.conn)  # never committed: an older refind's writes stay refused
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise
        else:
            try:
                self.conn.execute("COMMIT")
            except BaseException:
                # A failed COMMIT can leave the transaction open (a deferred constraint, SQLITE_BUSY): end it, or
                # every later write() would nest in it as a savepoint and report success without ever committing.
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise

    def _schema_version(self) -> int:
        """SQLite's count of the file's schema changes (CREATE, ALTER, DROP…: what ``total_changes`` does not see)."""
        return int(self.conn.execute("PRAGMA schema_version").fetchone()[0])

    @contextmanager
    def reading(self) -> Iterator[None]:
        """One read snapshot (WAL: what was committed when its first statement ran, whatever is committed during it),
        for reads that must agree — a search's version check, segments, parts and text. Inside a transaction
        already: that one."""
        if self.conn.in_transaction:
            yield
            return
        self.conn.execute("BEGIN")
        try:
            yield
        finally:
            if self.conn.in_transaction:
                self.conn.execute("COMMIT")  # (it wrote nothing)

    def add(self, request: AddRequest) -> AddOutcome:
        """Store one Add request all-or-nothing. Identical replay → ``duplicate``; other payload → Conflict."""
        outcome = self.add_many([request])[0]
        if isinstance(outcome, RefindError):
            raise outcome
        return outcome

    def add_many(self, requests: Iterable[AddRequest]) -> list[AddOutcome | RefindError]:
        """Store many requests in one transaction, each inside its own savepoint (all-or-nothing per request).

        Returns one outcome per request, in order: an AddOutcome, or the RefindError that refused it.
        """
        return self.add_prepared(prepare(r) for r in requests)

    def add_prepared(
        self,
        requests: Iterable[Prepared],
        *,
        segments: Mapping[str, index_store.Segment] | None = None,
    ) -> list[AddOutcome | RefindError]:
        """``add_many`` of requests prepared beforehand. ``segments``: each user's index segment of all of that
        user's ``requests`` in order, built ahead (seqs and recorded-at are placed here); used for a user whose
        requests were all added, built from the written rows for any other.

        Requests that are all identical replays of stored ones write nothing (:meth:`write` rolls a transaction that
        changed nothing back), so a full disk, a file size limit or a read-only file refuses none of them. Another
        process holding the write lock past the busy timeout refuses the transaction before anything is read: such a
        batch is then answered from what is stored (:meth:`stored_replays`, one read) when every request in it is
        an identical replay, and the lock's error is raised otherwise (the server's writer then answers each
        request of the refused batch from that read itself)."""
        requests = list(requests)
        try:
            with self.write():
                now = self.clock()
                stored = index_store.max_seq(self.conn)
                # one above every seq ever given: never one that a forgotten or expired message had
                batch = _Batch(next_seq=index_store.last_seq(self.conn, stored) + 1)
                together = self._add_together(requests, now, batch) if len(requests) > 1 else None
                outcomes = together if together is not None else self._add_each(requests, now, batch)
                self.bump_users(batch.added)  # users.version goes up by one per request added
                if batch.written:
                    index_store.mark_assigned(self.conn, batch.next_seq - 1)
                # the maintained index changes in the same transaction, from the rows just written (not read back)
                if batch.written and index_store.indexing(self.conn, stored):
                    index_store.write_segments(self.conn, _segments(batch, now, segments or {}))
                    index_store.mark_indexed(self.conn, batch.next_seq - 1)
        except sqlite3.OperationalError as exc:
            # a client sending its stored batch again after a timeout must not be told to retry what was stored
            if not isinstance(storage_error(exc, self.path), DatabaseLocked):
                raise
            replayed = self.stored_replays(requests)
            if replayed is None or any(r is None for r in replayed):
                raise
            return [r for r in replayed if r is not None]
        return outcomes

    def stored_replays(self, requests: Sequence[Prepared]) -> list[AddOutcome | None] | None:
        """For each of ``requests``: ``duplicate`` when it is an identical replay of a stored request that retention
        still keeps, else None (one read snapshot, no write lock); None in place of the list when the read fails."""
        try:
            with self.reading():
                stored = self._stored_requests(list(requests))
                cutoff = self.retention_cutoff() if stored else None
        except sqlite3.Error:
            return None
        answers: list[AddOutcome | None] = []
        for req in requests:
            row = stored.get((req.user_id, req.request_id))
            kept = row is not None and row[0] == req.digest and (cutoff is None or row[1] >= cutoff)
            answers.append(AddOutcome(req.request_id, req.user_id, req.session_id, "duplicate", 0) if kept else None)
        return answers

    def _add_each(self, requests: list[Prepared], now: int, batch: _Batch) -> list[AddOutcome | RefindError]:
        """Store each request in its own savepoint: a request that fails (its ids collide with stored ones) is rolled
        back alone."""
        outcomes: list[AddOutcome | RefindError] = []
        execute = self.conn.execute
        for request in requests:
            execute("SAVEPOINT refind_add")
            try:
                outcome = self._add_one(request, now, batch)
            except (RefindError, sqlite3.IntegrityError) as exc:  # refuse this request alone, never the batch
                self._roll_back_request()
                outcomes.append(
                    exc
                    if isinstance(exc, RefindError)
                    else Conflict(
                        f"request_id {request.request_id!r} of user {request.user_id!r} cannot be stored: {exc} "
                        "(its stable message ids collide with stored ones)"
                    )
                )
                continue
            except BaseException:
                self._roll_back_request()
                raise
            execute("RELEASE refind_add")
            outcomes.append(outcome)
        return outcomes

    def _add_together(self, requests: list[Prepared], now: int, batch: _Batch) -> list[AddOutcome | RefindError] | None:
        """Store the requests with one statement per table (what ``_add_each`` stores, row for row, in the same
        order): the stored rows they meet are read with one query per user, then the requests, messages and events
        to add are each inserted by one ``executemany``. None, with nothing written, when the batch needs
        ``_add_each``: a request past retention to expire first, or ids that collide with stored ones (``batch`` is
        changed only once the rows are written)."""
        conn = self.conn
        stored = self._stored_requests(requests)
        cutoff = self.retention_cutoff() if stored else None
        outcomes: list[AddOutcome | RefindError] = []
        fresh: dict[tuple[str, str], str] = {}  # requests added by this batch: their payload hash
        added: list[Prepared] = []
        for req in requests:
            key = (req.user_id, req.request_id)
            row = stored.get(key)
            if row is not None and cutoff is not None and row[1] < cutoff:
                return None  # expire it first, as _add_one does
            digest = row[0] if row is not None else fresh.get(key)
            if digest is not None:
                if digest == req.digest:
                    outcomes.append(AddOutcome(req.request_id, req.user_id, req.session_id, "duplicate", 0))
                else:
                    outcomes.append(_conflict(req))
                continue
            stone = self._stone(req, batch)
            if stone is not None:
                outcomes.append(_forgotten(req, stone))
                continue
            if (unexportable := _unexportable(req)) is not None:
                outcomes.append(unexportable)
                continue
            fresh[key] = req.digest
            added.append(req)
            outcomes.append(AddOutcome(req.request_id, req.user_id, req.session_id, "added", len(req.messages)))
        first = batch.next_seq
        rows: list[tuple[object, ...]] = []
        written: list[tuple[int, Prepared]] = []
        for req in added:
            rows += _message_rows(req, first, now)
            written.append((first, req))
            first += len(req.messages)
        conn.execute("SAVEPOINT refind_add")
        try:
            conn.executemany(_INSERT_REQUEST, [_request_row(r, now) for r in added])
            conn.executemany(_INSERT_MESSAGE, rows)
            conn.executemany(
                "INSERT INTO events (at, kind, user_id, session_id, request_id, rows, detail) "
                "VALUES (?, 'add', ?, ?, ?, ?, NULL)",
                [(self.clock(), r.user_id, r.session_id, r.request_id, len(r.messages)) for r in added],
            )
        except sqlite3.IntegrityError:  # ids that collide with stored ones: _add_each refuses those requests alone
            self._roll_back_request()
            return None
        except BaseException:
            self._roll_back_request()
            raise
        conn.execute("RELEASE refind_add")
        batch.next_seq = first
        batch.written += written
        for req in added:
            batch.added[req.user_id] = batch.added.get(req.user_id, 0) + 1
        return outcomes

    def _stone(self, req: Prepared, batch: _Batch) -> tuple[int, int] | None:
        """The tombstone that refuses ``req`` (its request was forgotten), if any. Most users never forgot anything:
        one look per user and batch (no Add writes a tombstone, so the look stays true for the batch)."""
        if req.user_id in batch.stoneless:
            return None
        if self.has_tombstones(req.user_id):
            return self.tombstone_for(req.user_id, req.request_id)
        batch.stoneless.add(req.user_id)
        return None

    def _stored_requests(self, requests: list[Prepared]) -> dict[tuple[str, str], tuple[str, int]]:
        """(payload hash, recorded-at) of each of the requests already stored, by (user, request id)."""
        by_user: dict[str, list[str]] = {}
        for req in requests:
            by_user.setdefault(req.user_id, []).append(req.request_id)
        out: dict[tuple[str, str], tuple[str, int]] = {}
        for user_id, ids in by_user.items():
            for i in range(0, len(ids), 500):
                part = ids[i : i + 500]
                for rid, digest, recorded_at in self.conn.execute(
                    "SELECT request_id, payload_hash, recorded_at FROM requests "
                    f"WHERE user_id = ? AND request_id IN ({','.join('?' * len(part))})",
                    [user_id, *part],
                ):
                    out[(user_id, rid)] = (digest, recorded_at)
        return out

    def _roll_back_request(self) -> None:
        # An error such as a failed COMMIT can have ended the transaction, savepoint included: then there is
        # nothing to undo here, and write() reports the error.
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK TO refind_add")
            self.conn.execute("RELEASE refind_add")

    def _add_one(self, req: Prepared, now: int, batch: _Batch) -> AddOutcome:
        user_id, request_id, session_id = req.user_id, req.request_id, req.session_id
        row = self.conn.execute(
            "SELECT payload_hash, recorded_at FROM requests WHERE user_id = ? AND request_id = ?", (user_id, request_id)
        ).fetchone()
        cutoff = None if row is None else self.retention_cutoff()
        if row is not None and cutoff is not None and row[1] < cutoff:
            # Past retention, only awaiting the sweep: hidden from every read, so it is expired already. A replay
            # stores it again as new data, as after the sweep — never an "identical replay" that stores nothing.
            self._expire_request(user_id, request_id, cutoff)
            row = None
        if row is not None:
            if row[0] == req.digest:
                return AddOutcome(request_id, user_id, session_id, "duplicate", 0)
            raise _conflict(req)
        stone = self._stone(req, batch)
        if stone is not None:
            raise _forgotten(req, stone)
        if (unexportable := _unexportable(req)) is not None:
            raise unexportable
        count = len(req.messages)
        self.conn.execute(_INSERT_REQUEST, _request_row(req, now))
        first = batch.next_seq
        self.conn.executemany(_INSERT_MESSAGE, _message_rows(req, first, now))
        self.record_event("add", user_id=user_id, session_id=session_id, request_id=request_id, rows=count)
        # written: now the batch may count it (a refused request's savepoint is rolled back before this point)
        batch.next_seq = first + count
        batch.added[user_id] = batch.added.get(user_id, 0) + 1
        batch.written.append((first, req))
        return AddOutcome(request_id, user_id, session_id, "added", count)

    def check(self, req: Prepared) -> RefindError | None:
        """What ``add`` would refuse this request with right now (Conflict, Forgotten, or InvalidInput for a request
        export could not write back), without writing; None when it would be stored or is an identical replay."""
        row = self.conn.execute(
            "SELECT payload_hash, recorded_at FROM requests WHERE user_id = ? AND request_id = ?",
            (req.user_id, req.request_id),
        ).fetchone()
        cutoff = self.retention_cutoff()
        if row is not None and (cutoff is None or row[1] >= cutoff):
            return None if row[0] == req.digest else _conflict(req)
        stone = self.tombstone_for(req.user_id, req.request_id)
        return _forgotten(req, stone) if stone is not None else _unexportable(req)

    def _expire_request(self, user_id: str, request_id: str, cutoff: int) -> None:
        """Delete one expired request as ``refind expire`` would: its messages, its row, the stored searches
        quoting them, with an ``expire`` event."""
        from .trace import quoting_searches

        rows = self.conn.execute(
            "SELECT seq, id, content FROM messages WHERE user_id = ? AND request_id = ?", (user_id, request_id)
        ).fetchall()
        old = [(mid, content) for _, mid, content in rows]
        searches = quoting_searches(self.conn, user_id, old)
        index_store.remove(self.conn, user_id, [seq for seq, _, _ in rows])
        self.conn.execute("DELETE FROM messages WHERE user_id = ? AND request_id = ?", (user_id, request_id))
        self.conn.execute("DELETE FROM requests WHERE user_id = ? AND request_id = ?", (user_id, request_id))
        self.conn.executemany("DELETE FROM searches WHERE id = ?", [(i,) for i in searches])
        self.record_event(
            "expire",
            user_id=user_id,
            request_id=request_id,
            rows=len(old),
            detail={"cutoff": cutoff, "requests": 1, "searches": len(searches), "replayed": True},
        )

    def bump_user(self, user_id: str) -> None:
        """Mark a user's data as changed: every cache keyed on the user's version becomes stale."""
        self.bump_users({user_id: 1})

    def bump_users(self, changes: Mapping[str, int]) -> None:
        """Raise each user's version by its count of changes (one statement for a batch's users)."""
        self.conn.executemany(
            "INSERT INTO users (user_id, version) VALUES (?, ?) "
            "ON CONFLICT (user_id) DO UPDATE SET version = version + excluded.version",
            changes.items(),
        )

    def record_event(
        self,
        kind: str,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        request_id: str | None = None,
        rows: int = 0,
        detail: dict[str, Any] | None = None,
    ) -> None:
        self.conn.execute(
            "INSERT INTO events (at, kind, user_id, session_id, request_id, rows, detail) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                self.clock(),
                kind,
                user_id,
                session_id,
                request_id,
                rows,
                json.dumps(detail, ensure_ascii=False, sort_keys=True) if detail else None,
            ),
        )

    # ---- reading -------------------------------------------------------------------------------------------

    def retention_cutoff(self) -> int | None:
        """The oldest recorded-at still visible, or None when retention is off."""
        return self.cutoff(self.retention_days)

    def cutoff(self, days: float | None) -> int | None:
        """The recorded-at before which a window of ``days`` ends now; None for no window (retention off)."""
        return None if days is None else self.clock() - int(days * DAY_MS)

    def visible(self, *, as_of: int | None = None, alias: str = "") -> tuple[str, list[int]]:
        """The read-time predicate every read of message rows must apply: retention, and what was stored by as_of."""
        col = f"{alias}recorded_at"
        clauses, params = [], []
        cutoff = self.retention_cutoff()
        if cutoff is not None:
            clauses.append(f"{col} >= ?")
            params.append(cutoff)
        if as_of is not None:
            clauses.append(f"{col} <= ?")
            params.append(as_of)
        return (" AND ".join(clauses) or "1"), params

    def user_messages(self, user_id: str, *, as_of: int | None = None) -> list[StoredMessage]:
        """Every visible message of one user, in arrival order: the only path by which content reaches retrieval."""
        predicate, params = self.visible(as_of=as_of)
        rows = self.conn.execute(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE user_id = ? AND {predicate} ORDER BY seq",
            [user_id, *params],
        )
        return [StoredMessage(*row) for row in rows]

    def tombstone_for(self, user_id: str, request_id: str) -> tuple[int, int] | None:
        """(id, at) of the newest tombstone that removed this request of this user, or None: named by its id or its
        first message's (each as a tombstone keeps it, sealed: :mod:`refind_cli.sealed`)."""
        return self._forgotten_ids(user_id).newest(*_as_kept(sealed.key(self.conn), user_id, request_id))

    def session_started(self, user_id: str, session_id: str) -> bool:
        """Whether any message of this session of this user is stored."""
        return (
            self.conn.execute(
                "SELECT 1 FROM messages WHERE user_id = ? AND session_id = ? LIMIT 1", (user_id, session_id)
            ).fetchone()
            is not None
        )

    def request_after(
        self, user_id: str, session_id: str, request_id: str | None, *, count: int
    ) -> tuple[str, int, list[tuple[str, str, int | None]]] | None:
        """The request stored next in this session after ``request_id``'s last message (the session's first when None;
        None when ``request_id`` holds no message): its id, message count and first ``count`` messages as (role,
        content, said-at). Where a replay looks for a group it holds the start of (a shorter, older copy of a log)."""
        after = -1
        if request_id is not None:
            row = self.conn.execute(
                "SELECT max(seq) FROM messages WHERE user_id = ? AND request_id = ?", (user_id, request_id)
            ).fetchone()
            if row is None or row[0] is None:
                return None
            after = row[0]
        row = self.conn.execute(
            "SELECT request_id FROM messages WHERE user_id = ? AND session_id = ? AND seq > ? ORDER BY seq LIMIT 1",
            (user_id, session_id, after),
        ).fetchone()
        if row is None:
            return None
        total = self.conn.execute(
            "SELECT message_count FROM requests WHERE user_id = ? AND request_id = ?", (user_id, row[0])
        ).fetchone()
        said = self.conn.execute(
            "SELECT role, content, said_at FROM messages WHERE user_id = ? AND request_id = ? AND idx < ? ORDER BY idx",
            (user_id, row[0], count),
        ).fetchall()
        return row[0], (total[0] if total else len(said)), [tuple(r) for r in said]

    def holds_request(self, user_id: str, request_id: str) -> bool:
        """Whether a message of this request of this user is stored."""
        row = self.conn.execute(
            "SELECT 1 FROM messages WHERE user_id = ? AND request_id = ? LIMIT 1", (user_id, request_id)
        ).fetchone()
        return row is not None

    def said_at_rows(
        self, user_id: str, session_id: str, times: Sequence[int] | None
    ) -> Iterator[tuple[int, int, bool, str, str, str]]:
        """The stored messages of this session said at these times (None: at any), one row per said-at, read one at a
        time (a session's text is never all in memory at once): (said-at, how many were said then, whether they are
        all one message — the same role and content —, their request ids joined by NUL, and one's role and content).
        Where a replay looks
        for a group's messages stored already (a shorter, older copy of a log; a group stored without a line an older
        refind refused): a message is told apart by its said-at when it is the only one of its session said then (or
        every message said then is the same one: its copies)."""
        if times is None:
            where, wanted = "said_at IS NOT NULL", []
        else:
            wanted = sorted(set(times))
            where = f"said_at IN ({','.join('?' * len(wanted))})"
        rows = self.conn.execute(
            "SELECT said_at, count(*), min(role) = max(role) AND min(content) = max(content), "
            "group_concat(request_id, char(0)), role, content "
            f"FROM messages WHERE user_id = ? AND session_id = ? AND {where} GROUP BY said_at",
            [user_id, session_id, *wanted],
        )
        for t, n, same, rid, role, content in rows:
            yield int(t), int(n), bool(same), rid, role, content

    def said_at_in_requests(
        self, user_id: str, session_id: str, request_ids: Collection[str], times: Sequence[int]
    ) -> list[tuple[int, str, str, str]]:
        """The messages of these requests of this session said at these times: (said-at, request id, role, content),
        one row per message. Where a replay finds a message whose millisecond holds other messages too (an edited
        line beside its old text) in a request that holds the group's other messages."""
        ids, wanted = sorted(set(request_ids)), sorted(set(times))
        rows = self.conn.execute(
            "SELECT said_at, request_id, role, content FROM messages WHERE user_id = ? AND session_id = ? "
            f"AND request_id IN ({','.join('?' * len(ids))}) AND said_at IN ({','.join('?' * len(wanted))})",
            [user_id, session_id, *ids, *wanted],
        )
        return [(int(t), rid, role, content) for t, rid, role, content in rows]

    def latest_said_at(self, user_id: str, session_id: str) -> int | None:
        """The latest said-at of this session's stored messages (None when none carries one)."""
        row = self.conn.execute(
            "SELECT max(said_at) FROM messages WHERE user_id = ? AND session_id = ?", (user_id, session_id)
        ).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def sessions_with_request_prefix(self, user_id: str, prefix: str) -> set[str]:
        """The sessions of this user that hold a request whose id begins with ``prefix`` (a replay's chained requests,
        :mod:`auto_ids`), or held one that a tombstone names: one range of the messages-by-request index, one of the
        tombstones'."""
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        sessions: set[str] = set()
        for table in ("messages", "tombstones"):
            rows = self.conn.execute(
                f"SELECT DISTINCT session_id FROM {table} WHERE user_id = ? AND request_id >= ? AND request_id < ?",
                (user_id, prefix, end),
            )
            sessions.update(row[0] for row in rows)
        return sessions

    def session_tombstones(self, user_id: str, session_id: str) -> list[tuple[int, int, list[str], list[str] | None]]:
        """(id, at, content hashes, said hashes) of the tombstones that cover this session of this user — the user's,
        the session's, its requests' — newest first: each message's keyed hashes, in the messages' order; the said
        hashes of this session's messages only (a user's tombstone covers all its sessions; one written before m013
        keeps no session per message: all of them), None in a tombstone written before m012."""
        rows = self.conn.execute(
            "SELECT id, at, content_hashes, said_hashes, said_sessions FROM tombstones WHERE user_id = ? "
            "AND (scope = 'user' OR session_id = ?) ORDER BY id DESC",
            (user_id, session_id),
        )
        out: list[tuple[int, int, list[str], list[str] | None]] = []
        mine: str | None = None
        for i, at, content, said_json, sessions_json in rows:
            contents, said, sessions = json.loads(content), json.loads(said_json), json.loads(sessions_json)
            if len(said) != len(contents):
                out.append((int(i), int(at), contents, None))
                continue
            if len(sessions) == len(said):
                mine = mine or sealed.seal(sealed.key(self.conn), session_id)
                said = [h for h, s in zip(said, sessions) if s == mine]
            out.append((int(i), int(at), contents, said))
        return out

    def has_tombstones(self, user_id: str) -> bool:
        return (
            self.conn.execute("SELECT 1 FROM tombstones WHERE user_id = ? LIMIT 1", (user_id,)).fetchone() is not None
        )

    def known_requests(self, user_id: str, request_ids: Iterable[str]) -> dict[str, tuple[int, int] | None]:
        """Which of these request ids of this user are known: stored and within retention (None), or forgotten (the
        newest tombstone's (id, at), as :meth:`tombstone_for`). A request stored past retention counts as neither: the
        sweep will remove it, and a replay stores it again."""
        wanted = list(dict.fromkeys(request_ids))
        cutoff = self.retention_cutoff()
        known: dict[str, tuple[int, int] | None] = {}
        for i in range(0, len(wanted), 500):
            part = wanted[i : i + 500]
            for rid, recorded_at in self.conn.execute(
                "SELECT request_id, recorded_at FROM requests "
                f"WHERE user_id = ? AND request_id IN ({','.join('?' * len(part))})",
                [user_id, *part],
            ):
                if cutoff is None or recorded_at >= cutoff:
                    known[rid] = None
        rest = [rid for rid in wanted if rid not in known]
        if not rest or not self.has_tombstones(user_id):
            return known
        # a forgotten request is named by its id or by its first message's id, each as the tombstone keeps it
        # (sealed); the newest tombstone naming it either way is the one reported
        secret = sealed.key(self.conn)
        forgotten = self._forgotten_ids(user_id)
        for rid in rest:
            stone = forgotten.newest(*_as_kept(secret, user_id, rid))
            if stone is not None:
                known[rid] = stone
        return known

    def _forgotten_ids(self, user_id: str) -> ForgottenIds:
        """The request and message ids the user's tombstones keep, each with the newest tombstone keeping it — read
        once, and again only when the user's tombstones may have changed: another connection committed (data_version),
        or their newest id or count differs (this connection writes tombstones only by inserting them: forget). A
        replay asks for every group of its lines, and a tombstone of a forgotten session of 200,000 messages was
        decoded (or searched with instr) at each: a replay after such a forget took 218 s, 3 s without the forget."""
        (version,) = self.conn.execute("PRAGMA data_version").fetchone()
        newest, count = self.conn.execute(
            "SELECT max(id), count(*) FROM tombstones WHERE user_id = ?", (user_id,)
        ).fetchone()
        stamp = (version, newest, count)
        cached = self._forgotten.get(user_id)
        if cached is not None and cached[0] == stamp:
            self._forgotten[user_id] = self._forgotten.pop(user_id)  # (read last: evicted last)
            return cached[1]
        requests: dict[str, tuple[int, int]] = {}
        messages: dict[str, tuple[int, int]] = {}
        for stone, at, kept_id, ids in self.conn.execute(
            "SELECT id, at, request_id, message_ids FROM tombstones WHERE user_id = ? ORDER BY id", (user_id,)
        ):
            found = (int(stone), int(at))
            if kept_id is not None:
                requests[kept_id] = found
            messages.update(dict.fromkeys(json.loads(ids), found))
        forgotten = ForgottenIds(requests, messages)
        # a few users' at a time: a replay asks user by user, but the server's batches interleave users (one user's
        # alone made two users with big tombstones decode them again at each other's Add: 1.7× the Adds' time)
        kept = self._forgotten
        kept.pop(user_id, None)
        kept[user_id] = (stamp, forgotten)
        while len(kept) > 1 and (len(kept) > FORGOTTEN_USERS or sum(v[1].size for v in kept.values()) > FORGOTTEN_IDS):
            del kept[next(iter(kept))]  # the least recently read first
        return forgotten

    def has_messages(self, user_id: str, *, as_of: int | None = None, hidden_too: bool = False) -> bool:
        """Whether the user has a visible message (retention and ``as_of`` as every read applies them); with
        ``hidden_too``, any message stored at all."""
        predicate, params = ("1", []) if hidden_too else self.visible(as_of=as_of)
        row = self.conn.execute(
            f"SELECT 1 FROM messages WHERE user_id = ? AND {predicate} LIMIT 1", [user_id, *params]
        ).fetchone()
        return row is not None

    def user_version(self, user_id: str) -> int:
        row = self.conn.execute("SELECT version FROM users WHERE user_id = ?", (user_id,)).fetchone()
        return row[0] if row else 0

    def counts(self) -> dict[str, int]:
        q = self.conn.execute
        return {
            "users": q("SELECT count(DISTINCT user_id) FROM messages").fetchone()[0],
            "sessions": q("SELECT count(*) FROM (SELECT DISTINCT user_id, session_id FROM messages)").fetchone()[0],
            "requests": q("SELECT count(*) FROM requests").fetchone()[0],
            "messages": q("SELECT count(*) FROM messages").fetchone()[0],
        }
