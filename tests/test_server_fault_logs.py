"""What the server logs of a failure outside a request (the retention sweep, warming an index): a fault of the
database file by its kind, as a request's storage fault is logged; anything else by its type and file:line. Nothing
of the data either way. (The sweep on a read-only file system, for real: tests/test_faults.py.)"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from refind_cli.server.asgi import failure
from refind_cli.store import Store


def test_a_write_refused_by_a_read_only_database_is_logged_as_read_only(tmp_path: Path) -> None:
    db = tmp_path / "refind.db"
    Store(db, retention_days=None).close()
    conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)  # SQLite's own read-only open: its real error
    try:
        with pytest.raises(sqlite3.OperationalError) as refused:
            conn.execute("INSERT INTO write_log (id) VALUES (1)")
    finally:
        conn.close()
    assert failure(refused.value, db) == "storage fault: read_only"


def test_anything_else_is_logged_by_its_type_and_line() -> None:
    try:
        raise RuntimeError("a user's text, never logged")
    except RuntimeError as exc:
        said = failure(exc, None)
    assert said.startswith("RuntimeError at test_server_fault_logs.py:") and "text" not in said


def test_a_sweep_that_removes_messages_says_how_many_and_of_whom_in_counts_only(
    make_client, db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # two users' messages recorded 40 days ago, one user's today; a sweep under 30 days' retention removes three
    import re
    import time

    from helpers import add

    day = 86_400_000
    now = int(time.time() * 1000)
    with Store(db_path, clock=lambda: now - 40 * day, retention_days=None) as store:
        add(store, "ann", "s", ("user", "the secret garden"), ("user", "more"))
        add(store, "bob", "s", ("user", "old"))
    with Store(db_path, retention_days=None) as store:
        add(store, "cid", "s", ("user", "kept"))
    client = make_client(retention_days=30)
    with caplog.at_level("INFO", logger="refind.server"):
        client.app.state.runtime.sweep()
        client.app.state.runtime.sweep()  # nothing more to remove: nothing said
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("retention sweep")]
    assert len(said) == 1
    assert re.fullmatch(
        r"retention sweep: 3 messages of 2 users recorded before \d{4}-\d\d-\d\dT[\d:.]+Z removed \(retention 30 days\)",
        said[0],
    ), said
