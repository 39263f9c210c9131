"""Read-only queries behind ``refind inspect``: overview, users, one user, one session, one turn, the audit log.

Every query of message rows applies the store's read-time predicate (``Store.visible``), so what is past retention
is never shown, only counted as "awaiting the sweep". Times are Unix milliseconds; said-at (when it was said) and
recorded-at (when this store received it) are kept apart everywhere. Returns plain dicts and lists.
"""

from __future__ import annotations

import contextlib
import json
import os
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


def _session_messages(store: Store, user_id: str, session_id: str) -> list[StoredMessage]:
    predicate, params = store.visible()
    rows = store.conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE user_id = ? AND session_id = ? AND {predicate} ORDER BY seq",
        [user_id, session_id, *params],
    )
    return [StoredMessage(*r) for r in rows]


def _turns(messages: list[StoredMessage]) -> list[dict[str, Any]]:
    """The session as the index sees it: the retrieval's turns (default unit), chronological, with stable ids."""
    from .search_config import SearchConfig
    from .turns import build_turns

    return [
        {
            "id": t.id,
            "session_id": t.session_id,
            "said_at": t.said_at,
            "recorded_at": t.recorded_at,
            "messages": [_message_dict(m) for m in t.messages],
        }
        for t in build_turns(messages, SearchConfig().turn_unit)
    ]


def session(store: Store, user_id: str, session_id: str) -> dict[str, Any]:
    """One session's transcript as turns with their stable ids, in order."""
    messages = _session_messages(store, user_id, session_id)
    if not messages:
        raise NotFound(f"no visible messages in session {session_id!r} of user {user_id!r}")
    return {"user_id": user_id, "session_id": session_id, "turns": _turns(messages)}


def turn(store: Store, turn_id: str, *, neighbours: int = NEIGHBOURS) -> dict[str, Any]:
    """One turn by id (or the turn holding the message with that id), with up to ``neighbours`` turns either side
    inside its session."""
    predicate, params = store.visible()
    row = store.conn.execute(
        f"SELECT user_id, session_id FROM messages WHERE id = ? AND {predicate}", [turn_id, *params]
    ).fetchone()
    if row is None:
        raise NotFound(f"no visible turn with id {turn_id!r} (ids are shown by `refind inspect session USER SESSION`)")
    user_id, session_id = row
    turns = _turns(_session_messages(store, user_id, session_id))
    at = next(i for i, t in enumerate(turns) if any(m["id"] == turn_id for m in t["messages"]))
    return {
        "user_id": user_id,
        "session_id": session_id,
        "turn": turns[at],
        "position": at,
        "of": len(turns),
        "before": turns[max(0, at - neighbours) : at],
        "after": turns[at + 1 : at + 1 + neighbours],
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
