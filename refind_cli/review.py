"""Read-only queries behind ``refind inspect``: overview, users, one user, one session, one turn, the audit log.

Every query of message rows applies the store's read-time predicate (``Store.visible``), so what is past retention
is never shown, only counted as "awaiting the sweep". Times are Unix milliseconds; said-at (when it was said) and
recorded-at (when this store received it) are kept apart everywhere. Returns plain dicts and lists.
"""

from __future__ import annotations

import contextlib
import json
import os
from array import array
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

from . import index_store, migrations
from .errors import InvalidInput, NotFound
from .store import EVENT_KINDS, MESSAGE_COLUMNS, SQLITE_MAX_INT, Store, StoredMessage

NEIGHBOURS = 2


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def overview(store: Store) -> dict[str, Any]:
    """The database at a glance: file sizes, schema, counts and the two time ranges of what is visible. The counts
    are read in one read transaction, so they agree with each other while another process writes."""
    with store.reading():
        return _overview(store)


def _overview(store: Store) -> dict[str, Any]:
    from .retention import stored as stored_retention

    predicate, params = store.visible()
    q = store.conn.execute
    # a pair of ids as one string that tells them apart, the user id's length in bytes first ("a\x1fb" + "c" and
    # "a" + "b\x1fc" joined by a separator alone were one session)
    pair = "length(CAST(user_id AS BLOB)) || ':' || user_id || char(31) || {}"
    row = q(
        f"SELECT count(DISTINCT user_id), count(DISTINCT {pair.format('session_id')}), "
        f"count(DISTINCT {pair.format('request_id')}), count(*), "
        f"min(said_at), max(said_at), min(recorded_at), max(recorded_at) FROM messages WHERE {predicate}",
        params,
    ).fetchone()
    stored = q("SELECT count(*) FROM messages").fetchone()[0]
    kept = stored_retention(store)
    path = str(store.path)
    return {
        "db": path,
        "size_bytes": _size(path),
        "wal_bytes": _size(store.wal_path),
        "schema_version": migrations.schema_version(store.conn),
        "migrations": [r[0] for r in q("SELECT name FROM _migrations ORDER BY rowid")],
        "users": row[0],
        "sessions": row[1],
        "requests": row[2],
        "messages": row[3],
        "said_at": {"min": row[4], "max": row[5]},
        "recorded_at": {"min": row[6], "max": row[7]},
        "retention_days": store.retention_days,
        "retention_stored": None if kept is None else asdict(kept),
        "retention_cutoff": store.retention_cutoff(),
        "awaiting_expiry": stored - row[3] if store.retention_days is not None else 0,
        "searches": q("SELECT count(*) FROM searches").fetchone()[0],
        "tombstones": q("SELECT count(*) FROM tombstones").fetchone()[0],
        "events": q("SELECT count(*) FROM events").fetchone()[0],
        "index": index_store.stats(store.conn),
    }


_GROUP_COLUMNS = (
    "count(DISTINCT session_id), count(DISTINCT request_id), count(*), "
    "min(said_at), max(said_at), min(recorded_at), max(recorded_at)"
)


def _group(row: tuple[Any, ...]) -> dict[str, Any]:
    sessions, requests, messages, s0, s1, r0, r1 = row
    return {
        "sessions": sessions,
        "requests": requests,
        "messages": messages,
        "said_at": {"min": s0, "max": s1},
        "recorded_at": {"min": r0, "max": r1},
    }


def users(store: Store) -> list[dict[str, Any]]:
    """Every user with visible messages: counts and time ranges."""
    predicate, params = store.visible()
    rows = store.conn.execute(
        f"SELECT user_id, {_GROUP_COLUMNS} FROM messages WHERE {predicate} GROUP BY user_id ORDER BY user_id", params
    )
    return [{"user_id": row[0], **_group(row[1:]), "version": store.user_version(row[0])} for row in rows]


def user(store: Store, user_id: str) -> dict[str, Any]:
    """One user's sessions (in order of first arrival) with dates and counts."""
    predicate, params = store.visible()
    rows = store.conn.execute(
        f"SELECT session_id, min(seq), count(DISTINCT request_id), count(*), min(said_at), max(said_at), "
        f"min(recorded_at), max(recorded_at) FROM messages WHERE user_id = ? AND {predicate} "
        "GROUP BY session_id ORDER BY min(seq)",
        [user_id, *params],
    ).fetchall()
    if not rows:
        raise NotFound(f"no visible messages for user {user_id!r} (see `refind inspect users`)")
    sessions = [
        {
            "session_id": r[0],
            "requests": r[2],
            "messages": r[3],
            "said_at": {"min": r[4], "max": r[5]},
            "recorded_at": {"min": r[6], "max": r[7]},
        }
        for r in rows
    ]
    return {
        "user_id": user_id,
        "version": store.user_version(user_id),
        "messages": sum(s["messages"] for s in sessions),
        "sessions": sessions,
        "tombstones": store.conn.execute("SELECT count(*) FROM tombstones WHERE user_id = ?", (user_id,)).fetchone()[0],
    }


def _message_dict(m: StoredMessage) -> dict[str, Any]:
    return {
        "id": m.id,
        "seq": m.seq,
        "request_id": m.request_id,
        "idx": m.idx,
        "role": m.role,
        "content": m.content,
        "said_at": m.said_at,
        "recorded_at": m.recorded_at,
    }


# A session's messages in the order the index sees them (turns.session_order): by said-at, an undated message taking
# the said-at of the latest dated one that arrived before it (none: first), then arrival. SQLite orders them, so only
# what is printed passes through Python: ``g`` numbers the runs that start at a dated message, ``said`` is that
# message's said-at for the whole run (NULL, sorting first, before any dated one).
_ORDERED = """
WITH k AS (
    SELECT seq, said_at, count(said_at) OVER (ORDER BY seq) AS g
    FROM messages WHERE user_id = ? AND session_id = ? AND {predicate}
),
o AS (SELECT seq, max(said_at) OVER (PARTITION BY g) AS said FROM k),
r AS (SELECT seq, row_number() OVER (ORDER BY said, seq) - 1 AS pos FROM o)
"""
# The messages in order are read by their seq, up to this many, or this many bytes of text, a read (SQLite sorting
# the rows whole would hold the text in its sorter: +17 MiB for a session of 30 MB).
_FETCH_ROWS = 500
_FETCH_BYTES = 1 << 20


def _turn_dict(m: StoredMessage) -> dict[str, Any]:
    """A turn as the index sees it (the retrieval's default unit, a message), with its stable id."""
    return {
        "id": m.id,
        "session_id": m.session_id,
        "said_at": m.said_at,
        "recorded_at": m.recorded_at,
        "messages": [_message_dict(m)],
    }


def _in_order(store: Store, keys: Iterator[tuple[int, int]]) -> Iterator[StoredMessage]:
    """The messages of ``keys`` ((seq, bytes of text), in order) read a batch at a time."""
    batch: list[int] = []
    size = 0
    for seq, length in keys:
        if batch and (len(batch) >= _FETCH_ROWS or size + length > _FETCH_BYTES):
            yield from _read(store, batch)
            batch, size = [], 0
        batch.append(seq)
        size += length
    yield from _read(store, batch)


def _read(store: Store, seqs: list[int]) -> Iterator[StoredMessage]:
    if not seqs:
        return
    rows = store.conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE seq IN ({', '.join('?' * len(seqs))})", seqs
    ).fetchall()
    by_seq = {row[0]: row for row in rows}
    for seq in seqs:
        if (row := by_seq.get(seq)) is not None:  # (forgotten since the order was read: never printed)
            yield StoredMessage(*row)


def _absent(user_id: str, session_id: str) -> NotFound:
    return NotFound(f"no visible messages in session {session_id!r} of user {user_id!r} ({sessions_of(user_id)})")


def sessions_of(user_id: str) -> str:
    """Where a user's sessions are listed, for a refusal that names a session that is not there."""
    from shlex import quote

    return f"`refind inspect user {quote(user_id)}` lists its sessions"


def session_size(store: Store, user_id: str, session_id: str) -> tuple[int, int]:
    """(turns, characters of their messages) of one session, read a message at a time; NotFound when none is
    visible. Inside :meth:`Store.reading` with :func:`session_turns`, the two agree."""
    predicate, params = store.visible()
    rows = store.conn.execute(
        f"SELECT content FROM messages WHERE user_id = ? AND session_id = ? AND {predicate}",
        [user_id, session_id, *params],
    )
    turns = chars = 0
    for (content,) in rows:
        turns += 1
        chars += len(content)  # (not SQLite's length(), which stops at a NUL)
    if not turns:
        raise _absent(user_id, session_id)
    return turns, chars


def session_turns(store: Store, user_id: str, session_id: str) -> Iterator[dict[str, Any]]:
    """One session's transcript as turns with their stable ids, in order, read a few rows at a time as the iterator
    is (a session of 200,000 messages is never held whole: its order is, as two arrays of integers); NotFound, before
    any, when none is visible. The order is read now (inside :meth:`Store.reading` with :func:`session_size`, the two
    agree); the rows as the iterator goes, each batch a read of its own, so no read stays open while the output
    waits on its reader (`| less`): a forget's truncate of the WAL (its scrub) is not held up by it, and a message
    forgotten meanwhile is not printed."""
    predicate, params = store.visible()
    seqs, lengths = array("q"), array("q")
    for seq, length in store.conn.execute(
        _ORDERED.format(predicate=predicate)
        + "SELECT r.seq, length(CAST(m.content AS BLOB)) FROM r JOIN messages m ON m.seq = r.seq ORDER BY r.pos",
        [user_id, session_id, *params],
    ):
        seqs.append(seq)
        lengths.append(length)
    if not seqs:
        raise _absent(user_id, session_id)
    return (_turn_dict(m) for m in _in_order(store, zip(seqs, lengths, strict=True)))


def turn(store: Store, turn_id: str, *, neighbours: int = NEIGHBOURS) -> dict[str, Any]:
    """One turn by id (or the turn holding the message with that id), with up to ``neighbours`` turns either side
    inside its session; only those turns' rows are read."""
    with store.reading():
        predicate, params = store.visible()
        row = store.conn.execute(
            f"SELECT user_id, session_id, seq FROM messages WHERE id = ? AND {predicate}", [turn_id, *params]
        ).fetchone()
        if row is None:
            raise NotFound(
                f"no visible turn with id {turn_id!r} (ids are shown by `refind inspect session USER SESSION`)"
            )
        user_id, session_id, seq = row
        keys = [user_id, session_id, *params]
        reach = min(neighbours, SQLITE_MAX_INT // 2)
        keys = store.conn.execute(  # (one statement: the session's order is worked out once)
            _ORDERED.format(predicate=predicate) + ", t AS (SELECT pos FROM r WHERE seq = ?) "
            "SELECT r.pos, (SELECT count(*) FROM r), r.seq, length(CAST(m.content AS BLOB)) "
            "FROM t, r JOIN messages m ON m.seq = r.seq WHERE r.pos BETWEEN t.pos - ? AND t.pos + ? ORDER BY r.pos",
            [user_id, session_id, *params, seq, reach, reach],
        ).fetchall()
        (at,) = [pos for pos, _, s, _ in keys if s == seq]
        of = keys[0][1]
        near = list(_in_order(store, iter([(s, length) for _, _, s, length in keys])))
    first = max(0, at - reach)
    return {
        "user_id": user_id,
        "session_id": session_id,
        "turn": _turn_dict(near[at - first]),
        "position": at,
        "of": of,
        "before": [_turn_dict(m) for m in near[: at - first]],
        "after": [_turn_dict(m) for m in near[at - first + 1 :]],
    }


EVENT_COLUMNS = ("id", "at", "kind", "user_id", "session_id", "request_id", "rows", "detail")


def events(
    store: Store, *, user_id: str | None = None, kind: str | None = None, limit: int = 100
) -> list[dict[str, Any]]:
    """The audit log, newest first (``limit`` 0 = all)."""
    clauses, params = [], []
    if user_id is not None:
        clauses.append("user_id = ?")
        params.append(user_id)
    if kind is not None:
        if kind not in EVENT_KINDS:
            raise InvalidInput(f"--kind: {kind!r} is not an event kind; the kinds are {', '.join(EVENT_KINDS)}")
        clauses.append("kind = ?")
        params.append(kind)
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    rows = store.conn.execute(
        f"SELECT {', '.join(EVENT_COLUMNS)} FROM events {where} ORDER BY id DESC LIMIT ?",
        [*params, min(limit or SQLITE_MAX_INT, SQLITE_MAX_INT)],  # 0, or more than SQLite can count: all of them
    )
    out = []
    for row in rows:
        item = dict(zip(EVENT_COLUMNS, row))
        detail = item["detail"]
        if detail is not None:
            with contextlib.suppress(ValueError):  # the migrate events record a plain migration name
                item["detail"] = json.loads(detail)
        out.append(item)
    return out
