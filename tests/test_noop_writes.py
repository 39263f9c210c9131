"""A write transaction that changed nothing writes nothing (Store.write): no write-log entry, no page, no commit.

Every write transaction used to note itself in the write log (index_store.mark_written), so a no-op — an identical
replay, a forget of nothing, an expire with nothing due — wrote a page, and a full disk, `ulimit -f` or a read-only
file refused it although nothing needed writing. The read-only and full-disk CLI/HTTP checks are in test_faults.py.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from refind_cli import index_store, lifecycle, retention
from refind_cli.contract import AddRequest, Message
from refind_cli.errors import NotFound
from refind_cli.store import Store


def req(rid: str, text: str = "Jon: I went hiking at Mount Rainier") -> AddRequest:
    return AddRequest(rid, "u1", "s1", (Message("user", text, None),))


def write_log(db: Path) -> list[int]:
    conn = sqlite3.connect(db)
    try:
        return [r[0] for r in conn.execute("SELECT id FROM write_log ORDER BY n")]
    finally:
        conn.close()


def test_writes_that_change_nothing_leave_the_write_log_as_it_was(db_path: Path) -> None:
    with Store(db_path, retention_days=30) as store:
        store.add(req("r1"))
        retention.remember(store, 30, by="test")
        before = write_log(db_path)
        with store.write():
            pass
        assert store.add(req("r1")).status == "duplicate"
        assert [o.status for o in store.add_many([req("r1"), req("r1")])] == ["duplicate", "duplicate"]  # type: ignore[union-attr]
        with pytest.raises(NotFound):
            lifecycle.forget(store, "u1", session_id="never")
        assert lifecycle.expire(store).messages == 0
        assert write_log(db_path) == before
        assert not store.conn.in_transaction
        store.add(req("r2", "Jon: something new"))  # a real write is still marked, once
        after = write_log(db_path)
        assert after[: len(before)] == before and len(after) == len(before) + 1


def test_a_schema_change_inside_a_write_is_committed(db_path: Path) -> None:
    # total_changes counts no DDL: a transaction that only changes the schema is told apart by the file's
    # schema_version, never rolled back as a no-op (nothing its code must remember to say)
    with Store(db_path, retention_days=None) as store:
        before = write_log(db_path)
        with store.write():
            store.conn.execute("CREATE TABLE scratch (x)")
        with store.write():
            store.conn.execute("DROP TABLE scratch")
        with store.write():
            pass
    conn = sqlite3.connect(db_path)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        conn.close()
    assert "scratch" not in tables  # created, then dropped: both committed
    assert len(write_log(db_path)) == len(before) + 2  # one mark for each, none for the write that changed nothing


def test_a_cached_index_stays_right_across_writes_that_changed_nothing(db_path: Path) -> None:
    """A no-op is not in the write log, and the content it left is the content the log's last write names: a
    process's cached index read at that write is still current, and a real write by another connection after it
    is still seen."""
    from refind_cli import search

    with Store(db_path, retention_days=None) as mine, Store(db_path, retention_days=None) as other:
        mine.add(req("r1"))

        def found() -> set[str]:
            return {mid for b in search.search(mine, "u1", "hiking", top_k=50) for mid in b.message_ids}

        first = found()
        assert len(first) == 1
        read_at = index_store.last_write(mine.conn)
        assert other.add(req("r1")).status == "duplicate"  # another process's no-op
        with mine.write():
            pass
        assert index_store.last_write(mine.conn) == read_at
        assert found() == first
        other.add(req("r2", "Jon: hiking again, at Mount Hood"))  # a real write: marked, and seen
        assert index_store.last_write(mine.conn) != read_at
        assert len(found()) == 2


_FULL = """
import json, resource, sys
from refind_cli import lifecycle, retention
from refind_cli.contract import AddRequest, Message
from refind_cli.store import Store, storage_error
db = sys.argv[1]
store = Store(db, retention_days=30)
first = AddRequest("r1", "u1", "s1", (Message("user", "hello", None),))
store.add(first)
retention.remember(store, 30, by="test")
store.checkpoint()
resource.setrlimit(resource.RLIMIT_FSIZE, (1024, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
def nothing():
    with store.write():
        pass
said = {}
for name, fn in (
    ("nothing", nothing),
    ("forget", lambda: lifecycle.forget(store, "u1", session_id="never")),
    ("expire", lambda: lifecycle.expire(store).messages),
    ("retention", lambda: retention.remember(store, 30, by="test").after.days),
    ("new", lambda: store.add(AddRequest("r2", "u1", "s1", (Message("user", "x" * 500_000, None),)))),
):
    try:
        said[name] = fn()
    except Exception as exc:
        said[name] = type(storage_error(exc, db) if not hasattr(exc, "kind") else exc).__name__
print(json.dumps(said))
"""


def test_writes_that_change_nothing_succeed_while_a_file_size_limit_refuses_writes(tmp_path: Path) -> None:
    # `ulimit -f` for real, in a child process: before, each of these failed DiskFull on its write-log row
    db = tmp_path / "refind.db"
    done = subprocess.run([sys.executable, "-c", _FULL, str(db)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "nothing": None,
        "forget": "NotFound",  # what it answers on any disk, not DiskFull
        "expire": 0,
        "retention": 30,
        "new": "DiskFull",
    }
