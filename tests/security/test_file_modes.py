"""Item 7: a new database, its WAL and its shm file are readable by their owner only."""

from __future__ import annotations

import os
import stat

from refind_cli.contract import parse_add
from refind_cli.store import Store


def test_a_new_database_and_its_wal_are_private(db_path) -> None:
    old = os.umask(0o022)  # the common default, under which SQLite alone creates 0644 files
    try:
        with Store(db_path) as store:
            body = {
                "request_id": "r",
                "user_id": "u",
                "session_id": "s",
                "messages": [{"role": "user", "content": "hi"}],
            }
            store.add(parse_add(body))
            files = [db_path, db_path.with_name(db_path.name + "-wal"), db_path.with_name(db_path.name + "-shm")]
            assert all(f.exists() for f in files)
            modes = {f.name: stat.S_IMODE(f.stat().st_mode) for f in files}
    finally:
        os.umask(old)
    assert modes == {f.name: 0o600 for f in files}


def test_an_existing_database_keeps_its_mode(db_path) -> None:
    Store(db_path).close()
    db_path.chmod(0o640)
    Store(db_path).close()
    assert stat.S_IMODE(db_path.stat().st_mode) == 0o640
