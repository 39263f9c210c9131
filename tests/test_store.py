"""The store: schema by migrations, idempotent all-or-nothing Adds, per-user idempotency keys, the scoped read."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from refind_cli import migrations
from refind_cli.contract import AddRequest, Message, parse_add
from refind_cli.errors import Conflict
from refind_cli.store import Store, message_id


def req(rid: str = "r1", user: str = "u1", session: str = "s1", *texts: str, ts: int | None = None) -> AddRequest:
    texts = texts or ("hello",)
    return AddRequest(rid, user, session, tuple(Message("user", t, ts) for t in texts))


def columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]


def test_empty_database_migrates_to_the_full_schema(db_path) -> None:
    store = Store(db_path)
    conn = store.conn
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"_migrations", "requests", "messages", "users", "events", "tombstones", "searches"} <= tables
    assert (
        columns(conn, "messages")
        == [
            "seq",
            "id",
            "user_id",
            "session_id",
            "request_id",
            "idx",
            "role",
            "content",
            "said_at",
            "recorded_at",
        ]
        + columns(conn, "messages")[10:]
    )
    assert columns(conn, "requests")[:4] == ["user_id", "request_id", "session_id", "payload_hash"]
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] > 0
    names = [r[0] for r in conn.execute("SELECT name FROM _migrations ORDER BY rowid")]
    assert names == [name for name, _ in migrations.MIGRATIONS]
    assert migrations.schema_version(conn) == len(migrations.MIGRATIONS)
    migrate_events = conn.execute("SELECT count(*) FROM events WHERE kind = 'migrate'").fetchone()[0]
    assert migrate_events == len(migrations.MIGRATIONS)
    store.close()
    # Reopening applies nothing twice.
    again = Store(db_path)
    assert [r[0] for r in again.conn.execute("SELECT name FROM _migrations")] == names
    assert again.conn.execute("SELECT count(*) FROM events WHERE kind = 'migrate'").fetchone()[0] == migrate_events
    again.close()


def test_a_database_of_a_newer_refind_is_refused_not_written(db_path, cli) -> None:
    # A newer refind's migration may add derived data (an index, say) that this version's writes would leave stale:
    # every command refuses the file, naming the unknown migration, and changes nothing.
    Store(db_path).close()
    with sqlite3.connect(db_path) as conn:
        conn.execute("INSERT INTO _migrations (name, applied_at) VALUES ('m999_from_the_future', 0)")
    before = db_path.read_bytes()
    for args in (
        ["add", "hello", "--user", "u", "--session", "s"],
        ["search", "hello", "--user", "u", "--mode", "bm25"],
    ):
        result = cli(*args)
        assert result.exit_code == 1
        assert f"cannot open database {db_path}: written by a newer refind (migration m999_from_the_future" in (
            result.output
        )
    # a whole-file reader too (a probe of round 17: inspect --check said ok, backup copied it)
    for args in (["inspect", "--check"], ["backup", str(db_path.with_name("copy.db"))]):
        result = cli(*args)
        assert result.exit_code == 1, (args, result.output)
        assert f"database {db_path}: written by a newer refind (migration m999_from_the_future" in " ".join(
            result.output.split()
        )
    assert not db_path.with_name("copy.db").exists()
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 0
    assert db_path.read_bytes() == before


def test_add_stores_verbatim_with_stable_ids_and_both_time_axes(db_path) -> None:
    clock = iter([1_700_000_000_000 + i for i in range(100)])
    store = Store(db_path, clock=lambda: next(clock))
    content = "  Alice: 我去了杭州\nline two\t "
    outcome = store.add(
        AddRequest(
            "eval:run_abc:0:chunk-0",
            "u1",
            "s:1",
            (Message("user", content, 1_690_000_000_000), Message("assistant", "ok")),
        )
    )
    assert (outcome.status, outcome.messages) == ("added", 2)
    rows = store.user_messages("u1")
    assert [m.content for m in rows] == [content, "ok"]
    assert rows[0].id == message_id("u1", "eval:run_abc:0:chunk-0", 0)
    assert rows[0].said_at == 1_690_000_000_000 and rows[1].said_at is None
    assert rows[0].recorded_at >= 1_700_000_000_000
    assert rows[0].session_id == "s:1" and rows[0].request_id == "eval:run_abc:0:chunk-0"
    event = store.conn.execute("SELECT kind, user_id, request_id, rows FROM events WHERE kind = 'add'").fetchone()
    assert event == ("add", "u1", "eval:run_abc:0:chunk-0", 2)


def test_identical_replay_is_a_noop_and_changed_payload_a_conflict(store) -> None:
    assert store.add(req("r1", "u1", "s1", "a", "b")).status == "added"
    assert store.add(req("r1", "u1", "s1", "a", "b")).status == "duplicate"
    with pytest.raises(Conflict, match="request_id 'r1' of user 'u1' is already stored with a different payload"):
        store.add(req("r1", "u1", "s1", "a", "CHANGED"))
    assert [m.content for m in store.user_messages("u1")] == ["a", "b"]
    assert store.conn.execute("SELECT count(*) FROM events WHERE kind = 'add'").fetchone()[0] == 1


def test_unknown_fields_do_not_change_identity(store) -> None:
    body = {"request_id": "r", "user_id": "u", "session_id": "s", "messages": [{"role": "user", "content": "x"}]}
    assert store.add(parse_add(body)).status == "added"
    noisy = dict(body, metadata={"a": 1}, messages=[{"role": "user", "content": "x", "timestamp": None, "extra": 1}])
    assert store.add(parse_add(noisy)).status == "duplicate"


def test_same_request_id_under_two_users_is_two_requests(store) -> None:
    assert store.add(req("shared", "u1", "s1", "from u1")).status == "added"
    assert store.add(req("shared", "u2", "s1", "from u2")).status == "added"
    assert [m.content for m in store.user_messages("u1")] == ["from u1"]
    assert [m.content for m in store.user_messages("u2")] == ["from u2"]


def test_add_many_is_all_or_nothing_per_request(store) -> None:
    store.add(req("r1", "u1", "s1", "original"))
    outcomes = store.add_many(
        [req("r0", "u1", "s1", "ok 0"), req("r1", "u1", "s1", "clash"), req("r2", "u1", "s1", "ok 2")]
    )
    assert [type(o).__name__ if isinstance(o, Exception) else o.status for o in outcomes] == [
        "added",
        "Conflict",
        "added",
    ]
    assert sorted(m.content for m in store.user_messages("u1")) == ["ok 0", "ok 2", "original"]


def test_a_failing_request_leaves_no_partial_rows(store, monkeypatch) -> None:
    """A write that breaks half-way (here: the event insert) rolls the whole request back."""

    def boom(*args, **kwargs):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(store, "record_event", boom)
    with pytest.raises(sqlite3.OperationalError):
        store.add(req("r1", "u1", "s1", "a", "b"))
    assert store.conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 0
    assert store.conn.execute("SELECT count(*) FROM requests").fetchone()[0] == 0
    assert store.user_version("u1") == 0


def test_every_mutation_bumps_the_user_version(store) -> None:
    assert store.user_version("u1") == 0
    store.add(req("r1", "u1"))
    store.add(req("r1", "u1"))  # duplicate: not a mutation
    assert store.user_version("u1") == 1
    store.add(req("r2", "u1"))
    assert (store.user_version("u1"), store.user_version("u2")) == (2, 0)


def test_scoped_read_never_returns_another_users_rows(store) -> None:
    store.add(req("r1", "alice", "shared-session", "alice secret"))
    store.add(req("r1", "bob", "shared-session", "bob secret"))
    assert {m.user_id for m in store.user_messages("alice")} == {"alice"}
    assert store.user_messages("nobody") == []


def test_retention_and_as_of_hide_rows_at_read_time(db_path) -> None:
    now = [1_700_000_000_000]
    store = Store(db_path, clock=lambda: now[0], retention_days=30)
    store.add(req("old", "u", "s", "old text"))
    now[0] += 10 * 86_400_000
    store.add(req("new", "u", "s", "new text"))
    assert [m.content for m in store.user_messages("u", as_of=now[0] - 1)] == ["old text"]
    now[0] += 25 * 86_400_000  # old is 35 days old, new is 25
    assert [m.content for m in store.user_messages("u")] == ["new text"]


def test_open_reports_a_missing_folder_clearly(tmp_path) -> None:
    from refind_cli.errors import RefindError

    with pytest.raises(RefindError, match="folder .* does not exist"):
        Store(tmp_path / "nope" / "x.db")


def test_open_reports_a_file_that_is_not_a_database(tmp_path) -> None:
    from refind_cli.errors import RefindError

    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(RefindError, match="cannot open database"):
        Store(bad)


def test_colliding_message_ids_refuse_one_request_not_the_batch(store) -> None:
    """Should two requests' message ids ever collide (ids are a hash; tests/security covers the derivation), that
    request is refused as a conflict; the other requests of the batch are still stored, and nothing raises."""
    from refind_cli.contract import parse_add
    from refind_cli.errors import Conflict
    from refind_cli.store import message_id

    def req(rid: str, user: str, text: str):
        return parse_add(
            {"request_id": rid, "user_id": user, "session_id": "s", "messages": [{"role": "user", "content": text}]}
        )

    assert store.add(req("b", "a", "first")).status == "added"
    with store.write():  # force a collision: the stored message takes the id the next request will derive
        store.conn.execute("UPDATE messages SET id = ? WHERE user_id = 'a'", (message_id("a\x1fb", "c", 0),))
    outcomes = store.add_many([req("c", "a\x1fb", "colliding"), req("r1", "bob", "innocent bystander")])
    assert isinstance(outcomes[0], Conflict) and "collide" in outcomes[0].message
    assert outcomes[1].status == "added"
    assert [m.content for m in store.user_messages("bob")] == ["innocent bystander"]
    assert [m.content for m in store.user_messages("a")] == ["first"]
    assert store.user_messages("a\x1fb") == []
    # the refused batch-at-once attempt left nothing behind: the index and the users' versions count bob's Add alone
    from refind_cli import index_store

    assert index_store.verify(store.conn) == []
    versions = dict(store.conn.execute("SELECT user_id, version FROM users"))
    assert versions.get("bob") == 1 and versions.get("a\x1fb", 0) == 0


class _Racing:
    """A connection whose statements run as given, but between its first and second another process's first open
    of the same new file creates ``_migrations`` (``after_first``) or its switch to WAL meets a lock (``locked``)."""

    def __init__(self, conn, *, after_first=None, locked: int = 0) -> None:
        self.conn, self.after_first, self.locked, self.calls = conn, after_first, locked, 0

    def execute(self, sql, *args):
        if sql.startswith("PRAGMA journal_mode") and self.locked:
            self.locked -= 1
            raise sqlite3.OperationalError("database is locked")
        out = self.conn.execute(sql, *args)
        self.calls += 1
        if self.calls == 1 and self.after_first is not None:
            self.after_first()
        return out


def test_a_new_file_another_process_is_migrating_is_not_taken_for_another_programs(db_path) -> None:
    # checked in one read: two let another first open create _migrations between them, and its tables alone then
    # refused a new refind database as another program's (1–5 of 150–320 racing opens)
    first = sqlite3.connect(db_path, isolation_level=None)
    mine = sqlite3.connect(db_path, isolation_level=None)
    creating = "CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)"
    migrations.refuse_foreign(_Racing(mine, after_first=lambda: first.execute(creating)))
    assert [r[0] for r in mine.execute("SELECT name FROM sqlite_master WHERE type = 'table'")] == ["_migrations"]
    first.close()
    mine.close()


def test_the_switch_to_wal_waits_for_a_lock_as_long_as_the_busy_timeout(db_path) -> None:
    # SQLite answers "database is locked" to journal_mode = WAL at once, without its busy handler, when processes
    # open a new file together: it is tried again until the busy timeout
    from refind_cli.store import _use_wal

    conn = sqlite3.connect(db_path, isolation_level=None)
    _use_wal(_Racing(conn, locked=3), 5.0)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    began = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="database is locked"):
        _use_wal(_Racing(conn, locked=10**6), 0.3)  # past the busy timeout: the error stands
    assert time.monotonic() - began < 5
    with pytest.raises(sqlite3.OperationalError, match="no such"):  # any other error at once
        _use_wal(_Broken(conn), 5.0)
    conn.close()


class _Broken:
    """A connection every statement of which fails otherwise than on a lock."""

    def __init__(self, conn) -> None:
        self.conn = conn

    def execute(self, sql, *args):
        raise sqlite3.OperationalError("no such thing")


def test_a_file_deleted_under_an_open_connection_is_said_so_not_called_read_only(tmp_path: Path) -> None:
    # SQLITE_READONLY_DBMOVED (1032), for real: what a writer that lost the race with `refind add`'s removal of the
    # empty file it created meets — the file is gone, not read-only
    from refind_cli.errors import FileReplaced
    from refind_cli.store import storage_error

    db = tmp_path / "refind.db"
    conn = sqlite3.connect(db)
    try:
        conn.execute("CREATE TABLE t (a)")
        conn.commit()
        db.unlink()
        with pytest.raises(sqlite3.OperationalError) as refused:
            conn.execute("INSERT INTO t VALUES (1)")
            conn.commit()
    finally:
        conn.close()
    error = storage_error(refused.value, db)
    assert isinstance(error, FileReplaced) and error.exit_code == 7
    assert (
        "was deleted or replaced while this process had it open" in error.message
        and "run the command again" in error.message
    )


def test_a_read_only_database_has_one_message_at_open_and_at_write(tmp_path: Path) -> None:
    """SQLite's read-only refusal of a write (SQLITE_READONLY, for real: a read-only connection) is said as opening
    a file that cannot be written is (README's fault table): one message, not two versions."""
    from refind_cli.errors import ReadOnlyDatabase
    from refind_cli.store import storage_error

    db = tmp_path / "refind.db"
    Store(db, retention_days=None).close()
    conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
    try:
        with pytest.raises(sqlite3.OperationalError) as refused:
            conn.execute("INSERT INTO write_log (id) VALUES (1)")
    finally:
        conn.close()
    error = storage_error(refused.value, db)
    assert isinstance(error, ReadOnlyDatabase)
    assert error.message == (
        f"database {db}: cannot be written (attempt to write a readonly database); the file, its folder (SQLite "
        "creates the -wal and -shm files beside it) or the file system is read-only"
    )


_FULL_DISK_REPLAY = """
import json, resource, sys
from refind_cli.contract import AddRequest, Message
from refind_cli.store import Store, storage_error
db = sys.argv[1]
store = Store(db, retention_days=None)
first = AddRequest("r1", "u1", "s1", (Message("user", "hello", None),))
store.add(first)
store.checkpoint()
resource.setrlimit(resource.RLIMIT_FSIZE, (1024, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
said = {}
try:
    store.add(AddRequest("r2", "u1", "s1", (Message("user", "x" * 500_000, None),)))
except Exception as exc:
    said["new"] = type(storage_error(exc, db) if not hasattr(exc, "kind") else exc).__name__
for name, request in (("replay", first), ("both", [first, first])):
    try:
        out = store.add(request) if name == "replay" else store.add_many(request)
        said[name] = out.status if name == "replay" else [o.status for o in out]
    except Exception as exc:
        said[name] = type(exc).__name__
print(json.dumps(said))
"""


def test_an_identical_replay_is_answered_when_the_disk_refuses_writes(tmp_path: Path) -> None:
    # README: "an identical replay 200 (nothing written)"; every write transaction also notes itself in the write
    # log, so on a full disk (here `ulimit -f`) a client sending its stored batch again got 507 "retry" (a review of
    # round 29): it is answered from what is stored, and a new request is still refused
    import json
    import subprocess
    import sys

    db = tmp_path / "refind.db"
    done = subprocess.run([sys.executable, "-c", _FULL_DISK_REPLAY, str(db)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"new": "DiskFull", "replay": "duplicate", "both": ["duplicate", "duplicate"]}


def test_an_identical_replay_is_answered_while_another_process_holds_the_write_lock(db_path: Path) -> None:
    from refind_cli.errors import DatabaseLocked
    from refind_cli.store import storage_error

    with Store(db_path, retention_days=None) as store:
        store.add(req("r1"))
        other = sqlite3.connect(db_path)
        other.execute("BEGIN IMMEDIATE")
        try:
            with store.busy_timeout(0.05):
                assert store.add(req("r1")).status == "duplicate"
                with pytest.raises(sqlite3.OperationalError) as refused:
                    store.add(req("r2"))
                assert isinstance(storage_error(refused.value, db_path), DatabaseLocked)
                with pytest.raises(sqlite3.OperationalError):  # one new request among them: the batch is refused
                    store.add_many([req("r1"), req("r3")])
        finally:
            other.rollback()
            other.close()
