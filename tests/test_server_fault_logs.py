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
