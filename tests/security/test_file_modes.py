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


def test_a_database_named_like_a_uri_is_that_file_private_and_kept(tmp_path, monkeypatch) -> None:
    # SQLite (built to allow URIs) read `file:x.db` as x.db, created 0644 beside the empty private file refind
    # checks, and `file:y.db?mode=memory` as a database in memory: stored, then gone with the process
    monkeypatch.chdir(tmp_path)
    old = os.umask(0o022)
    try:
        for name in ("file:x.db", "file:y.db?mode=memory"):
            with Store(name, retention_days=None) as store:
                store.add(
                    parse_add(
                        {
                            "request_id": "r",
                            "user_id": "u",
                            "session_id": "s",
                            "messages": [{"role": "user", "content": "kept"}],
                        }
                    )
                )
            with Store(name, retention_days=None) as again:
                assert [m.content for m in again.user_messages("u")] == ["kept"]
            assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600
    finally:
        os.umask(old)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file:x.db", "file:y.db?mode=memory"]
