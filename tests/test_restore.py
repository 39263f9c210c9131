"""`refind restore BACKUP`: a backup put back through SQLite's online backup API, refused when it is not one."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

import httpx
import pytest
from test_server_e2e import AUTH, ServerProcess

from refind_cli.api import Memory
from refind_cli.contract import AddRequest, Message
from refind_cli.store import Store


def _add(store: Store, rid: str, text: str, user: str = "alice", session: str = "s1") -> None:
    store.add(AddRequest(rid, user, session, (Message("user", text, 1_683_554_160_000),)))


def _texts(db: Path, user: str = "alice") -> list[str]:
    with Store(db, retention_days=None) as store:
        return [m.content for m in store.user_messages(user)]


@pytest.fixture
def backed_up(db_path: Path, cli) -> Path:
    """A database of two requests, backed up; then one forgotten and a third added."""
    with Store(db_path, retention_days=None) as store:
        _add(store, "r1", "the heron by the lake")
        _add(store, "r2", "the secret plan for the garden", session="s2")
    backup = db_path.with_name("backup.db")
    assert cli("backup", str(backup)).exit_code == 0
    assert cli("forget", "--user", "alice", "--session", "s2", "--yes").exit_code == 0
    with Store(db_path, retention_days=None) as store:
        _add(store, "r3", "an otter after the backup")
    return backup


def test_restore_puts_the_backup_back_says_what_it_undoes_and_records_an_event(cli, db_path, backed_up):
    result = cli("restore", str(backed_up), "--yes")
    assert result.exit_code == 0, result.output
    assert result.output.startswith(
        f"restored {backed_up} into {db_path} (it held 2 messages, 1 tombstones): 2 requests, 2 messages, "
        "0 tombstones — what the backup held, messages forgotten or expired since it was taken included; undoes "
        "what was done since it was taken: 1 add(s), 1 forget(s)"
    )
    assert _texts(db_path) == ["the heron by the lake", "the secret plan for the garden"]
    with Store(db_path, retention_days=None) as store:
        kind, rows, detail = store.conn.execute(
            "SELECT kind, rows, detail FROM events ORDER BY id DESC LIMIT 1"
        ).fetchone()
        assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert (kind, rows) == ("restore", 2)
    # what it undid is on record: the add and the forget events it drops told of them
    assert json.loads(detail) == {
        "backup": str(backed_up),
        "bytes": backed_up.stat().st_size,
        "requests": 2,
        "undoes": {"add": 1, "forget": 1},
    }
    assert cli("inspect", "--check").exit_code == 0
    events = json.loads(cli("inspect", "events", "--kind", "restore", "--json").output)
    assert [(e["kind"], e["rows"]) for e in events] == [("restore", 2)]
    searched = cli("search", "otter", "--user", "alice", "--mode", "bm25", "--json")
    assert "otter" not in searched.output  # what was stored after the backup is gone
    data = json.loads(cli("restore", str(backed_up), "--yes", "--json").output)
    assert (data["messages"], data["live"]["messages"], data["since_backup"]) == (2, 2, {"restore": 1})


def test_restore_asks_on_a_terminal_and_refuses_elsewhere_without_yes(cli, db_path, backed_up, monkeypatch):
    refused = cli("restore", str(backed_up))
    assert refused.exit_code == 2
    assert refused.output.strip() == (
        f"error: refusing to replace everything in {db_path} with backup {backed_up} without confirmation: pass --yes"
    )
    monkeypatch.setattr("refind_cli.cli.commands.restore.on_terminal", lambda: True)
    declined = cli("restore", str(backed_up), input="n\n")
    assert declined.exit_code == 1
    assert (
        f"Replace everything in {db_path} (2 messages) with backup {backed_up} (2 messages, 2 requests) — it brings "
        "back what the backup held, messages forgotten or expired since included; undoes what was done since it was "
        "taken: 1 add(s), 1 forget(s)? [y/N]"
    ) in declined.output
    assert _texts(db_path) == ["the heron by the lake", "an otter after the backup"]  # nothing changed
    assert cli("restore", str(backed_up), input="y\n").exit_code == 0
    assert _texts(db_path) == ["the heron by the lake", "the secret plan for the garden"]


def test_restore_creates_a_database_where_none_is(cli, tmp_path, backed_up):
    fresh = tmp_path / "new.db"
    result = cli("restore", str(backed_up), "--db", str(fresh), "--yes")
    assert result.exit_code == 0, result.output
    assert _texts(fresh) == ["the heron by the lake", "the secret plan for the garden"]


def _newer(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO _migrations (name, applied_at) VALUES ('m999_future', 0)")
    conn.close()


def test_restore_refuses_what_is_not_a_backup_and_changes_nothing(cli, db_path, backed_up, tmp_path):
    missing = tmp_path / "nope.db"
    empty = tmp_path / "empty.db"
    empty.touch()
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database at all" * 300)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE photos (id INTEGER)")
    conn.close()
    newer = tmp_path / "newer.db"
    newer.write_bytes(backed_up.read_bytes())
    _newer(newer)
    cases = [
        (missing, 4, f"error: no backup at {missing}; give the path of a copy made by `refind backup`"),
        (
            db_path,
            2,
            f"error: backup {db_path} is the database itself (--db {db_path}); give the path of a copy of it",
        ),
        (
            db_path.with_name(db_path.name + "-wal"),
            2,
            f"error: backup {db_path}-wal is the database's -wal file, not a backup; give another path",
        ),
        (tmp_path, 2, f"error: backup {tmp_path} is not a file; give the path of a copy made by `refind backup`"),
        (
            empty,
            4,
            f"error: backup {empty}: the file is empty, not a refind database; nothing was changed (give another path)",
        ),
        (
            garbage,
            10,
            f"error: backup {garbage}: damaged or not a SQLite database (file is not a database); nothing was "
            "changed — restore another backup",
        ),
        (
            other,
            1,
            f"error: backup {other}: not a refind database but another program's (tables photos); nothing was "
            "changed — give the path of a copy made by `refind backup`",
        ),
        (
            newer,
            1,
            f"error: backup {newer}: written by a newer refind (migration m999_future unknown to this version); "
            "upgrade refind to use it — nothing was changed",
        ),
    ]
    with Store(db_path, retention_days=None) as store:  # (a -wal beside it, to be named as such)
        _add(store, "r4", "kept as it is")
        for path, code, message in cases:
            result = cli("restore", str(path), "--yes")
            assert (result.exit_code, " ".join(result.output.split())) == (code, message), path
    assert _texts(db_path) == ["the heron by the lake", "an otter after the backup", "kept as it is"]


def test_restore_refuses_a_damaged_backup(cli, db_path, backed_up):
    data = bytearray(backed_up.read_bytes())
    with sqlite3.connect(backed_up) as conn:
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'messages'").fetchone()[0]
    conn.close()
    page = 4096 * (root - 1)
    data[page : page + 1] = b"\x00"  # the table's root page no longer says what kind of page it is
    backed_up.write_bytes(bytes(data))
    result = cli("restore", str(backed_up), "--yes")
    assert result.exit_code == 10
    assert f"error: backup {backed_up}: " in result.output and "nothing was changed" in " ".join(result.output.split())
    assert _texts(db_path) == ["the heron by the lake", "an otter after the backup"]


def test_an_older_refinds_backup_or_one_of_another_page_size_is_restored_upgraded(cli, db_path, backed_up):
    with sqlite3.connect(backed_up, isolation_level=None) as conn:
        conn.execute("PRAGMA page_size = 8192")
        conn.execute("VACUUM")
        conn.execute("ALTER TABLE tombstones DROP COLUMN said_sessions")
        conn.execute("DELETE FROM _migrations WHERE name = 'm013_said_sessions'")
        assert conn.execute("PRAGMA page_size").fetchone()[0] == 8192
    conn.close()
    result = cli("restore", str(backed_up), "--yes")
    assert result.exit_code == 0, result.output
    assert _texts(db_path) == ["the heron by the lake", "the secret plan for the garden"]
    with Store(db_path, retention_days=None) as store:
        assert store.conn.execute("PRAGMA page_size").fetchone()[0] == 4096
        assert "m013_said_sessions" in {r[0] for r in store.conn.execute("SELECT name FROM _migrations")}
    assert cli("inspect", "--check").exit_code == 0
    assert sorted(p.name for p in db_path.parent.iterdir() if "restoring" in p.name) == []  # its copy removed
    assert sqlite3.connect(backed_up).execute("PRAGMA page_size").fetchone()[0] == 8192  # the backup unchanged


def test_restore_waits_for_another_writer_and_then_fails_as_locked(cli, db_path, backed_up, monkeypatch):
    monkeypatch.setenv("REFIND_BUSY_TIMEOUT", "1")
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        result = cli("restore", str(backed_up), "--yes")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert result.exit_code == 8
    assert f"error: database {db_path}: locked by another process past the busy timeout" in result.output
    assert _texts(db_path) == ["the heron by the lake", "an otter after the backup"]


@pytest.mark.slow
def test_a_restore_under_a_running_server_taking_adds_and_an_open_memory_serves_the_restored_content(
    cli, db_path, backed_up
):
    memory = Memory(db_path, retention_days=None)
    assert [e.content for e in memory.search("otter", user="alice")] != []
    server = ServerProcess(db_path)
    acked: list[tuple[float, float, str]] = []  # (sent, answered, request id) of every 200
    stop = threading.Event()

    def adder() -> None:
        with httpx.Client(base_url=server.url, headers=AUTH, timeout=60) as http:
            i = 0
            while not stop.is_set():
                sent = time.monotonic()
                body = {"request_id": f"live{i}", "user_id": "bob", "session_id": "s1"}
                body["messages"] = [{"role": "user", "content": f"kingfisher number{i}"}]
                if http.post("/v1/memories/add", json=body).status_code == 200:
                    acked.append((sent, time.monotonic(), f"live{i}"))
                http.post("/search", json={"query": "otter", "user_id": "alice", "top_k": 5})
                i += 1

    try:
        with httpx.Client(base_url=server.url, headers=AUTH, timeout=60) as http:
            found = http.post("/search", json={"query": "otter", "user_id": "alice", "top_k": 5}).json()["data"]
            assert found and "otter" in found[0]["content"]  # the server has alice's index in memory
        thread = threading.Thread(target=adder)
        thread.start()
        time.sleep(0.5)
        started = time.monotonic()
        result = cli("restore", str(backed_up), "--yes")
        ended = time.monotonic()
        time.sleep(0.5)
        stop.set()
        thread.join()
        assert result.exit_code == 0, result.output
        with httpx.Client(base_url=server.url, headers=AUTH, timeout=60) as http:
            otter = http.post("/search", json={"query": "otter", "user_id": "alice", "top_k": 5}).json()["data"]
            plan = http.post("/search", json={"query": "secret plan", "user_id": "alice", "top_k": 5}).json()["data"]
            bob = http.post("/search", json={"query": "kingfisher", "user_id": "bob", "top_k": 1000}).json()["data"]
    finally:
        stop.set()
        server.stop()
    assert otter == [] and "secret plan" in plan[0]["content"]
    assert [e.content for e in memory.search("otter", user="alice")] == []
    assert "secret plan" in memory.search("secret plan", user="alice")[0].content
    memory.close()
    stored = {m.request_id for m in Store(db_path, retention_days=None).user_messages("bob")}
    after = {rid for sent, _, rid in acked if sent > ended}
    before = {rid for _, answered, rid in acked if answered < started}
    assert after and before and after <= stored and not before & stored  # the backup had no bob
    assert stored <= {rid for *_, rid in acked}
    assert len(bob) >= 1 and all("kingfisher" in hit["content"] for hit in bob)
    assert cli("inspect", "--check").exit_code == 0


def test_a_damaged_database_is_restored_into_where_sqlite_can_and_refused_where_it_cannot(cli, db_path, backed_up):
    with sqlite3.connect(db_path) as conn:  # (its WAL emptied into the file: the damage below is the file's)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        last = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.close()
    data = bytearray(db_path.read_bytes())
    data[4096 * (last - 1) :] = b"\xff" * 4096  # a page no open reads: inspect --check finds it
    db_path.write_bytes(bytes(data))
    assert cli("inspect", "--check").exit_code == 10
    result = cli("restore", str(backed_up), "--yes")
    assert result.exit_code == 0, result.output
    assert cli("inspect", "--check").exit_code == 0
    assert _texts(db_path) == ["the heron by the lake", "the secret plan for the garden"]
    with open(db_path, "r+b") as fh:
        fh.truncate(8192)  # the schema's pages gone: no open succeeds
    before = db_path.read_bytes()
    result = cli("restore", str(backed_up), "--yes")
    assert result.exit_code == 10
    assert " ".join(result.output.split()) == (
        f"error: database {db_path}: damaged (database disk image is malformed), and SQLite cannot write into it "
        "either; nothing was changed — stop every process using it, move it and its -wal and -shm files aside "
        "(`refind inspect --check --db MOVED` says what is wrong), and run the same command again: it creates the "
        "database from the backup"
    )
    assert db_path.read_bytes() == before
    for name in (db_path, Path(f"{db_path}-wal"), Path(f"{db_path}-shm")):
        name.unlink(missing_ok=True)
    assert cli("restore", str(backed_up), "--yes").exit_code == 0
    assert _texts(db_path) == ["the heron by the lake", "the secret plan for the garden"]


def test_a_backup_changed_while_the_confirmation_is_asked_is_not_restored(cli, db_path, backed_up, monkeypatch):
    monkeypatch.setattr("refind_cli.cli.commands.restore.on_terminal", lambda: True)

    def meanwhile(*args: object, **kwargs: object) -> bool:
        with Store(backed_up, retention_days=None) as other:  # another process writes to it
            _add(other, "r9", "written into the backup meanwhile")
        return True

    monkeypatch.setattr("typer.confirm", meanwhile)
    result = cli("restore", str(backed_up))
    assert result.exit_code == 1
    assert result.output.strip() == (
        f"error: backup {backed_up} changed since it was checked; nothing was changed — run the command again"
    )
    assert _texts(db_path) == ["the heron by the lake", "an otter after the backup"]
    assert cli("restore", str(backed_up), "--yes").exit_code == 0
    assert _texts(db_path)[-1] == "written into the backup meanwhile"


def test_a_signal_seen_after_the_copy_committed_finishes_the_restore_with_its_event(
    cli, db_path, backed_up, monkeypatch
):
    """Ctrl-C or SIGTERM reaches Python only after SQLite's backup step returns; after the step that copied every page
    the restore is committed. It was said to be stopped ('stopped by SIGTERM; the file it was writing was removed',
    exit 143) while the database held the backup's content, with no restore event (a probe of round 28's review: a
    SIGTERM 0.5-0.8 s into a restore of 60,000 messages). Now it is finished as any: event recorded, result said."""
    from refind_cli import restore as restoring
    from refind_cli.signals import Terminated

    def signalled(seconds: float):
        def progress(status: int, remaining: int, total: int) -> None:
            if status == 101:  # SQLITE_DONE: the step copied every page and committed
                raise Terminated

        return progress

    monkeypatch.setattr(restoring, "give_up_after", signalled)
    result = cli("restore", str(backed_up), "--yes")
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"restored {backed_up} into {db_path} (it held 2 messages, 1 tombstones)")
    assert _texts(db_path) == ["the heron by the lake", "the secret plan for the garden"]
    with Store(db_path, retention_days=None) as store:
        assert store.conn.execute("SELECT kind FROM events ORDER BY id DESC LIMIT 1").fetchone()[0] == "restore"
    assert cli("inspect", "--check").exit_code == 0


def test_a_signal_while_the_copy_waits_for_the_lock_changes_nothing(cli, db_path, backed_up, monkeypatch):
    """Stopped before the copy committed (a step refused as busy): nothing changed, stopped as before (exit 143)."""
    from refind_cli import restore as restoring
    from refind_cli.signals import Terminated

    def signalled(seconds: float):
        def progress(status: int, remaining: int, total: int) -> None:
            raise Terminated

        return progress

    monkeypatch.setattr(restoring, "give_up_after", signalled)
    other = sqlite3.connect(db_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another writer holds the lock: the step is busy, nothing copied
    try:
        result = cli("restore", str(backed_up), "--yes")
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert result.exit_code == 143, result.output
    assert _texts(db_path) == ["the heron by the lake", "an otter after the backup"]


def test_a_copy_made_to_restore_that_fails_names_the_database_and_the_backup_not_its_temporary_path(
    cli, db_path, backed_up
):
    """A backup of another page size is copied beside the database first. A write of that copy that failed (here the
    process's file size limit, as a full disk) was said as 'error: database /…/.refind.db.x1y2.restoring: …': a
    database the user never named, removed by then (a probe of round 28's review). Now it names the database, the
    backup and what the copy was."""
    import os
    import re
    import resource
    import subprocess
    import sys

    limit = 2 * 1024 * 1024
    hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
    if hard != resource.RLIM_INFINITY and hard < limit:
        pytest.skip("a lower hard file size limit is in force already")
    big = backed_up.with_name("big-8k.db")
    with Store(big, retention_days=None) as store:
        for i in range(600):
            _add(store, f"b{i}", f"message {i} " + "words of a long message " * 250)
    conn = sqlite3.connect(big, isolation_level=None)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.execute("PRAGMA page_size = 8192")
    conn.execute("VACUUM")
    conn.close()
    assert big.stat().st_size > limit
    env = {k: v for k, v in os.environ.items() if not k.startswith("REFIND_")}
    limited = subprocess.run(
        [sys.executable, "-m", "refind_cli", "restore", str(big), "--db", str(db_path), "--yes"],
        capture_output=True,
        text=True,
        env=env,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard)),
        timeout=300,
    )
    assert limited.returncode == 7, limited.stdout + limited.stderr
    said = re.sub(r"\.restoring \(|\.[a-z0-9_]{8}\.restoring", ".X.restoring", limited.stderr.strip())
    assert said == (
        f"error: database {db_path}: the copy of backup {big} made beside it to restore (.{db_path.name}.X.restoring, "
        f"removed): the file size limit of this process (2,097,152 bytes, `ulimit -f`) was reached (disk I/O error); "
        "nothing of the failed write was stored — raise the limit and retry"
    )
    assert _texts(db_path) == ["the heron by the lake", "an otter after the backup"]
    assert [p.name for p in db_path.parent.iterdir() if "restoring" in p.name] == []


def test_a_restore_that_fails_where_no_database_was_leaves_none(cli, tmp_path, backed_up, monkeypatch):
    """Where no database is at --db, restore creates it from the backup. One that failed (the backup changed while
    the question was asked, a full disk, Ctrl-C) said 'nothing was changed' but left a new empty database there,
    made before the copy (a probe of round 28's review). Now the database is made from the backup beside it and
    linked into place whole: a failure leaves nothing at --db."""
    fresh = tmp_path / "new.db"
    monkeypatch.setattr("refind_cli.cli.commands.restore.on_terminal", lambda: True)

    def meanwhile(*args: object, **kwargs: object) -> bool:
        with Store(backed_up, retention_days=None) as other:  # another process writes to it
            _add(other, "r9", "written into the backup meanwhile")
        return True

    monkeypatch.setattr("typer.confirm", meanwhile)
    result = cli("restore", str(backed_up), "--db", str(fresh))
    assert result.exit_code == 1
    assert result.output.strip() == (
        f"error: backup {backed_up} changed since it was checked; nothing was changed — run the command again"
    )
    assert sorted(p.name for p in tmp_path.iterdir() if "new.db" in p.name) == []
    result = cli("restore", str(backed_up), "--db", str(fresh), "--yes")
    assert result.exit_code == 0, result.output
    assert _texts(fresh) == [
        "the heron by the lake",
        "the secret plan for the garden",
        "written into the backup meanwhile",
    ]
    assert fresh.stat().st_mode & 0o777 == 0o600
    assert cli("inspect", "--check", "--db", str(fresh)).exit_code == 0
    with Store(fresh, retention_days=None) as store:
        assert store.conn.execute("SELECT kind FROM events ORDER BY id DESC LIMIT 1").fetchone()[0] == "restore"
        assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert sorted(p.name for p in tmp_path.iterdir() if "new.db" in p.name) == ["new.db"]


def test_a_restore_through_a_symbolic_link_to_no_file_yet_makes_the_database_where_it_points(cli, tmp_path, backed_up):
    link, target = tmp_path / "link.db", tmp_path / "target.db"
    link.symlink_to(target.name)
    result = cli("restore", str(backed_up), "--db", str(link), "--yes")
    assert result.exit_code == 0, result.output
    assert link.is_symlink()
    assert _texts(target) == ["the heron by the lake", "the secret plan for the garden"]


def test_restoring_a_backup_the_database_no_longer_continues_from_says_its_undoing_is_not_counted(cli, db_path):
    """Event ids are reused after a restore. Backup 1, more adds, backup 2; restore backup 1, add again; restore
    backup 2: the events past backup 2's last were none, so the question and the result said nothing of what it
    undoes, while it dropped the adds made since the first restore (a probe of round 28's review)."""
    with Store(db_path, retention_days=None) as store:
        _add(store, "r1", "the heron by the lake")
    first, second = db_path.with_name("first.db"), db_path.with_name("second.db")
    assert cli("backup", str(first)).exit_code == 0
    with Store(db_path, retention_days=None) as store:
        for i in range(3):
            _add(store, f"r2-{i}", f"after the first backup {i}")
    assert cli("backup", str(second)).exit_code == 0
    assert cli("restore", str(first), "--yes").exit_code == 0
    with Store(db_path, retention_days=None) as store:
        _add(store, "r3", "an otter after the first restore")
    from refind_cli import restore as restoring

    info = restoring.check_backup(db_path, second).as_dict()
    assert (info["since_backup"], info["descends_from_backup"]) == (None, False)
    result = cli("restore", str(second), "--yes")
    assert result.exit_code == 0, result.output
    assert result.output.rstrip().endswith(
        "; the database does not continue from the backup (another backup was restored since it was taken, or it is "
        "over 100,000 writes old): what it undoes is not counted"
    )
    assert "an otter after the first restore" not in _texts(db_path)


KILLED_RESTORE = """
import os, signal, sys
from pathlib import Path
from refind_cli import restore
from refind_cli.store import Store

db, backup, point = sys.argv[1:4]
info = restore.check_backup(Path(db), Path(backup))

def kill(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

if point == "copied":  # SQLite's step copied every page and committed
    restore.give_up_after = lambda seconds: lambda status, remaining, total: kill() if status == 101 else None
else:  # as the restore event is written
    Store.record_event = kill
restore.restore(Path(db), Path(backup), info)
print("finished", flush=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize("point", ["copied", "event"])
def test_a_restore_killed_at_any_point_is_done_with_its_event_or_not_done(cli, db_path, backed_up, point):
    """The restore event was written in a transaction of its own after the copy committed: a kill -9 between the two
    left the backup's content in the database and no event, so `refind inspect` and the write log could not say a
    restore had happened (round 28's review). Now the event is recorded in the copy that is restored: killed at any
    point, the database is restored with its event, or untouched; a rerun restores it."""
    import os
    import subprocess
    import sys

    child = subprocess.run(
        [sys.executable, "-c", KILLED_RESTORE, str(db_path), str(backed_up), point],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("REFIND_")},
        timeout=120,
    )
    assert child.returncode == -9, f"the kill at {point} did not happen: {child.stdout}{child.stderr}"
    assert cli("inspect", "--check").exit_code == 0
    restored = _texts(db_path) == ["the heron by the lake", "the secret plan for the garden"]
    if not restored:
        assert _texts(db_path) == ["the heron by the lake", "an otter after the backup"]
    events = json.loads(cli("inspect", "events", "--kind", "restore", "--json").output)
    assert len(events) == (1 if restored else 0), (point, restored, events)
    assert restored == (point == "copied")
    for leftover in db_path.parent.glob(f".{db_path.name}.*.restoring*"):  # what a kill -9 leaves beside it
        leftover.unlink()
    if not restored:
        assert cli("restore", str(backed_up), "--yes").exit_code == 0
        assert _texts(db_path) == ["the heron by the lake", "the secret plan for the garden"]
        assert len(json.loads(cli("inspect", "events", "--kind", "restore", "--json").output)) == 1
