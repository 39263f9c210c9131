"""The server's SQLite plumbing on a real file: group commit, per-request outcomes inside a batch, the write lock."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from refind_cli.contract import parse_add
from refind_cli.errors import Conflict
from refind_cli.server.dbpool import GroupWriter, SerialStore, ShuttingDown, StorePool
from refind_cli.store import Store


def body(rid: str, text: str = "Jon: hello", user: str = "u") -> dict:
    return {"request_id": rid, "user_id": user, "session_id": "s", "messages": [{"role": "user", "content": text}]}


def test_concurrent_adds_are_committed_in_batches_each_with_its_own_outcome(db_path):
    writer = GroupWriter(lambda: SerialStore(db_path, retention_days=None))
    requests = [parse_add(body(f"r{i}", f"Jon: message {i}")) for i in range(60)]
    requests.append(parse_add(body("r7", "Jon: another payload under an existing id")))
    requests.append(parse_add(body("r3", "Jon: message 3")))  # identical replay
    futures = []
    gate = threading.Barrier(len(requests))

    def submit(request) -> None:
        gate.wait()
        futures.append((request, writer.submit_add(request)))

    threads = [threading.Thread(target=submit, args=(r,)) for r in requests]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    outcomes = {}
    for request, future in futures:
        try:
            outcomes.setdefault(request.request_id, []).append(future.result(timeout=30).status)
        except Conflict:
            outcomes.setdefault(request.request_id, []).append("conflict")
    writer.close()
    assert sorted(outcomes["r7"]) == ["added", "conflict"]
    assert sorted(outcomes["r3"]) == ["added", "duplicate"]
    assert writer.batched_requests == len(requests) and writer.batches < len(requests)  # some were grouped
    with Store(db_path, retention_days=None) as store:
        assert store.counts()["requests"] == 60


def test_a_batch_that_fails_below_the_savepoints_answers_each_request_alone(db_path):
    with Store(db_path, retention_days=None):
        pass
    with sqlite3.connect(db_path) as conn:
        conn.execute("DROP TABLE messages")
    writer = GroupWriter(lambda: SerialStore(db_path, retention_days=None))
    futures = [writer.submit_add(parse_add(body(f"r{i}"))) for i in range(5)]
    for future in futures:
        with pytest.raises(sqlite3.OperationalError):
            future.result(timeout=30)
    writer.close()
    with pytest.raises(ShuttingDown):
        writer.submit_add(parse_add(body("late")))


def test_serial_stores_of_one_file_share_one_write_lock_and_the_pool_reuses_stores(db_path):
    a, b = SerialStore(db_path, retention_days=None), SerialStore(db_path, retention_days=None)
    assert a._write_lock is b._write_lock
    order: list[str] = []

    def second() -> None:
        with b.write():
            order.append("b")

    with a.write():
        thread = threading.Thread(target=second)
        thread.start()
        thread.join(0.3)
        order.append("a")  # b waits for a's transaction to end
    thread.join(10)
    assert order == ["a", "b"]
    a.close(), b.close()

    pool = StorePool(lambda: SerialStore(db_path, retention_days=None), max_idle=2)
    with pool.store() as first:
        pass
    with pool.store() as again:
        assert again is first
    pool.close()


def test_an_abandoned_add_never_fails_the_others_committed_with_it(db_path):
    """A waiter that gave up (its future cancelled: a handler cancelled mid-wait) is skipped; it must not turn the
    answers of the other Adds of its batch into errors after they were committed."""
    writer = GroupWriter(lambda: SerialStore(db_path, retention_days=None))
    holder = SerialStore(db_path, retention_days=None)
    with holder.write():  # the writer thread blocks on the shared write lock with r0 in hand
        zeroth = writer.submit_add(parse_add(body("r0")))
        deadline = time.monotonic() + 10
        while not writer._queue.empty() and time.monotonic() < deadline:
            time.sleep(0.01)
        first = writer.submit_add(parse_add(body("r1")))  # these two queue up: the next batch
        second = writer.submit_add(parse_add(body("r2")))
        assert first.cancel()
    assert zeroth.result(timeout=30).status == "added"
    assert second.result(timeout=30).status == "added"
    writer.close()
    holder.close()
    with Store(db_path, retention_days=None) as store:
        assert {row[0] for row in store.conn.execute("SELECT request_id FROM requests")} == {"r0", "r2"}


def test_a_commit_that_fails_is_never_acknowledged_and_later_adds_are_really_committed(db_path):
    """COMMIT itself can fail and leave the transaction open (a deferred constraint; SQLITE_BUSY in rollback-journal
    mode): that batch must be answered with the error, and no later Add may be acknowledged inside the dead
    transaction without ever being committed."""
    with Store(db_path, retention_days=None):
        pass
    with sqlite3.connect(db_path) as conn:  # a constraint SQLite checks only at COMMIT
        conn.executescript("""
            CREATE TABLE parent (id INTEGER PRIMARY KEY);
            CREATE TABLE child (pid INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);
            CREATE TRIGGER poison AFTER INSERT ON messages WHEN NEW.content LIKE '%poison%'
            BEGIN INSERT INTO child VALUES (42); END;
        """)
    writer = GroupWriter(lambda: SerialStore(db_path, retention_days=None))
    with pytest.raises(sqlite3.IntegrityError):
        writer.submit_add(parse_add(body("r1", "Jon: poison"))).result(timeout=30)
    assert writer.submit_add(parse_add(body("r2", "Jon: fine"))).result(timeout=30).status == "added"
    with Store(db_path, retention_days=None) as store:  # another connection sees r2 while the writer still runs
        assert {row[0] for row in store.conn.execute("SELECT request_id FROM requests")} == {"r2"}
    writer.close()


def test_a_database_reached_through_a_symlink_keeps_its_connections(tmp_path, caplog):
    # SQLite keeps the log beside the link's target: looking beside the link, every lend saw "the -wal file was
    # deleted", checkpointed, logged a warning and reconnected
    real, link = tmp_path / "real.db", tmp_path / "link.db"
    Store(real, retention_days=None).close()
    link.symlink_to(real)
    pool = StorePool(lambda: SerialStore(link, retention_days=None), max_idle=4)
    try:
        with pool.store() as first:
            first.add(parse_add(body("r1")))
        with pool.store() as second:
            assert second is first  # lent again, not retired as healed
        assert "deleted while open" not in caplog.text
        (tmp_path / "real.db-wal").unlink()  # the log really deleted: still noticed
        with pool.store() as third:
            assert third is not first
        assert "the database's -wal file was deleted while open" in caplog.text
    finally:
        pool.close()


def test_a_log_another_process_healed_retires_this_process_s_connections(tmp_path, caplog):
    # `refind serve --workers 3` with its -wal deleted (a probe of round 17): the first worker to notice checkpointed
    # the deleted log and reopened, so a new -wal was at the path, and the other workers' "a -wal is there" passed —
    # their connections kept the deleted log: "disk I/O error" on their Adds until a restart
    db = tmp_path / "r.db"
    Store(db, retention_days=None).close()
    pool = StorePool(lambda: SerialStore(db, retention_days=None), max_idle=4)
    try:
        with pool.store() as first:
            first.add(parse_add(body("r1")))
        wal = tmp_path / "r.db-wal"
        with sqlite3.connect(db) as other:  # another process heals: the log's content into the file…
            other.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        wal.unlink()
        wal.write_bytes(b"")  # … and its reopening makes a new -wal at the path
        with pool.store() as second:
            assert second is not first  # retired, not lent with the deleted log
            second.add(parse_add(body("r2", "Jon: after the heal")))
        assert "the database's -wal file was replaced (another process healed its deletion)" in caplog.text
    finally:
        pool.close()
    with Store(db, retention_days=None) as store:
        assert sorted(r[0] for r in store.conn.execute("SELECT request_id FROM requests")) == ["r1", "r2"]


def test_a_batch_locked_out_by_another_process_answers_every_request_after_one_busy_timeout(db_path, monkeypatch):
    """Another process held the write lock past the busy timeout: the batch failed, and each of its requests was then
    tried alone, each waiting the busy timeout again, one after another — at the default 30 s, the 64th of 64
    concurrent Adds was answered after 32 minutes, and every Add behind them waited as long (a probe of round 28)."""
    from refind_cli.store import storage_error

    monkeypatch.setenv("REFIND_BUSY_TIMEOUT", "0.5")
    with Store(db_path, retention_days=None):
        pass
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's write in progress
    writer = GroupWriter(lambda: SerialStore(db_path, retention_days=None))
    started = time.monotonic()
    futures = [writer.submit_add(parse_add(body(f"r{i}", f"Jon: message {i}"))) for i in range(12)]
    errors = []
    for future in futures:
        with pytest.raises(sqlite3.OperationalError) as caught:
            future.result(timeout=60)
        errors.append(storage_error(caught.value).kind)
    elapsed = time.monotonic() - started
    holder.execute("ROLLBACK")
    holder.close()
    assert errors == ["locked"] * 12
    assert elapsed < 3.0, f"12 locked Adds answered after {elapsed:.1f} s (busy timeout 0.5 s)"
    assert writer.add(parse_add(body("r0", "Jon: message 0"))).status == "added"  # nothing of them was stored
    writer.close()
    with Store(db_path, retention_days=None) as store:
        assert store.counts()["requests"] == 1


def test_identical_replays_in_a_batch_locked_out_by_another_process_are_answered_from_what_is_stored(
    db_path, monkeypatch
):
    """Another process holds the write lock past the busy timeout: the batch is refused, and every request in it was
    answered 503 — also an identical replay of a stored request, which needs nothing written. It is answered from what
    is stored now (one read, on that refused path); the new requests of the same batch are still 503."""
    from refind_cli.store import storage_error

    monkeypatch.setenv("REFIND_BUSY_TIMEOUT", "0.5")
    with Store(db_path, retention_days=None) as store:
        store.add(parse_add(body("r1", "Jon: stored")))
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's write in progress
    writer = GroupWriter(lambda: SerialStore(db_path, retention_days=None))
    try:
        # the writer waits on the lock with the first; the replay meets a new request in a batch (the same one or
        # the next: neither is ever alone)
        futures = {
            rid: writer.submit_add(parse_add(body(rid, text)))
            for rid, text in (("r9", "Jon: new"), ("r1", "Jon: stored"), ("r2", "Jon: new too"))
        }
        assert futures["r1"].result(timeout=60).status == "duplicate"
        for rid in ("r9", "r2"):
            with pytest.raises(sqlite3.OperationalError) as caught:
                futures[rid].result(timeout=60)
            assert storage_error(caught.value).kind == "locked"
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert writer.add(parse_add(body("r2", "Jon: new too"))).status == "added"  # nothing of them was stored
    writer.close()
    with Store(db_path, retention_days=None) as store:
        assert store.counts()["requests"] == 2
