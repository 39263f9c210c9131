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


def test_a_sweep_that_fails_after_some_steps_says_what_they_removed(
    make_client, db_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sweep commits whole users in steps; one that failed at a later step (another writer held the lock past the
    busy timeout, a full disk) logged only 'retention sweep failed: storage fault: locked' — while the steps before
    it had removed messages, their events recorded: the operator's log said nothing was removed (a probe of round
    29). Now it says how many, as `refind expire` does."""
    import sqlite3
    import time

    from helpers import add

    from refind_cli import lifecycle

    day = 86_400_000
    now = int(time.time() * 1000)
    with Store(db_path, clock=lambda: now - 40 * day, retention_days=None) as store:
        for user in ("ann", "bob", "cid"):
            add(store, user, "s", ("user", "one"), ("user", "two"))
    monkeypatch.setattr(lifecycle, "EXPIRE_STEP_ROWS", 3)  # each user has 3 rows: one user per step
    client = make_client(retention_days=30)
    monkeypatch.setenv("REFIND_BUSY_TIMEOUT", "0.2")
    step = lifecycle._expire_step
    holder = sqlite3.connect(db_path, isolation_level=None)

    def one_step_then_locked(*args, **kwargs):
        done = step(*args, **kwargs)
        if not holder.in_transaction:
            holder.execute("BEGIN IMMEDIATE")  # another process takes the write lock after the first step
        return done

    monkeypatch.setattr(lifecycle, "_expire_step", one_step_then_locked)
    try:
        with caplog.at_level("INFO", logger="refind.server"):
            client.app.state.runtime.sweep_logged()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("retention sweep")]
    assert said == [
        "retention sweep failed after removing 2 messages of 1 user (committed, their events recorded; the next "
        "sweep removes the rest): storage fault: locked"
    ]
