"""Data lifecycle: retention sweeps (``expire``), ``forget`` with tombstones, and ``export`` as Add-request JSONL.

Both deleting paths scrub: ``PRAGMA secure_delete`` overwrites the freed bytes, and a ``wal_checkpoint(TRUNCATE)``
afterwards copies the scrubbed pages into the database file and cuts the WAL (which may still hold old page images
with the text) to zero bytes. Every mutation bumps the user's version (caches go stale) and appends an event.

A forgotten request is not stored again: ``Store.add`` refuses a request id named by a tombstone with
:class:`~refind_cli.errors.Forgotten` (HTTP 410, which the platform does not retry), so an automatic retry or a
replay of the original log cannot bring forgotten text back. Sending the text under a new request id stores it —
that is a deliberate new Add, not a replay. Expired requests leave no tombstone: a replay after they expired (swept
or still awaiting the sweep) stores them again as new data with a new recorded-at.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, astuple, dataclass, field
from typing import IO, Any

from . import index_store, sealed
from .contract import MAX_LINE_BYTES, empty_text, request_line
from .errors import InvalidInput, NotFound, RefindError
from .signals import Terminated
from .store import CHECKPOINT_TIMEOUT_S, Store
from .trace import quoting_searches

# ---- scrubbing ---------------------------------------------------------------------------------------------------


@contextmanager
def scrubbing(store: Store) -> Iterator[None]:
    """Deletes inside overwrite the freed bytes with zeros (``PRAGMA secure_delete``) for this connection."""
    before = store.conn.execute("PRAGMA secure_delete").fetchone()[0]
    store.conn.execute("PRAGMA secure_delete = ON")
    try:
        yield
    finally:
        store.conn.execute(f"PRAGMA secure_delete = {int(before)}")


def checkpoint(store: Store) -> bool:
    """Copy the WAL into the database file and truncate the WAL to zero bytes (``Store.checkpoint``), waiting at most
    CHECKPOINT_TIMEOUT_S for readers. False if they kept it busy."""
    return store.checkpoint(CHECKPOINT_TIMEOUT_S)


def _evict(user_ids: Iterable[str]) -> None:
    """Drop this process's in-memory indexes of these users (the version bump already makes them stale; this frees
    their text now). The maintained index on disk changed in the same transaction (index_store.remove)."""
    from .index_cache import evict_many

    evict_many(user_ids)


def tombstone_key(store: Store) -> bytes:
    """The database's secret for tombstone hashes (migration m003_security_tombstone_key): never leaves the file."""
    return sealed.key(store.conn)


def seal_events(store: Store, user_id: str, removed: set[str] | None, secret: bytes) -> int:
    """Seal the request ids derived from their text (:mod:`refind_cli.sealed`) in ``user_id``'s events, of the
    ``removed`` requests (None: all of the user's, whose every request is gone): once the text is gone, such an id
    would tell it to a guess. The count sealed."""
    q = store.conn.execute
    if removed is None:
        rows = q(
            "SELECT id, request_id FROM events WHERE user_id = ? AND request_id IS NOT NULL", (user_id,)
        ).fetchall()
    else:  # (filtered by SQLite: a session's forget read all of a user's 50,000 events into Python, +60 ms)
        ids = [rid for rid in removed if sealed.text_derived(rid)]
        rows = []
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            rows += q(
                f"SELECT id, request_id FROM events WHERE user_id = ? AND request_id IN ({','.join('?' * len(part))})",
                [user_id, *part],
            ).fetchall()
    changes = [(sealed.request_id(secret, rid), eid) for eid, rid in rows if sealed.text_derived(rid)]
    store.conn.executemany("UPDATE events SET request_id = ? WHERE id = ?", changes)
    return len(changes)


def content_hash(key: bytes, content: str) -> str:
    """HMAC-SHA256 of a message's text under the database's key: whoever holds the text (and the database) can
    check it was forgotten; a listing of tombstones alone reveals nothing, short texts included."""
    return hmac.new(key, content.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def said_hash(key: bytes, role: str, content: str, said_at: int | None) -> str:
    """HMAC-SHA256 of a message's role, text and said-at (compact JSON ``["said", role, content, said_at]``) under the
    database's key (m012): what a replay matches an older copy of a forgotten log against, told apart from a new
    message of the same words by its said-at (replay._copy_of_forgotten)."""
    said = json.dumps(["said", role, content, said_at], ensure_ascii=False, separators=(",", ":"))
    return hmac.new(key, said.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def _delete_searches(store: Store, ids: list[str]) -> int:
    store.conn.executemany("DELETE FROM searches WHERE id = ?", [(i,) for i in ids])
    return len(ids)


# ---- expire ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UserExpiry:
    messages: int
    requests: int
    searches: int


@dataclass(frozen=True)
class ExpireResult:
    retention_days: float | None  # None: retention is off, nothing expires
    cutoff: int | None  # messages recorded before this Unix ms are expired
    dry_run: bool
    users: dict[str, UserExpiry] = field(default_factory=dict)
    checkpointed: bool | None = None  # None for a dry run

    @property
    def messages(self) -> int:
        return sum(u.messages for u in self.users.values())

    @property
    def requests(self) -> int:
        return sum(u.requests for u in self.users.values())

    @property
    def searches(self) -> int:
        return sum(u.searches for u in self.users.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "retention_days": self.retention_days,
            "cutoff": self.cutoff,
            "dry_run": self.dry_run,
            "messages": self.messages,
            "requests": self.requests,
            "searches": self.searches,
            "users": {u: asdict(e) for u, e in sorted(self.users.items())},
            "checkpointed": self.checkpointed,
        }


def expire(
    store: Store,
    *,
    user_id: str | None = None,
    dry_run: bool = False,
    unasked: bool = False,
    on_step: Callable[[dict[str, UserExpiry]], None] | None = None,
) -> ExpireResult:
    """Delete every message (and its request row) recorded before the retention cutoff, now.

    Also removes stored planner searches older than the window, and any that quote an expired message. Counts are
    per user; ``dry_run`` counts without deleting. With retention off nothing expires. ``unasked``: an expiry nobody
    asked for at this moment (the server's sweep, ``Memory.expire``) applies the longer of the store's window and
    the policy stored now (retention.unasked_window): it never deletes what that policy keeps. ``on_step``: told
    each step's counts once it committed (a sweep that fails at a later step says what the ones before removed).
    """
    if user_id is not None and (not isinstance(user_id, str) or not user_id.strip()):  # `--user "$U"`, U unset
        raise empty_text("user", user_id, " (leave it out to expire every user)")
    from .retention import unasked_window

    # ``unasked``: the store's own window (for its reads) stays as it is; the longer one only decides what goes
    days = unasked_window(store) if unasked else store.retention_days
    if days is None:
        return ExpireResult(None, None, dry_run, checkpointed=None if dry_run else checkpoint(store))
    if dry_run:  # a read: no write lock to wait for, nothing committed
        with store.reading():
            if unasked:
                days = unasked_window(store)
            cutoff = store.cutoff(days)
            plans = {} if cutoff is None else _expiry_plan(store, cutoff, user_id)
        return ExpireResult(days, cutoff, True, _counts(plans))
    counts: dict[str, UserExpiry] = {}
    first: int | None = None  # one cutoff for the whole run: a user expired in one step has nothing left for the next
    try:
        while True:
            days, cutoff, plans, step = _expire_step(store, days, unasked, user_id, first)
            # a user met again: rows older than the run's cutoff stored since its step (another process's clock
            # stepped back) — rare, and counted on top of what its first step removed, not in place of it
            again = counts.keys() & step.keys()
            committed = _counts(step)
            if on_step is not None:
                on_step(committed)
            for uid, met in committed.items():
                had = counts.get(uid)
                counts[uid] = met if had is None else UserExpiry(*(a + b for a, b in zip(astuple(had), astuple(met))))
            first = cutoff if first is None else first
            if len(step) == len(plans) or again:
                break
    except (RefindError, sqlite3.Error) as exc:
        if not counts:
            raise
        raise _stopped_after(exc, store, counts) from exc
    except KeyboardInterrupt as exc:  # Ctrl-C (or SIGTERM, signals.py) between steps or in one: that one rolled back
        if not counts:
            raise
        _evict(counts)
        raise ExpireStopped(counts, "SIGTERM" if isinstance(exc, Terminated) else "Ctrl-C") from exc
    # Every real sweep truncates the WAL, also when nothing expired: that finishes the scrub of an earlier forget
    # whose checkpoint found readers in the way.
    done = checkpoint(store)
    _evict(counts)
    return ExpireResult(days, first, False, counts, done)


class ExpireStopped(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) stopped an expire after some of its steps committed: ``counts`` are the users those steps
    expired (their events recorded); the step in progress was rolled back. Expiring again removes the rest."""

    def __init__(self, counts: dict[str, UserExpiry], stopped_by: str) -> None:
        super().__init__()
        self.counts = counts
        self.stopped_by = stopped_by

    def said(self) -> str:
        return f"stopped by {self.stopped_by}; {_expired_before(self.counts)}"


def _stopped_after(exc: RefindError | sqlite3.Error, store: Store, counts: dict[str, UserExpiry]) -> RefindError:
    """The error of a step that failed after others committed (a lock held past the busy timeout, a full disk): it
    said 'nothing was written', while the users of the steps before it were expired."""
    from .store import storage_error

    _evict(counts)
    error = storage_error(exc, store.path) if isinstance(exc, sqlite3.Error) else exc
    return type(error)(f"{error.message}; {_expired_before(counts)}")


def _expired_before(counts: dict[str, UserExpiry]) -> str:
    """What the committed steps of an expire stopped midway removed, and what to do."""
    n, users = sum(c.messages for c in counts.values()), len(counts)
    return (
        f"before it, {n:,} message{'' if n == 1 else 's'} of {users:,} user{'' if users == 1 else 's'} were expired "
        "(committed, their events recorded) — expire again for the rest"
    )


# rows (messages, requests, stored searches) one expire transaction deletes at most, in whole users: a sweep of
# 200,000 messages of 10,000 users held the write lock 5.4 s in one transaction, and every Add of the server (and
# every other process's write) waited for all of it (a probe of round 28); in steps, they wait for one step
EXPIRE_STEP_ROWS = 20_000


def _expire_step(
    store: Store, days: float | None, unasked: bool, user_id: str | None, first: int | None
) -> tuple[float | None, int | None, dict[str, _Plan], dict[str, _Plan]]:
    """One transaction of :func:`expire`: (the window it applied, its cutoff, what is expired now, the users it
    removed that of — the first of them up to EXPIRE_STEP_ROWS rows, at least one)."""
    from .retention import unasked_window

    with scrubbing(store), store.write():
        if unasked:  # read again under the write lock: a policy stored since the read above is what holds now
            days = unasked_window(store)
        cutoff = store.cutoff(days)
        if cutoff is not None and first is not None:
            cutoff = min(cutoff, first)
        plans = {} if cutoff is None else _expiry_plan(store, cutoff, user_id)
        step: dict[str, _Plan] = {}
        rows = 0
        for uid, plan in plans.items():
            if step and rows + plan.rows > EXPIRE_STEP_ROWS:
                break
            step[uid] = plan
            rows += plan.rows
        secret = tombstone_key(store) if step else b""
        for uid, plan in step.items():
            gone = store.conn.execute(
                "SELECT request_id FROM requests WHERE user_id = ? AND recorded_at < ?", (uid, cutoff)
            ).fetchall()
            seal_events(store, uid, {r[0] for r in gone}, secret)  # their text goes: no id may tell it (sealed.py)
            expired = store.conn.execute(
                "SELECT seq FROM messages WHERE user_id = ? AND recorded_at < ?", (uid, cutoff)
            ).fetchall()
            index_store.remove(store.conn, uid, [r[0] for r in expired])
            store.conn.execute("DELETE FROM messages WHERE user_id = ? AND recorded_at < ?", (uid, cutoff))
            store.conn.execute("DELETE FROM requests WHERE user_id = ? AND recorded_at < ?", (uid, cutoff))
            _delete_searches(store, plan.searches)
            if plan.messages or plan.requests:
                store.bump_user(uid)  # only a change of messages makes the user's indexes stale
            store.record_event(
                "expire",
                user_id=uid,
                rows=plan.messages,
                detail={"cutoff": cutoff, "requests": plan.requests, "searches": len(plan.searches)},
            )
    return days, cutoff, plans, step


def _counts(plans: dict[str, _Plan]) -> dict[str, UserExpiry]:
    return {u: UserExpiry(p.messages, p.requests, len(p.searches)) for u, p in plans.items()}


@dataclass
class _Plan:
    messages: int = 0
    requests: int = 0
    searches: list[str] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return self.messages + self.requests + len(self.searches)


def _expiry_plan(store: Store, cutoff: int, user_id: str | None) -> dict[str, _Plan]:
    where, params = ("AND user_id = ?", [user_id]) if user_id is not None else ("", [])
    q = store.conn.execute
    plans: dict[str, _Plan] = {}
    for uid, n in q(
        f"SELECT user_id, count(*) FROM messages WHERE recorded_at < ? {where} GROUP BY user_id", [cutoff, *params]
    ):
        plans.setdefault(uid, _Plan()).messages = n
    for uid, n in q(
        f"SELECT user_id, count(*) FROM requests WHERE recorded_at < ? {where} GROUP BY user_id", [cutoff, *params]
    ):
        plans.setdefault(uid, _Plan()).requests = n
    for uid, sid in q(f"SELECT user_id, id FROM searches WHERE at < ? {where}", [cutoff, *params]):
        plans.setdefault(uid, _Plan()).searches.append(sid)
    with_traces = {r[0] for r in q(f"SELECT DISTINCT user_id FROM searches WHERE 1 {where}", params)}
    for uid, plan in plans.items():
        if uid not in with_traces or not plan.messages:
            continue
        expired = q("SELECT id, content FROM messages WHERE user_id = ? AND recorded_at < ?", (uid, cutoff)).fetchall()
        old = set(plan.searches)
        plan.searches += [s for s in quoting_searches(store.conn, uid, expired) if s not in old]
    return plans


# ---- forget ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ForgetResult:
    tombstone_id: int
    at: int
    scope: str  # "user" | "session" | "request"
    user_id: str
    session_id: str | None
    request_id: str | None
    messages: int
    requests: int
    searches: int
    checkpointed: bool

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _scope(user_id: str, session_id: str | None, request_id: str | None) -> tuple[str, str, list[str]]:
    """A forget's scope ("user", "session" or "request") and the rows it covers (an SQL condition and its values)."""
    if session_id is not None and request_id is not None:
        raise InvalidInput("forget one scope at a time: a session or a request id, not both")
    scope = "request" if request_id is not None else "session" if session_id is not None else "user"
    where, params = "user_id = ?", [user_id]
    if session_id is not None:
        where, params = where + " AND session_id = ?", [*params, session_id]
    if request_id is not None:
        where, params = where + " AND request_id = ?", [*params, request_id]
    return scope, where, params


def nothing_to_forget(
    store: Store, user_id: str, *, session_id: str | None = None, request_id: str | None = None
) -> str | None:
    """Why :func:`forget` of this scope would find nothing (its NotFound message), or None when something is in it:
    asked before a confirmation, which would otherwise ask to delete what is not there."""
    scope, where, params = _scope(user_id, session_id, request_id)
    q = store.conn.execute
    with store.reading():
        if q(f"SELECT 1 FROM messages WHERE {where} LIMIT 1", params).fetchone():
            return None
        if q(f"SELECT 1 FROM requests WHERE {where} LIMIT 1", params).fetchone():
            return None
        if scope == "user" and q("SELECT 1 FROM searches WHERE user_id = ? LIMIT 1", (user_id,)).fetchone():
            return None
        return _nothing_to_forget(store, scope, user_id, session_id, request_id)


def forget(store: Store, user_id: str, *, session_id: str | None = None, request_id: str | None = None) -> ForgetResult:
    """Remove a user's messages — all, one session's, or one request's — and everything derived from them.

    Removes the messages (whatever their age), their request rows, the stored planner searches that quote them (all
    of the user's for the user scope), and the retrieval cache; scrubs the freed bytes and truncates the WAL; writes
    a tombstone (scope, ids, counts, content hashes, when — never text). NotFound when nothing is in scope.
    """
    scope, where, params = _scope(user_id, session_id, request_id)
    with scrubbing(store), store.write():
        q = store.conn.execute
        rows = q(
            f"SELECT id, content, request_id, session_id, role, said_at FROM messages WHERE {where} ORDER BY seq",
            params,
        ).fetchall()
        rids = [r[0] for r in q(f"SELECT request_id FROM requests WHERE {where}", params)]
        n_requests = q(f"SELECT count(*) FROM requests WHERE {where}", params).fetchone()[0]
        if scope == "user":
            searches = [r[0] for r in q("SELECT id FROM searches WHERE user_id = ?", (user_id,))]
        else:
            searches = quoting_searches(store.conn, user_id, [(r[0], r[1]) for r in rows])
        if not rows and not n_requests and not searches:
            raise NotFound(_nothing_to_forget(store, scope, user_id, session_id, request_id))
        if scope == "request" and rows:
            session_id = rows[0][3]
        if scope == "user":
            index_store.remove_user(store.conn, user_id)
        else:  # the segments holding these messages are rewritten without them, in this transaction
            seqs = [r[0] for r in q(f"SELECT seq FROM messages WHERE {where}", params)]
            index_store.remove(store.conn, user_id, seqs)
        q(f"DELETE FROM messages WHERE {where}", params)
        q(f"DELETE FROM requests WHERE {where}", params)
        _delete_searches(store, searches)
        now = store.clock()
        key = tombstone_key(store)
        # ids derived from the text, sealed wherever they are kept (the audit log included): a guess of the text
        # must not be checkable against them (sealed.py); the request's own id in the tombstone and the event too
        seal_events(store, user_id, None if scope == "user" else {*rids, *(r[2] for r in rows)}, key)
        kept_id = None if request_id is None else sealed.request_id(key, request_id)
        sessions = {sid: sealed.seal(key, sid) for sid in {r[3] for r in rows}}  # each message's, sealed (m013)
        cur = q(
            "INSERT INTO tombstones (at, scope, user_id, session_id, request_id, rows, message_ids, content_hashes, "
            "said_hashes, said_sessions) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                now,
                scope,
                user_id,
                session_id,
                kept_id,
                len(rows),
                json.dumps([sealed.seal(key, r[0]) for r in rows]),
                json.dumps([content_hash(key, r[1]) for r in rows]),
                json.dumps([said_hash(key, r[4], r[1], r[5]) for r in rows]),
                json.dumps([sessions[r[3]] for r in rows]),
            ),
        )
        tombstone_id = int(cur.lastrowid or 0)
        store.bump_user(user_id)
        store.record_event(
            "forget",
            user_id=user_id,
            session_id=session_id,
            request_id=kept_id,
            rows=len(rows),
            detail={"scope": scope, "tombstone": tombstone_id, "requests": n_requests, "searches": len(searches)},
        )
    done = checkpoint(store)
    _evict([user_id])
    return ForgetResult(
        tombstone_id, now, scope, user_id, session_id, request_id, len(rows), n_requests, len(searches), done
    )


def _nothing_to_forget(store: Store, scope: str, user_id: str, session_id: str | None, request_id: str | None) -> str:
    what = {
        "user": f"user {user_id!r}",
        "session": f"session {session_id!r} of user {user_id!r}",
        "request": f"request {request_id!r} of user {user_id!r}",
    }[scope]
    if request_id is not None:
        stone = store.tombstone_for(user_id, request_id)
        if stone is not None:
            return f"{what} was already forgotten (tombstone {stone[0]}); nothing left to remove"
    return f"nothing stored for {what}"


def tombstones(store: Store, *, user_id: str | None = None) -> list[dict[str, Any]]:
    """The tombstones (newest first): what forget removed, as ids, counts and hashes."""
    where, params = ("WHERE user_id = ?", [user_id]) if user_id else ("", [])
    rows = store.conn.execute(
        "SELECT id, at, scope, user_id, session_id, request_id, rows, message_ids, content_hashes, said_hashes, "
        "said_sessions "
        f"FROM tombstones {where} ORDER BY id DESC",
        params,
    )
    keys = (
        "id",
        "at",
        "scope",
        "user_id",
        "session_id",
        "request_id",
        "rows",
        "message_ids",
        "content_hashes",
        "said_hashes",
        "said_sessions",
    )
    out = []
    for row in rows:
        item = dict(zip(keys, row))
        item["message_ids"] = json.loads(item["message_ids"])
        item["content_hashes"] = json.loads(item["content_hashes"])
        item["said_hashes"] = json.loads(item["said_hashes"])
        item["said_sessions"] = json.loads(item["said_sessions"])
        out.append(item)
    return out


# ---- export ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportResult:
    user_id: str
    session_id: str | None
    requests: int
    messages: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def export_requests(store: Store, user_id: str, *, session_id: str | None = None) -> Iterator[dict[str, Any]]:
    """A user's visible messages as Add requests, in arrival order, with their original request ids and timestamps.

    Streams: one request in memory at a time. What ``refind add --file`` reads back into an identical store.
    """
    predicate, params = store.visible()
    where, extra = ("AND session_id = ?", [session_id]) if session_id is not None else ("", [])
    rows = store.conn.execute(
        f"SELECT request_id, session_id, role, content, said_at FROM messages "
        f"WHERE user_id = ? {where} AND {predicate} ORDER BY seq",
        [user_id, *extra, *params],
    )
    current: dict[str, Any] | None = None
    for request_id, sid, role, content, said_at in rows:
        if current is None or current["request_id"] != request_id:
            if current is not None:
                yield current
            current = {"request_id": request_id, "user_id": user_id, "session_id": sid, "messages": []}
        current["messages"].append({"role": role, "content": content, "timestamp": said_at})
    if current is not None:
        yield current


def export(
    store: Store, user_id: str, out: IO[str], *, session_id: str | None = None, ascii_only: bool = False
) -> ExportResult:
    """Write a user's (or one session's) visible messages to ``out`` as Add-request JSONL. NotFound when empty.
    ``ascii_only``: every non-ASCII character as a ``\\uXXXX`` escape (for a stream that cannot write it; the same
    JSON, read back the same)."""
    requests = messages = 0
    for request in export_requests(store, user_id, session_id=session_id):
        line = request_line(request, ascii_only=ascii_only)
        if 4 * len(line) > MAX_LINE_BYTES and (size := len(line.encode())) > MAX_LINE_BYTES:
            # (never written as a line refind add refuses: an export that cannot be read back is no export)
            how = (
                "escaped for this console; write it with --output FILE (UTF-8) instead"
                if ascii_only
                else "stored before refind refused such requests; copy the database with refind backup instead"
            )
            raise RefindError(
                f"request_id {request['request_id']!r} of user {user_id!r}: its line would be {size:,} bytes, over the "
                f"{MAX_LINE_BYTES:,} that refind add reads back ({how})"
            )
        out.write(line + "\n")
        requests += 1
        messages += len(request["messages"])
    if not requests:
        from .review import sessions_of

        what, where = (
            (f"session {session_id!r} of user {user_id!r}", sessions_of(user_id))
            if session_id is not None
            else (f"user {user_id!r}", "`refind inspect users` lists the users")
        )
        raise NotFound(f"nothing to export: no visible messages for {what} ({where})")
    return ExportResult(user_id, session_id, requests, messages)
