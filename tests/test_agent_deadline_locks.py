"""An agent search ends by its deadline (plus a stated slack: ``settings.MIN_LOCK_WAIT_S`` for a wait that must
still happen) while another process holds a lock on the database for far longer — a real second process, a real
file, the CLI, the scripted model on loopback.

Before: the open of `refind search --mode agent` waited the whole busy timeout (REFIND_BUSY_TIMEOUT, 30 s by default)
for another process's lock when the file needed its index caught up (an upgraded analyzer) or a migration, or when a
lock readers wait on was held — 27-28 s past a 3 s deadline (BENCHMARKS.md, "An agent search past its deadline
under another process's lock"). The trace's write was already bounded (tests/test_agent_trace_faults.py)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers import T0, add, agent_cli
from llm_server import Slow

SEARCH = '{"action": "search_chatrecord", "keywords": "hiking"}'
NOTE = '{"action": "take_note", "results": [1]}'
FINISH = '{"action": "finish_search"}'
BUSY_S = 60.0  # REFIND_BUSY_TIMEOUT here: what the open waited before, far past the deadline
HELD_S = 180.0  # the other process keeps its lock this long: past the busy timeout too
DEADLINE_S = 3.0
SLACK_S = 10.0  # generous: the stated slack is 1 s (a wait that must still happen) plus the work itself

pytestmark = pytest.mark.usefixtures("no_model_env", "litellm_loaded")

_HOLDER = r"""
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
if sys.argv[2] == "exclusive":  # a lock readers wait on too
    conn.execute("PRAGMA locking_mode = EXCLUSIVE")
    conn.execute("BEGIN EXCLUSIVE")
    conn.execute("INSERT INTO events (at, kind, rows, detail) VALUES (0, 'test', 0, 'held')")
else:  # another writer's transaction: SQLite's write lock
    conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
time.sleep(float(sys.argv[3]))
"""


@pytest.fixture(scope="module")
def litellm_loaded():
    """litellm imported before the searches: its import counts against the deadline (seconds in a new process)."""
    import litellm  # noqa: F401


@contextmanager
def locked_by_another_process(db: Path, kind: str = "write") -> Iterator[None]:
    """A second process holding ``kind`` of lock on ``db`` for the duration (and far longer, if not stopped)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(db), kind, str(HELD_S)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "held\n"
        yield
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def hikes(db_path, monkeypatch):
    from refind_cli.store import Store

    with Store(db_path, retention_days=None) as store:
        add(store, "alice", "hike", ("user", "Caroline: I went hiking at Mount Rainier", T0))
    monkeypatch.setenv("REFIND_BUSY_TIMEOUT", str(BUSY_S))
    return db_path


def _sql(db: Path, statement: str, *args: object) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        return conn.execute(statement, args).fetchall()
    finally:
        conn.close()


def _timed(cli, llm_server):
    began = time.monotonic()
    r = agent_cli(cli, llm_server, "--deadline", f"{DEADLINE_S:g}", "--json")
    return r, time.monotonic() - began


def test_an_index_to_catch_up_under_another_writers_lock_does_not_hold_the_search_past_its_deadline(
    cli, hikes, llm_server
):
    # the index left by another analyzer: the next open indexes everything again, which needs the write lock
    _sql(hikes, "UPDATE index_meta SET value = 'an older analyzer' WHERE key = 'analyzer'")
    llm_server.play(SEARCH, NOTE, Slow(60, FINISH))  # the deadline passes during the third call
    with locked_by_another_process(hikes):
        r, took = _timed(cli, llm_server)
    assert took < DEADLINE_S + SLACK_S  # (before: the whole busy timeout, 60 s, waited in the open)
    assert r.exit_code == 0, r.output
    found = json.loads(r.stdout)
    assert found["deadline_passed"] is True and found["path"] == "notes"  # the search ran: built from the rows
    assert "Mount Rainier" in found["data"][0]["content"]
    kinds = [e["kind"] for e in found["trace"]]
    assert kinds[-3:] == ["deadline", "evidence", "unrecorded"]  # the trace's write met the lock too: said so
    assert found["search_id"] is None
    # nothing was indexed in part: the catch-up never began, and the next open does it whole
    assert _sql(hikes, "SELECT value FROM index_meta WHERE key = 'analyzer'") == [("an older analyzer",)]
    r = cli("search", "hiking", "--user", "alice", "--mode", "bm25")
    assert r.exit_code == 0 and "Mount Rainier" in r.output
    assert _sql(hikes, "SELECT value FROM index_meta WHERE key = 'analyzer'") != [("an older analyzer",)]


def test_a_migration_under_another_writers_lock_fails_the_search_at_its_deadline(cli, hikes, llm_server):
    from refind_cli.migrations import MIGRATIONS

    last = MIGRATIONS[-1][0]
    _sql(hikes, "DELETE FROM _migrations WHERE name = ?", last)  # as a refind upgrade leaves a file: one to apply
    llm_server.play(SEARCH, NOTE, FINISH)
    with locked_by_another_process(hikes):
        r, took = _timed(cli, llm_server)
    assert took < DEADLINE_S + SLACK_S  # (before: 60 s, then the same exit)
    assert r.exit_code == 8, r.output  # the locked database's exit code: one error line, no traceback
    said = " ".join(r.output.split())
    assert "locked by another process until the search's deadline" in said and "nothing was read or written" in said
    assert llm_server.requests == []  # nothing was searched, no model was asked
    assert (last,) not in _sql(hikes, "SELECT name FROM _migrations")  # nothing of the migration was written


def test_a_lock_readers_wait_on_fails_the_search_at_its_deadline(cli, hikes, llm_server):
    llm_server.play(SEARCH, NOTE, FINISH)
    with locked_by_another_process(hikes, "exclusive"):
        r, took = _timed(cli, llm_server)
    assert took < DEADLINE_S + SLACK_S  # (before: 60 s)
    assert r.exit_code == 8, r.output
    assert "locked by another process until the search's deadline" in " ".join(r.output.split())
    assert llm_server.requests == []


def test_a_search_asked_past_its_deadline_still_opens_under_a_short_lock(cli, hikes, llm_server, monkeypatch):
    # the deadline spent before the open (litellm's import, say): the open still waits the stated moment, so a lock
    # held briefly (an add's commit) does not fail the search — it answers BM25 on the question, deadline passed
    from refind_cli import model

    real = model.from_env

    def slow_to_load(*args, **kwargs):
        time.sleep(DEADLINE_S + 0.2)
        return real(*args, **kwargs)

    monkeypatch.setattr(model, "from_env", slow_to_load)
    llm_server.play(SEARCH, NOTE, FINISH)
    holder = sqlite3.connect(hikes, isolation_level=None, check_same_thread=False)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("INSERT INTO events (at, kind, rows, detail) VALUES (0, 'test', 0, 'held')")

    def release() -> None:
        time.sleep(DEADLINE_S + 0.5)  # inside the open's last moment
        holder.execute("ROLLBACK")
        holder.close()

    import threading

    threading.Thread(target=release, daemon=True).start()
    r, _ = _timed(cli, llm_server)
    assert r.exit_code == 0, r.output
    found = json.loads(r.stdout)
    assert found["deadline_passed"] is True and found["path"] == "direct_bm25" and found["data"]


def test_the_index_catch_up_stops_at_a_deadline_and_resumes_whole(store):
    from refind_cli import index_store

    add(store, "alice", "hike", ("user", "Caroline: I went hiking at Mount Rainier", T0))
    conn = store.conn
    conn.execute("UPDATE index_meta SET value = 'an older analyzer' WHERE key = 'analyzer'")
    assert index_store.catch_up(conn, until=time.monotonic() - 1) == 0  # past it: no transaction begins
    assert index_store.pending(conn) and not conn.in_transaction
    assert index_store.catch_up(conn, until=time.monotonic() + 60) == 1
    assert not index_store.pending(conn) and index_store.verify(conn) == []


def test_a_store_opened_by_a_deadline_keeps_its_own_busy_timeout_afterwards(tmp_path):
    # the open waits at most what the deadline leaves (here: none, so the 1 s floor); the connection, once open,
    # waits the store's busy timeout again — a later write of the same process is not bound by the search's deadline
    from refind_cli.store import Store

    path = tmp_path / "m.db"
    Store(path, retention_days=None).close()
    for read_only in (False, True):
        store = Store(path, retention_days=None, busy_timeout_s=7.5, read_only=read_only, until=time.monotonic() - 5)
        try:
            assert store.conn.execute("PRAGMA busy_timeout").fetchone()[0] == 7500
        finally:
            store.close()
