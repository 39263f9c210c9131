"""The database file deleted or replaced under any Store that writes — a long `refind add`, `refind forget`, a library
caller: every write transaction first checks that the path still names the file the Store opened
(``Store.check_file``), so nothing is acknowledged into a file no later open sees, nor into the new file unasked. The
server and a Memory also check before reads (tests/test_server_file_replaced.py, tests/test_api_file_replaced.py)."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from helpers import add_request

from refind_cli.errors import FileReplaced
from refind_cli.replay import replay
from refind_cli.store import Store


def _requests(db: Path) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        return [r[0] for r in conn.execute("SELECT request_id FROM requests ORDER BY request_id")]
    finally:
        conn.close()


def _replacement(tmp_path: Path) -> Path:
    other = tmp_path / "other.db"
    with Store(other, retention_days=None) as store:
        add_request(store, "theirs", "u", "s", "a database restored from elsewhere")
    return other


def test_a_write_after_the_file_was_replaced_is_refused_and_lands_nowhere(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    store = Store(db, retention_days=None)
    add_request(store, "r1", "u", "s", "the kayak is blue")
    os.replace(_replacement(tmp_path), db)
    with pytest.raises(FileReplaced) as caught:
        add_request(store, "r2", "u", "s", "the kayak is red")
    assert caught.value.message == (
        f"database {db.absolute()}: the file was deleted or replaced while this process had it open; nothing was "
        "read or written — open the database again (run the command again, restart the server) to use what is "
        "there now"
    )
    with pytest.raises(FileReplaced):  # and every later write
        add_request(store, "r3", "u", "s", "the kayak is green")
    held = [r[0] for r in store.conn.execute("SELECT request_id FROM requests")]
    assert held == ["r1"]  # the file it opened: what it had, nothing more
    store.close()
    assert _requests(db) == ["theirs"]  # the file there now: untouched


def test_a_write_after_the_file_was_deleted_creates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    store = Store(db, retention_days=None)
    add_request(store, "r1", "u", "s", "the kayak is blue")
    db.unlink()
    with pytest.raises(FileReplaced):
        add_request(store, "r2", "u", "s", "the kayak is red")
    store.close()
    assert not db.exists()
    with Store(db, retention_days=None) as fresh:  # a new database at the path: the deleted one's log not replayed
        assert fresh.counts()["requests"] == 0


def test_a_file_kept_under_another_name_gets_its_last_commits(tmp_path: Path) -> None:
    """`mv memory.db old.db; mv backup.db memory.db` under a running process: old.db is whole (its log, named
    after the path, is drained into it) and memory.db is the backup, not old.db's pages replayed over it."""
    db = tmp_path / "m.db"
    store = Store(db, retention_days=None)
    add_request(store, "r1", "u", "s", "the kayak is blue")
    os.replace(db, tmp_path / "old.db")
    os.replace(_replacement(tmp_path), db)
    store.close()
    assert _requests(db) == ["theirs"]
    assert _requests(tmp_path / "old.db") == ["r1"]


def test_a_store_on_a_relative_path_writes_on_after_a_chdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = Store("m.db", retention_days=None)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    add_request(store, "r1", "u", "s", "the kayak is blue")
    store.close()
    assert _requests(tmp_path / "m.db") == ["r1"]


def test_a_replay_stops_at_the_first_batch_after_the_file_was_replaced(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    log = tmp_path / "log.jsonl"
    lines = [
        {"request_id": f"r{i}", "user_id": "u", "session_id": "s", "messages": [{"role": "user", "content": f"m{i}"}]}
        for i in range(6)
    ]
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    replacement = _replacement(tmp_path)

    def swap(done: int, total: int | None) -> None:
        if done and replacement.exists():  # after the first batch: a restore by mv
            os.replace(replacement, db)

    store = Store(db, retention_days=None)
    summary = replay(store, str(log), batch_size=2, on_progress=swap, parallel=False)
    store.close()
    assert isinstance(summary.fault, FileReplaced)
    assert summary.requests_added == 2
    assert summary.fault.message.endswith(
        "; 2 of 6 requests went into the file this replay opened; the same command stores the whole file into the "
        "database there now"
    )
    assert _requests(db) == ["theirs"]  # the restored file: nothing of the replay
    with Store(db, retention_days=None) as again:  # the same command, again: the whole file, into the file there now
        assert replay(again, str(log), parallel=False).requests_added == 6
    assert _requests(db) == ["r0", "r1", "r2", "r3", "r4", "r5", "theirs"]


def test_a_replay_from_stdin_stopped_by_a_replaced_file_asks_for_all_its_lines_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """stdin cannot be read again: "the same command stores the whole file" sent a user back to a command that reads
    a new, empty stdin (a probe of round 28). What went into the old file is not in the new one: every line again."""
    import io
    import sys

    db = tmp_path / "m.db"
    lines = [
        {"request_id": f"r{i}", "user_id": "u", "session_id": "s", "messages": [{"role": "user", "content": f"m{i}"}]}
        for i in range(6)
    ]
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    replacement = _replacement(tmp_path)

    def swap(done: int, total: int | None) -> None:
        if done and replacement.exists():  # after the first batch: a restore by mv
            os.replace(replacement, db)

    store = Store(db, retention_days=None)
    summary = replay(store, "-", batch_size=2, on_progress=swap, parallel=False)
    store.close()
    assert isinstance(summary.fault, FileReplaced)
    assert summary.fault.message.endswith(
        "; 2 of 6 requests went into the file this replay opened; <stdin> cannot be read again: give refind add all "
        "of its lines again to store them in the database there now"
    )
    assert _requests(db) == ["theirs"]


def test_a_store_that_only_read_leaves_the_log_to_whoever_opened_the_new_file(tmp_path: Path) -> None:
    """A reader drains nothing: a process that opened the restored file meanwhile shares the log named after the
    path, and its acknowledged commits must stay in the restored file, not move into the old one."""
    db = tmp_path / "m.db"
    with Store(db, retention_days=None) as first:
        add_request(first, "mine", "u", "s", "the kayak is blue")
    reader = Store(db, retention_days=None)  # opens, searches, writes nothing
    assert reader.counts()["requests"] == 1
    os.replace(db, tmp_path / "old.db")
    os.replace(_replacement(tmp_path), db)
    writer = Store(db, retention_days=None)  # another process on the restored file, still open
    add_request(writer, "b1", "u", "s", "written into the restored file")
    with pytest.raises(FileReplaced):
        reader.check_file()
    reader.close()
    assert sorted(r[0] for r in writer.conn.execute("SELECT request_id FROM requests")) == ["b1", "theirs"]
    writer.close()
    assert _requests(db) == ["b1", "theirs"]
    assert _requests(tmp_path / "old.db") == ["mine"]


def test_an_in_memory_store_has_no_file_to_create_or_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with Store(":memory:", retention_days=None) as store:
        add_request(store, "r1", "u", "s", "the kayak is blue")
        assert store.counts()["requests"] == 1
    assert list(tmp_path.iterdir()) == []  # no stray ./:memory: file
