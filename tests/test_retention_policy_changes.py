"""The stored retention policy as it changes: an expiry nobody asked for never deletes what the policy stored now
keeps; an explicit shorter window is said, also against a stored "off"; a writer that changes the policy says so;
a policy that cannot be stored is a warning, not an error; `refind serve` stores its retention once it can start."""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from pathlib import Path

import pytest
from helpers import Clock, add_request

from refind_cli import Memory, replay
from refind_cli.errors import StorageError
from refind_cli.server.app import Runtime, ServerSettings
from refind_cli.store import DAY_MS, Store


def _seed_old(db: Path) -> None:
    """alice: one request recorded 10 days ago."""
    with Store(db, clock=Clock(int(time.time() * 1000) - 10 * DAY_MS), retention_days=None) as store:
        add_request(store, "r10", "alice", "s1", "ten days ago I repainted the shed green")


def _requests(db: Path) -> set[str]:
    with Store(db, retention_days=None) as store:
        return {r[0] for r in store.conn.execute("SELECT request_id FROM requests")}


def _stored(cli) -> dict | None:
    return json.loads(cli("inspect", "--json").output)["retention_stored"]


def _sweep(db: Path, days: float | None) -> None:
    """One sweep of a server that started with ``days`` (none given to it: the stored policy it read then)."""
    rt = Runtime(
        ServerSettings(db=db, retention_days=days, mode="bm25", expire_interval_s=0, warm=False), model=(None, None)
    )
    try:
        rt.sweep()
    finally:
        rt.close()


# ---- 1. an expiry nobody asked for reads the policy stored now ---------------------------------------------------


def test_the_servers_sweep_keeps_what_the_policy_stored_since_keeps(db_path, cli, monkeypatch):
    monkeypatch.delenv("REFIND_RETENTION_DAYS", raising=False)
    _seed_old(db_path)
    assert cli("add", "y", "--user", "bob", "--session", "s1", "--retention-days", "7").exit_code == 0
    assert cli("add", "z", "--user", "bob", "--session", "s1", "--retention-days", "off").exit_code == 0
    _sweep(db_path, 7)  # started under 7 days; the policy is off now
    assert "r10" in _requests(db_path)

    assert cli("add", "w", "--user", "bob", "--session", "s1", "--retention-days", "7").exit_code == 0
    _sweep(db_path, 7)  # the policy is 7 again: the sweep deletes what is past it
    assert "r10" not in _requests(db_path)


def test_memory_expire_keeps_what_the_policy_stored_since_keeps(db_path, cli, monkeypatch):
    monkeypatch.delenv("REFIND_RETENTION_DAYS", raising=False)
    _seed_old(db_path)
    with Memory(db_path, retention_days=7) as memory:  # stores 7
        assert cli("add", "z", "--user", "bob", "--session", "s1", "--retention-days", "off").exit_code == 0
        result = memory.expire()
        assert (result.messages, result.retention_days) == (0, None)
        assert memory.search("repainted shed", user="alice") == []  # its own reads keep its window
    assert "r10" in _requests(db_path)

    explicit = cli("expire", "--days", "7")  # asked for: done as told, and said
    assert explicit.exit_code == 0, explicit.output
    assert "r10" not in _requests(db_path)


# ---- 2. a window shorter than a stored "off" -----------------------------------------------------------------------


def test_an_explicit_window_is_shorter_than_a_stored_off(db_path, cli, monkeypatch):
    monkeypatch.delenv("REFIND_RETENTION_DAYS", raising=False)
    assert cli("add", "x", "--user", "alice", "--session", "s1", "--retention-days", "off").exit_code == 0
    dry = cli("expire", "--days", "7", "--dry-run", "--json")
    assert json.loads(dry.stdout)["policy"]["shorter_than_stored"] is True
    said = " ".join(cli("expire", "--days", "7", "--dry-run").output.split())
    assert "note: 7 days is shorter than the stored policy of off (keeps everything)" in said
    assert json.loads(cli("expire", "--dry-run", "--json").stdout)["policy"]["shorter_than_stored"] is False


# ---- 3. a writer that changes the policy says so -------------------------------------------------------------------


def test_refind_add_says_when_it_changes_the_stored_policy(db_path, cli, monkeypatch):
    monkeypatch.delenv("REFIND_RETENTION_DAYS", raising=False)
    first = cli("add", "a", "--user", "alice", "--session", "s1", "--retention-days", "90")
    assert first.stderr == "retention policy: none → 90 days (stored, from --retention-days)\n"
    monkeypatch.setenv("REFIND_RETENTION_DAYS", "7")
    again = cli("add", "a", "--user", "alice", "--session", "s1")  # a duplicate: nothing written but the policy
    assert again.exit_code == 0
    assert again.stdout.startswith("already stored (identical replay, nothing written)")
    assert again.stderr == "retention policy: 90 days → 7 days (stored, from REFIND_RETENTION_DAYS)\n"
    same = cli("add", "a", "--user", "alice", "--session", "s1", "--json")
    assert same.stderr == ""  # unchanged: nothing said
    assert json.loads(same.stdout)["retention_policy"] == {
        "days": 7,
        "source": "REFIND_RETENTION_DAYS",
        "stored": True,
        "changed": False,
        "before": {"days": 7},
        "error": None,
    }
    monkeypatch.delenv("REFIND_RETENTION_DAYS")
    off = json.loads(cli("add", "a", "--user", "alice", "--session", "s1", "--retention-days", "off", "--json").stdout)
    assert off["retention_policy"]["changed"] is True and off["retention_policy"]["before"] == {"days": 7}
    assert "retention_policy" not in json.loads(cli("add", "a", "--user", "alice", "--session", "s1", "--json").stdout)


def test_refind_serve_logs_a_change_of_the_stored_policy(db_path):
    from test_case_folding import _server_log

    cfg = ServerSettings(db=db_path, mode="bm25", expire_interval_s=0, retention_given="7")
    assert "retention policy: none → 7 days (stored, from --retention-days)" in _server_log(cfg)
    assert not [line for line in _server_log(cfg) if "retention" in line]  # stored already: nothing said


# ---- 4. a policy that cannot be stored after the data ----------------------------------------------------------------


class _Locker:
    """Another writer: takes the database's write lock when told, and lets go."""

    def __init__(self, db: Path) -> None:
        self.conn = sqlite3.connect(db, isolation_level=None)

    def take(self) -> None:
        if not self.conn.in_transaction:
            self.conn.execute("BEGIN IMMEDIATE")

    def release(self) -> None:
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")


def test_a_policy_refind_add_cannot_store_is_a_warning_and_the_data_is_kept(db_path, cli, monkeypatch):
    from refind_cli import retention

    monkeypatch.delenv("REFIND_RETENTION_DAYS", raising=False)
    monkeypatch.setenv("REFIND_BUSY_TIMEOUT", "0")
    assert cli("add", "first", "--user", "alice", "--session", "s1").exit_code == 0  # the database exists
    locker = _Locker(db_path)
    remember = retention.remember

    def locked_first(store, days, *, by):  # the other writer arrives between the data's commit and the policy
        locker.take()
        return remember(store, days, by=by)

    monkeypatch.setattr(retention, "remember", locked_first)
    try:
        result = cli("add", "hello", "--user", "alice", "--session", "s1", "--retention-days", "90")
    finally:
        locker.release()
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("stored: request cli-")
    assert result.stderr == (
        "warning: the data was stored but the retention policy (90 days, from --retention-days) was not: database "
        "is locked. To store it, run again with --retention-days 90 (what is stored is skipped)\n"
    )
    assert len(_requests(db_path)) == 2 and _stored(cli) is None


def test_a_replay_stopped_by_a_fault_stores_no_policy(db_path, cli, tmp_path, monkeypatch):
    """A replay a fault stopped half-way stores the policy neither (the `fault is None` condition)."""
    monkeypatch.delenv("REFIND_RETENTION_DAYS", raising=False)
    monkeypatch.setenv("REFIND_BUSY_TIMEOUT", "0")
    assert cli("add", "first", "--user", "alice", "--session", "s1").exit_code == 0
    src = tmp_path / "two.jsonl"
    src.write_text(
        "".join(
            json.dumps({"request_id": f"r{i}", "user_id": "alice", "session_id": "s1", "messages": [m]}) + "\n"
            for i, m in enumerate([{"role": "user", "content": "one"}, {"role": "user", "content": "two"}])
        )
    )
    locker = _Locker(db_path)
    real = replay.replay

    def one_batch_then_locked(store, path, *, on_progress=None, **kw):
        def progress(done, total):
            if done:
                locker.take()  # another writer holds the lock after the first batch committed
            if on_progress:
                on_progress(done, total)

        try:
            return real(store, path, on_progress=progress, batch_size=1, **kw)
        finally:
            locker.release()  # … and is done before refind add would store the policy

    monkeypatch.setattr(replay, "replay", one_batch_then_locked)
    result = cli("add", "--file", str(src), "--retention-days", "90")
    assert result.exit_code == 8, result.output
    assert "stored 1 of 2 requests" in result.output
    assert _stored(cli) is None


# ---- 5. Memory given the stored value under another writer -------------------------------------------------------


def test_memory_given_the_stored_retention_does_not_wait_for_another_writer(db_path, monkeypatch):
    monkeypatch.setenv("REFIND_BUSY_TIMEOUT", "0")
    with Memory(db_path, retention_days=90):
        pass
    locker = _Locker(db_path)
    locker.take()
    try:
        with Memory(db_path, retention_days=90) as memory:  # stored already: no write, no lock
            assert memory.sessions(user="alice") == []
        with pytest.raises(StorageError, match=r"locked by another process"):  # a change: a RefindError
            Memory(db_path, retention_days=30)
    finally:
        locker.release()


# ---- 6. refind serve stores its retention once it can start ----------------------------------------------------


def test_a_serve_that_cannot_start_stores_no_policy(db_path, cli, monkeypatch):
    for name in ("REFIND_RETENTION_DAYS", "REFIND_API_BASE", "REFIND_MODEL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert cli("add", "hi", "--user", "alice", "--session", "s1").exit_code == 0
    from test_server_e2e import _free_port

    # a free port: another process holding the default one (8000) failed it for that, not for the missing model
    result = cli("serve", "--mode", "agent", "--retention-days", "3", "--port", str(_free_port()))
    assert result.exit_code == 5, result.output
    assert _stored(cli) is None


@pytest.mark.slow
def test_refind_serve_logs_the_re_index_of_an_upgraded_database(db_path):
    """The CLI's path: `refind serve` no longer opens the database before the server does, so the server's own open
    re-indexes it and logs that (test_case_folding covers create_app called directly)."""
    from test_case_folding import old_database
    from test_server_e2e import ServerProcess

    old_database(db_path)
    server = ServerProcess(db_path, "--retention-days", "90")
    try:
        said = "".join(server.lines)
    finally:
        assert server.stop() in (0, -signal.SIGTERM)
    assert "indexing 4 messages for search (the first open after an upgrade): listening when done" in said
    assert "retention policy: none → 90 days (stored, from --retention-days)" in said


# ---- 7. what the texts say -------------------------------------------------------------------------------------------


def test_expire_and_inspect_say_where_retention_comes_from(db_path, cli, monkeypatch):
    monkeypatch.delenv("REFIND_RETENTION_DAYS", raising=False)
    monkeypatch.setenv("COLUMNS", "300")  # the table's cell on one line
    assert cli("add", "x", "--user", "alice", "--session", "s1").exit_code == 0
    inspected = " ".join(cli("inspect").output.split())
    assert "none stored (add, serve, mcp and Memory store one given them: --retention-days, REFIND_RETENTION_DAYS)" in (
        inspected
    )
    assert cli("add", "x", "--user", "alice", "--session", "s1", "--retention-days", "off").exit_code == 0
    said = " ".join(cli("expire").output.split())
    assert "retention is off: nothing expires (the database's stored policy)" in said
    assert "--retention-days off" not in said
    helped = " ".join(cli("expire", "--help").output.split())
    assert "Without --days (or REFIND_RETENTION_DAYS, which stands for it) the window is the retention" in helped


# ---- 8. the -wal path, resolved once when the store opens ----------------------------------------------------------


def test_a_swapped_symlink_is_refused_before_the_resolved_wal_path_is_used(tmp_path):
    """A lend checks the file (check_file: os.stat follows the link) before the -wal resolved at open is looked at:
    a link pointed at another database since is refused, never healed through the old target's log."""
    from refind_cli.errors import FileReplaced
    from refind_cli.server.dbpool import _usable

    first, second, link = tmp_path / "first.db", tmp_path / "second.db", tmp_path / "link.db"
    for path in (first, second):
        Store(path, retention_days=None).close()
    link.symlink_to(first)
    store = Store(link, retention_days=None)
    try:
        assert store.wal_path == str(first.resolve()) + "-wal"
        assert _usable(store)
        link.unlink()
        link.symlink_to(second)
        with pytest.raises(FileReplaced):
            _usable(store)
    finally:
        store.close()


# ---- a final read: a busy port, a policy stored while an expiry waits for the lock, a bad value opens nothing ------


def test_a_serve_whose_port_is_busy_opens_nothing_stores_nothing_and_deletes_nothing(db_path, cli, monkeypatch):
    """uvicorn binds only after the app's startup (the first sweep) has run: the port is checked before anything."""
    import socket

    monkeypatch.delenv("REFIND_RETENTION_DAYS", raising=False)
    _seed_old(db_path)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = cli("serve", "--mode", "bm25", "--port", str(port), "--retention-days", "7")
    assert result.exit_code == 1, result.output
    assert f"cannot listen on 127.0.0.1:{port}" in result.output
    assert "nothing was opened or changed" in result.output
    assert _stored(cli) is None
    assert "r10" in _requests(db_path)


def test_an_unasked_expiry_reads_the_policy_again_under_the_write_lock(db_path, monkeypatch):
    from refind_cli import lifecycle, retention

    _seed_old(db_path)
    with Store(db_path, retention_days=None) as other:
        retention.remember(other, 7, by="test")
    real = retention.unasked_window
    calls = []

    def then_off(store):  # the policy is turned off by another process right after the first read
        window = real(store)
        if not calls:
            with Store(db_path, retention_days=None) as other:
                retention.remember(other, None, by="another process")
        calls.append(window)
        return window

    monkeypatch.setattr(retention, "unasked_window", then_off)
    with Store(db_path, retention_days=7) as store:
        result = lifecycle.expire(store, unasked=True)
    assert calls == [7, None]
    assert (result.messages, result.retention_days) == (0, None)
    assert "r10" in _requests(db_path)


def test_create_app_refuses_a_bad_retention_before_it_creates_the_database(tmp_path):
    from refind_cli.errors import RefindError
    from refind_cli.server.app import create_app

    db = tmp_path / "new.db"
    with pytest.raises(RefindError, match="retention"):
        create_app(ServerSettings(db=db, mode="bm25", retention_given="0", warm=False))
    assert not db.exists()
