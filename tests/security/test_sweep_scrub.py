"""Item 5: with retention off, the server's periodic sweep still finishes a forget that reported
`checkpointed: false` (a reader was in the way): afterwards no byte of the text is left in the WAL."""

from __future__ import annotations

import sqlite3

from refind_cli.contract import parse_add
from refind_cli.lifecycle import forget
from refind_cli.server import ServerSettings, create_app
from refind_cli.store import Store

SECRET = "Caroline: the safe combination is otter-9-4-17"


def test_the_sweep_finishes_a_busy_forget_with_retention_off(db_path) -> None:
    app = create_app(ServerSettings(db=db_path, retention_days=None, mode="bm25", expire_interval_s=0))
    runtime = app.state.runtime
    with Store(db_path) as store:
        body = {"request_id": "r", "user_id": "u", "session_id": "s", "messages": [{"role": "user", "content": SECRET}]}
        store.add(parse_add(body))
        reader = sqlite3.connect(db_path)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM messages").fetchone()  # holds a snapshot: the checkpoint cannot finish
        result = forget(store, "u")
        assert result.checkpointed is False
        reader.rollback()
        reader.close()
        wal = db_path.with_name(db_path.name + "-wal")  # (kept while `store` is open, as the server's pool keeps it)
        assert SECRET.encode() in wal.read_bytes()  # old page images are still there, awaiting the sweep
        runtime.sweep()
        assert wal.stat().st_size == 0
        assert SECRET.encode() not in db_path.read_bytes()
    runtime.close()
