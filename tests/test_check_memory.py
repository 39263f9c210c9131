"""`refind inspect --check` compares the search index with the messages a segment at a time: the text it holds is a
segment's, not the whole file's (a database of 2 GB of text needed as much memory, and more, to be checked). What
it finds wrong is tested where the index is (test_index_maintained.py, test_faults.py, …)."""

from __future__ import annotations

import sqlite3
import tracemalloc

from refind_cli import index_store
from refind_cli.contract import parse_add
from refind_cli.store import Store

USERS, MESSAGES, CHARS = 40, 50, 10_000  # 20 MB of text, a user's 500 KB


def test_the_index_is_verified_holding_one_segment_s_text_at_a_time(db_path, cli) -> None:
    with Store(db_path, retention_days=None) as store:
        for u in range(USERS):
            messages = [
                {"role": "user", "content": f"word{i} " + "x" * CHARS, "timestamp": 1_700_000_000_000 + i}
                for i in range(MESSAGES)
            ]
            store.add(parse_add({"request_id": "r", "user_id": f"u{u}", "session_id": "s", "messages": messages}))
    conn = sqlite3.connect(db_path)
    try:
        conn.execute("BEGIN")
        tracemalloc.start()
        try:
            assert index_store.verify(conn) == []
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    finally:
        conn.close()
    assert peak < 5 * 2**20, peak / 2**20  # every message's text held at once: 20 MB and more
    assert cli("inspect", "--check").exit_code == 0
