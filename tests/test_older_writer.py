"""An older refind's writes to a database this one upgraded are refused (migration m009_older_writers_refused).

refind before fe18529 (c75912f among them) did not refuse a newer refind's schema on open: run against a database
this version upgraded (a downgrade, or an old ``refind serve`` left running), its Add gave a message the seq of a
forgotten one (never indexed, so never found), its forget and expire left the removed words in the index and wrote
unkeyed tombstone hashes. The statements below are c75912f's own (store.py ``_add_one``, ``bump_user``,
``record_event``; lifecycle.py ``forget`` and ``expire``), run as it ran them: each write is refused at its first
change and nothing of it stays, while every write of this version (add, a replay, forget, expire) goes on.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
from helpers import T0, Clock

from refind_cli import index_store, lifecycle, migrations
from refind_cli import search as S
from refind_cli.contract import parse_add
from refind_cli.store import DAY_MS, Store


def old_message_id(user_id: str, request_id: str, index: int) -> str:  # c75912f store.message_id
    return hashlib.sha256(f"{user_id}\x1f{request_id}\x1f{index}".encode()).hexdigest()[:24]


def old_content_hash(content: str) -> str:  # c75912f lifecycle.content_hash: unkeyed
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def old_open(path: Path) -> sqlite3.Connection:
    """A connection as c75912f's Store opened one (its migrations.apply finds every migration it knows done)."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    for pragma in ("busy_timeout = 30000", "journal_mode = WAL", "synchronous = FULL", "foreign_keys = ON"):
        conn.execute(f"PRAGMA {pragma}")
    conn.execute("PRAGMA secure_delete = ON")
    conn.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)")
    conn.execute("SELECT name FROM _migrations").fetchall()
    return conn


def _event(conn: sqlite3.Connection, kind: str, user: str, session: str | None, request: str | None, rows: int):
    conn.execute(
        "INSERT INTO events (at, kind, user_id, session_id, request_id, rows, detail) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (T0, kind, user, session, request, rows, None),
    )


def _bump(conn: sqlite3.Connection, user: str) -> None:
    conn.execute(
        "INSERT INTO users (user_id, version) VALUES (?, 1) ON CONFLICT (user_id) DO UPDATE SET version = version + 1",
        (user,),
    )


def old_add(conn: sqlite3.Connection, user: str, session: str, request: str, contents: list[str], now: int) -> None:
    """c75912f's Add of one request (Store.add_many → _add_one, in its savepoint), without its read-only checks."""
    conn.execute("SAVEPOINT old_add")
    conn.execute(
        "INSERT INTO requests (user_id, request_id, session_id, payload_hash, message_count, recorded_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (user, request, session, "0" * 64, len(contents), now),
    )
    conn.executemany(
        "INSERT INTO messages (id, user_id, session_id, request_id, idx, role, content, said_at, recorded_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (old_message_id(user, request, i), user, session, request, i, "user", c, None, now)
            for i, c in enumerate(contents)
        ],
    )
    _bump(conn, user)
    _event(conn, "add", user, session, request, len(contents))
    conn.execute("RELEASE old_add")


def old_forget(conn: sqlite3.Connection, user: str, request: str, now: int) -> None:
    """c75912f's lifecycle.forget of one request (its searches part finds none here)."""
    where, params = "user_id = ? AND request_id = ?", [user, request]
    rows = conn.execute(
        f"SELECT id, content, request_id, session_id FROM messages WHERE {where} ORDER BY seq", params
    ).fetchall()
    conn.execute(f"DELETE FROM messages WHERE {where}", params)
    conn.execute(f"DELETE FROM requests WHERE {where}", params)
    conn.execute(
        "INSERT INTO tombstones (at, scope, user_id, session_id, request_id, rows, message_ids, content_hashes) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            now,
            "request",
            user,
            rows[0][3],
            request,
            len(rows),
            json.dumps([r[0] for r in rows]),
            json.dumps([old_content_hash(r[1]) for r in rows]),
        ),
    )
    _bump(conn, user)
    _event(conn, "forget", user, rows[0][3], request, len(rows))


def old_expire(conn: sqlite3.Connection, user: str, cutoff: int) -> None:
    """c75912f's lifecycle.expire of one user's plan."""
    conn.execute("DELETE FROM messages WHERE user_id = ? AND recorded_at < ?", (user, cutoff))
    conn.execute("DELETE FROM requests WHERE user_id = ? AND recorded_at < ?", (user, cutoff))
    _bump(conn, user)
    _event(conn, "expire", user, None, None, 0)


def run_old(path: Path, write) -> sqlite3.IntegrityError | None:
    """Run an older refind's write as its Store.write ran it (BEGIN IMMEDIATE … COMMIT, ROLLBACK on an error)."""
    conn = old_open(path)
    conn.execute("BEGIN IMMEDIATE")
    try:
        write(conn)
    except sqlite3.IntegrityError as exc:
        conn.execute("ROLLBACK")
        return exc
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")
        conn.close()
    return None


def _add(store: Store, request: str, session: str, *contents: str) -> None:
    msgs = [{"role": "user", "content": c, "timestamp": T0} for c in contents]
    store.add(parse_add({"request_id": request, "user_id": "alice", "session_id": session, "messages": msgs}))


def _found(store: Store, query: str) -> str:
    return " ".join(b.content for b in S.search(store, "alice", query, top_k=5))


def _contents(path: Path) -> list[tuple]:
    conn = sqlite3.connect(str(path))
    try:
        return [
            conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
            for table in ("messages", "requests", "tombstones", "users", "events", "index_segments", "index_meta")
        ]
    finally:
        conn.close()


@pytest.fixture
def upgraded(tmp_path: Path) -> Path:
    """A database of this version holding three requests, the newest forgotten (so SQLite's max(seq) + 1 is the
    seq that request's message had: the seq c75912f's Add gives next)."""
    path = tmp_path / "refind.db"
    clock = Clock(T0 + 10 * DAY_MS)
    with Store(path, retention_days=None, clock=clock) as store:
        _add(store, "r1", "s1", "kayak on the lake")
        clock.now += DAY_MS
        _add(store, "r2", "s1", "biscuit the dog")
        _add(store, "r3", "s1", "my pin is zebra 4417")
        lifecycle.forget(store, "alice", request_id="r3")
    return path


OLD_WRITES = {
    "add": lambda conn: old_add(conn, "alice", "s1", "r4", ["trampoline party on friday"], T0 + 12 * DAY_MS),
    "forget": lambda conn: old_forget(conn, "alice", "r2", T0 + 12 * DAY_MS),
    "expire": lambda conn: old_expire(conn, "alice", T0 + 11 * DAY_MS),  # r1 recorded a day before r2
}


@pytest.mark.parametrize("write", list(OLD_WRITES))
def test_an_older_refinds_write_is_refused_and_leaves_the_database_as_it_was(upgraded: Path, write: str) -> None:
    before = _contents(upgraded)
    refused = run_old(upgraded, OLD_WRITES[write])
    # what the older refind's user reads: its Add wraps it in a Conflict, its forget and expire print it
    assert refused is not None and str(refused) == migrations.OLDER_WRITER
    assert _contents(upgraded) == before
    with Store(upgraded, retention_days=None) as store:
        assert index_store.verify(store.conn) == []
        assert "kayak" in _found(store, "kayak") and "biscuit" in _found(store, "biscuit")
        assert _found(store, "zebra") == ""
        assert not store.conn.execute("SELECT count(*) FROM write_grant").fetchone()[0]


# round 23's refind grants its writes (m009's row, no version): left running while this version upgraded the file,
# it compared a replay's plain ids with sealed tombstones and stored a forgotten request again (a review's fuzzer,
# round 24). Round 24's grants version 10 (m010): left running, it computes a grown log's chained ids unkeyed, finds
# none of the requests m011 renamed, and stores their messages again. Each grant is refused now, whatever it writes.
GRANTS = {
    "round 23 (m009)": "INSERT INTO write_grant (id) VALUES (1)",
    "round 24 (m010)": "INSERT INTO write_grant (id, version) VALUES (1, 10)",
}


@pytest.mark.parametrize("grant", list(GRANTS))
@pytest.mark.parametrize("write", list(OLD_WRITES))
def test_a_writer_that_knows_m009_or_m010_but_not_m011_is_refused_too(upgraded: Path, write: str, grant: str) -> None:
    def granted_as_then(conn: sqlite3.Connection) -> None:
        conn.execute(GRANTS[grant])
        OLD_WRITES[write](conn)

    before = _contents(upgraded)
    refused = run_old(upgraded, granted_as_then)
    assert refused is not None and str(refused) == migrations.OLDER_WRITER and "m011_keyed_chains" in str(refused)
    assert _contents(upgraded) == before


@pytest.mark.parametrize("write", list(OLD_WRITES))
def test_whatever_an_older_refind_writes_the_index_agrees_and_tombstones_stay_keyed(upgraded: Path, write: str) -> None:
    # the harm itself, whatever the guard: after the older writer ran (refused, or committed without it), this
    # version's index agrees with the messages (the seq of a forgotten message given again is found at its next
    # search), and no tombstone holds an unkeyed hash of a removed text
    run_old(upgraded, OLD_WRITES[write])
    with Store(upgraded, retention_days=None) as store:
        assert index_store.verify(store.conn) == []
        held = {c for (c,) in store.conn.execute("SELECT content FROM messages")}
        for content in held:
            assert content.split()[0] in _found(store, content.split()[0])
        hashes = [h for (j,) in store.conn.execute("SELECT content_hashes FROM tombstones") for h in json.loads(j)]
        texts = ["kayak on the lake", "biscuit the dog", "my pin is zebra 4417"]
        assert not {old_content_hash(t) for t in texts} & set(hashes)


def test_an_older_server_left_running_is_refused_once_the_database_is_upgraded(tmp_path: Path, monkeypatch) -> None:
    # an older refind serve opened the file (and prepared its statements) before this version upgraded it: SQLite
    # prepares a statement again after a schema change, so its next write meets the triggers all the same
    path = tmp_path / "refind.db"
    before = [m for m in migrations.MIGRATIONS if m[0] < "m009"]
    monkeypatch.setattr(migrations, "MIGRATIONS", before)  # the schema and writes before m009
    monkeypatch.setattr(migrations, "grant", lambda conn: None)
    monkeypatch.setattr(migrations, "revoke", lambda conn: None)
    with Store(path, retention_days=None) as store:
        _add(store, "r1", "s1", "kayak on the lake")
    monkeypatch.undo()
    server = old_open(path)
    server.execute("BEGIN IMMEDIATE")
    old_add(server, "alice", "s1", "r2", ["before the upgrade"], T0)
    server.execute("COMMIT")
    with Store(path, retention_days=None) as store:  # the upgrade (m009), while the older server holds its connection
        assert "m009_older_writers_refused" in {r[0] for r in store.conn.execute("SELECT name FROM _migrations")}
    server.execute("BEGIN IMMEDIATE")
    with pytest.raises(sqlite3.IntegrityError, match="written by a newer refind"):
        old_add(server, "alice", "s1", "r3", ["after the upgrade"], T0)
    server.execute("ROLLBACK")
    server.close()
    with Store(path, retention_days=None) as store:
        assert index_store.verify(store.conn) == []
        assert "before the upgrade" in _found(store, "upgrade") and "after" not in _found(store, "upgrade")


def test_this_versions_writes_go_on_in_a_database_an_older_refind_wrote(tmp_path: Path, cli) -> None:
    # a database of c75912f's schema (m001, m002) holding its rows, upgraded by this version on open: its Add (one
    # request, a batch, a replay file), an Add of a request past retention (expired first), forget and expire all
    # write, and the grant is never committed
    path = tmp_path / "refind.db"
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)")
    conn.execute("BEGIN")
    for name, fn in migrations.MIGRATIONS[:2]:  # c75912f's two, unchanged since
        fn(conn)
        conn.execute("INSERT INTO _migrations (name, applied_at) VALUES (?, 0)", (name,))
    old_add(conn, "alice", "s0", "old1", ["salmon in Lisbon", "a marathon in May"], T0)
    conn.execute("COMMIT")
    conn.close()

    clock = Clock(T0 + DAY_MS)
    with Store(path, retention_days=None, clock=clock) as store:
        assert "salmon" in _found(store, "salmon")  # the catch-up indexed the older refind's rows
        _add(store, "r1", "s1", "kayak on the lake")
        _add(store, "r2", "s1", "tahoe weekend")
        batch = [{"role": "user", "content": "biscuit the dog"}, {"role": "user", "content": "lisbon trip"}]
        store.add_many(
            [
                parse_add({"request_id": f"b{i}", "user_id": "alice", "session_id": "s2", "messages": [m]})
                for i, m in enumerate(batch)
            ]
        )
        lifecycle.forget(store, "alice", request_id="r1")
        lifecycle.forget(store, "alice", session_id="s2")
    replay = tmp_path / "replay.jsonl"
    lines = [
        {"user_id": "alice", "session_id": "s3", "role": "user", "content": c} for c in ["trampoline party", "shoes"]
    ]
    replay.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert cli("add", "--file", str(replay), "--db", str(path)).exit_code == 0
    clock.now = T0 + 41 * DAY_MS
    with Store(path, retention_days=30, clock=clock) as store:
        msgs = [{"role": "user", "content": "sardines in Porto"}]
        store.add(parse_add({"request_id": "old1", "user_id": "alice", "session_id": "s0", "messages": msgs}))
        assert lifecycle.expire(store).messages == 1  # r2, recorded 40 days ago
    with Store(path, retention_days=None, clock=clock) as store:
        assert index_store.verify(store.conn) == []
        for gone in ("kayak", "tahoe", "biscuit", "salmon", "marathon"):
            assert _found(store, gone) == "", gone
        for kept in ("trampoline", "sardines"):
            assert kept in _found(store, kept)
        assert store.conn.execute("SELECT count(*) FROM write_grant").fetchone()[0] == 0
        key = lifecycle.tombstone_key(store)
        hashes = json.loads(store.conn.execute("SELECT content_hashes FROM tombstones ORDER BY id").fetchone()[0])
        assert hashes == [lifecycle.content_hash(key, "kayak on the lake")]
    assert cli("inspect", "--check", "--db", str(path)).exit_code == 0


def test_a_write_that_fails_or_nests_commits_no_grant(store: Store) -> None:
    with pytest.raises(RuntimeError), store.write():
        _add(store, "r0", "s0", "rolled back")
        raise RuntimeError
    with store.write(), store.write():  # nested: a savepoint inside the granted transaction
        _add(store, "r1", "s1", "kayak on the lake")
    other = sqlite3.connect(store.path)
    assert other.execute("SELECT count(*) FROM write_grant").fetchone()[0] == 0
    assert other.execute("SELECT count(*) FROM messages").fetchone()[0] == 1
    with pytest.raises(sqlite3.IntegrityError, match="written by a newer refind"):
        other.execute("DELETE FROM messages")
    other.close()


def test_a_message_cannot_be_inserted_without_its_request_which_is_guarded(upgraded: Path) -> None:
    # m009 puts no trigger on each message inserted (it doubled a replay's raw inserts): a message row needs its
    # request's, which the guard refuses to an older writer; c75912f opened every connection with foreign_keys on
    conn = old_open(upgraded)
    with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):
        conn.execute(
            "INSERT INTO messages (id, user_id, session_id, request_id, idx, role, content, said_at, recorded_at) "
            "VALUES ('x', 'alice', 's1', 'r9', 0, 'user', 'trampoline', NULL, 0)"
        )
    conn.close()
