"""kill -9 in the middle of Adds and of forgets: after a restart the maintained index agrees with the messages
(segments change in the same transaction as the rows, so a crash loses both or neither)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from refind_cli import index_store, search
from refind_cli.store import Store

ROOT = Path(__file__).resolve().parent.parent

WRITER = """
import sys
from refind_cli.contract import parse_add
from refind_cli.store import Store
store = Store(sys.argv[1], retention_days=None)
i = 0
while True:  # batches of Adds, as a replay writes them, until killed
    batch = []
    for _ in range(20):
        i += 1
        text = f"Alice: entry {i} about kayak trips, lake tahoe and biscuit the dog " * (1 + i % 3)
        batch.append(parse_add({"request_id": f"r{i}", "user_id": f"u{i % 3}", "session_id": f"s{i % 7}",
                                "messages": [{"role": "user", "content": text, "timestamp": 1685606400000 + i}]}))
    store.add_many(batch)
"""

FORGETTER = """
import sys
from refind_cli import lifecycle
from refind_cli.store import Store
store = Store(sys.argv[1], retention_days=None)
for (rid,) in store.conn.execute("SELECT request_id FROM requests WHERE user_id = 'u1' ORDER BY recorded_at, request_id").fetchall():
    lifecycle.forget(store, "u1", request_id=rid)
"""


def _count(db: Path, sql: str) -> int:
    try:
        with sqlite3.connect(db, timeout=30) as conn:
            return conn.execute(sql).fetchone()[0]
    except sqlite3.Error:
        return 0


def _run_and_kill(code: str, db: Path, until) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", code, str(db)], env=env)
    try:
        while not until():
            assert proc.poll() is None, "the child ended before it could be killed mid-work"
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def _agrees(db: Path) -> None:
    search.clear()
    with Store(db, retention_days=None) as store:  # the restart: open, recover the WAL
        assert index_store.verify(store.conn) == []
        assert not index_store.pending(store.conn)
        for user in ("u0", "u1", "u2"):
            msgs = store.user_messages(user)
            ui = search.user_index(store, user)
            assert ui.maintained and len(ui) == len(msgs)
            naive = search.UserIndex(msgs)
            assert ui.search("kayak biscuit entry 7", top_k=5) == naive.search("kayak biscuit entry 7", top_k=5)


@pytest.mark.slow
def test_kill_9_during_adds_and_during_forgets_leaves_an_index_that_agrees(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    Store(db, retention_days=None).close()
    _run_and_kill(WRITER, db, lambda: _count(db, "SELECT count(*) FROM messages") >= 600)
    _agrees(db)
    before = _count(db, "SELECT count(*) FROM messages WHERE user_id = 'u1'")
    _run_and_kill(FORGETTER, db, lambda: _count(db, "SELECT count(*) FROM messages WHERE user_id = 'u1'") < before - 20)
    assert 0 < _count(db, "SELECT count(*) FROM messages WHERE user_id = 'u1'") < before  # killed mid-way
    _agrees(db)


def test_a_search_sees_an_add_committed_by_another_process_at_once(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    store = Store(db, retention_days=None)
    code = WRITER.replace("while True:", "for _ in range(1):")  # one batch of 20 Adds, then exit
    subprocess.run([sys.executable, "-c", code, str(db)], env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    first = search.user_index(store, "u1")  # warm in this process
    assert first.maintained and len(first) == 7
    extra = code.replace("i = 0", "i = 1000")
    subprocess.run([sys.executable, "-c", extra, str(db)], env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    again = search.user_index(store, "u1")  # no cache cleared: the user's version tells this process
    assert again.maintained and len(again) == len(store.user_messages("u1")) == 13
    assert again.search("entry 1009", top_k=3) == search.UserIndex(store.user_messages("u1")).search(
        "entry 1009", top_k=3
    )
    store.close()
