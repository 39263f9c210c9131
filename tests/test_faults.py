"""Faults caused for real, not simulated: a full disk (a size-limited tmpfs), a read-only file system (the same
tmpfs remounted read-only: tests run as root, and root ignores chmod), another process holding the write lock, a
truncated or overwritten file, a WAL deleted under a running server.

Each asserts what the user sees (one line, the exact message, the exit code or HTTP status, no traceback), that
what was stored is intact (``PRAGMA integrity_check``, no partial request, counts) and that a rerun completes the
work once the fault is gone. Mounting needs root with CAP_SYS_ADMIN; where that is missing those tests skip and say
so. ``kill -9`` in every phase of forget and expire is in ``test_faults_kill.py``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import sound

from refind_cli import migrations
from refind_cli.contract import parse_add
from refind_cli.store import Store

pytestmark = pytest.mark.slow  # subprocesses, real servers or fuzzing: `make test-fast` skips them


class SmallDisk:
    """A tmpfs of a given size mounted for one test: fill it, grow it, make it read-only."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def remount(self, options: str) -> None:
        subprocess.run(["mount", "-o", f"remount,{options}", str(self.path)], check=True, capture_output=True)

    def fill(self) -> Path:
        """Take every free byte with a filler file; returns it (delete it to give the space back)."""
        filler = self.path / "filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError:
            pass
        finally:
            os.close(fd)
        return filler


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=2m", "refind-test", str(mount_point)], capture_output=True, text=True
        )
    except FileNotFoundError:
        pytest.skip("no mount command: a size-limited file system cannot be made here")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs (needs root with CAP_SYS_ADMIN): {done.stderr.strip()}")
    try:
        yield SmallDisk(mount_point)
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def request(i: int, size: int = 2000, user: str = "alice") -> dict:
    text = f"Caroline said number {i}: " + ("hiking in the mountains " * (size // 24 + 1))[:size]
    return {
        "request_id": f"r{i}",
        "user_id": user,
        "session_id": f"s{i // 10}",
        "messages": [{"role": "user", "content": text, "timestamp": 1_683_554_160_000 + i}],
    }


def write_file(path: Path, n: int, size: int = 2000, user: str = "alice") -> Path:
    path.write_text("".join(json.dumps(request(i, size, user)) + "\n" for i in range(n)), encoding="utf-8")
    return path


def error_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, output
    assert "Traceback" not in output
    return lines[0]


NO_SPACE = "no space left (database or disk is full); nothing of the failed write was stored — free space and retry"


# ---- disk full -----------------------------------------------------------------------------------------------------


def test_replay_on_a_full_disk_says_what_it_stored_and_a_rerun_completes(cli, small_disk, tmp_path):
    db = small_disk.path / "refind.db"
    src = write_file(tmp_path / "big.jsonl", 6000, size=500)  # about 3.6 MB of text: more than the 2 MiB disk
    result = cli("add", "--file", str(src), "--db", str(db), "--retention-days", "off")
    assert result.exit_code == 7
    stored = sound(db)
    assert 0 < stored < 6000
    assert error_line(result.output) == (
        f"error: database {db}: {NO_SPACE}; stored {stored:,} of 6,000 requests; "
        "the rest can be replayed with the same command"
    )
    small_disk.remount("size=16m")  # space is back
    again = cli("add", "--file", str(src), "--db", str(db), "--retention-days", "off", "--json")
    assert again.exit_code == 0, again.output
    summary = json.loads(again.output)
    assert (summary["requests_added"], summary["duplicates"], summary["error"]) == (6000 - stored, stored, None)
    assert sound(db) == 6000


def test_a_file_size_limit_is_a_full_disk_and_a_rerun_once_it_is_raised_completes(tmp_path):
    """A process's file size limit (`ulimit -f`, a service's LimitFSIZE) fails SQLite's write with EFBIG, which it
    reports as a plain I/O error: "the disk failed a read or write" (503 from the server) — a probe of round 28. It
    is a limit like a full disk: exit 7 (507), naming the limit and what to do. Needs no mount: runs everywhere."""
    import resource

    db = tmp_path / "refind.db"
    src = write_file(tmp_path / "big.jsonl", 6000, size=500)  # about 3.6 MB of text: past the 2 MiB limit
    limit = 2 * 1024 * 1024
    hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
    if hard != resource.RLIM_INFINITY and hard < limit:
        pytest.skip("a lower hard file size limit is in force already")
    env = {k: v for k, v in os.environ.items() if not k.startswith("REFIND_")}
    command = [
        sys.executable,
        "-m",
        "refind_cli",
        "add",
        "--file",
        str(src),
        "--db",
        str(db),
        "--retention-days",
        "off",
    ]
    limited = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env=env,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard)),
        timeout=300,
    )
    assert limited.returncode == 7, limited.stdout + limited.stderr
    stored = sound(db)
    assert 0 < stored < 6000
    assert error_line(limited.stdout + limited.stderr) == (
        f"error: database {db}: the file size limit of this process (2,097,152 bytes, `ulimit -f`) was reached (disk "
        "I/O error); nothing of the failed write was stored — raise the limit and retry; "
        f"stored {stored:,} of 6,000 requests; the rest can be replayed with the same command"
    )
    again = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert sound(db) == 6000


def test_json_summary_of_a_stopped_replay_carries_the_error(cli, small_disk, tmp_path):
    db = small_disk.path / "refind.db"
    src = write_file(tmp_path / "big.jsonl", 6000, size=500)
    result = cli("add", "--file", str(src), "--db", str(db), "--retention-days", "off", "--json")
    assert result.exit_code == 7
    summary = json.loads(result.output[: result.output.rindex("}") + 1])
    assert summary["error"]["type"] == "no_space"
    assert summary["requests_added"] == sound(db)


def test_one_add_on_a_full_disk_is_one_line_and_stores_nothing(cli, small_disk):
    db = small_disk.path / "refind.db"
    args = ("--user", "alice", "--session", "s1", "--db", str(db), "--retention-days", "off")
    assert cli("add", "Caroline: first", *args).exit_code == 0
    filler = small_disk.fill()
    big = "Caroline: " + "a long story about the mountains " * 8000  # ~256 KB: needs new pages
    result = cli("add", big, *args)
    assert result.exit_code == 7
    # Even opening needs space here (SQLite creates the -shm file, and reports the full disk as an I/O error).
    assert error_line(result.output) in (
        f"error: database {db}: {NO_SPACE}",
        f"error: cannot open database {db}: {NO_SPACE.replace('database or disk is full', 'disk I/O error')}",
    )
    filler.unlink()  # (even a check needs space to open the database: only now)
    assert sound(db) == 1
    assert cli("add", big, *args).exit_code == 0
    assert sound(db) == 2


def test_server_answers_507_keeps_searching_and_recovers_by_itself(make_client, small_disk):
    db = small_disk.path / "refind.db"
    client = make_client(db=db)
    assert client.post("/v1/memories/add", json=request(1)).status_code == 200
    filler = small_disk.fill()
    full = client.post("/v1/memories/add", json=request(2, size=300_000))
    assert full.status_code == 507
    assert full.json() == {"error": {"type": "no_space", "message": f"database {db}: {NO_SPACE}"}}
    found = client.post("/v1/memories/search", json={"query": "hiking mountains", "user_id": "alice", "top_k": 5})
    assert found.status_code == 200 and len(found.json()["data"]) == 1
    filler.unlink()  # space is back: no restart needed
    assert client.post("/v1/memories/add", json=request(2, size=300_000)).status_code == 200
    assert sound(db) == 2


# ---- read-only -----------------------------------------------------------------------------------------------------


def test_read_only_file_system_is_named_with_exit_9(cli, small_disk):
    db = small_disk.path / "refind.db"
    args = ("--user", "alice", "--session", "s1", "--db", str(db), "--retention-days", "off")
    assert cli("add", "Caroline: first", *args).exit_code == 0
    small_disk.remount("ro")
    result = cli("add", "Caroline: second", *args)
    assert result.exit_code == 9
    assert error_line(result.output) == (
        f"error: cannot open database {db}: cannot be written (unable to open database file); the file, its "
        "folder (SQLite creates the -wal and -shm files beside it) or the file system is read-only"
    )
    small_disk.remount("rw")
    assert cli("add", "Caroline: second", *args).exit_code == 0
    assert sound(db) == 2


def test_server_on_a_read_only_file_system_refuses_to_start_with_one_line(small_disk):
    """A mount cannot turn read-only under open files (EBUSY), so the server meets it at startup: one clear error."""
    from refind_cli.errors import ReadOnlyDatabase
    from refind_cli.server import ServerSettings, create_app

    db = small_disk.path / "refind.db"
    Store(db, retention_days=None).close()
    small_disk.remount("ro")
    try:
        with pytest.raises(ReadOnlyDatabase) as info:
            create_app(ServerSettings(db=db, retention_days=None, mode="bm25", expire_interval_s=0))
        assert info.value.status == 503 and "read-only" in info.value.message
    finally:
        small_disk.remount("rw")


READ_ONLY = "the file, its folder (SQLite creates the -wal and -shm files beside it) or the file system is read-only"


def leave_wal(db: Path) -> None:
    """A -wal file beside the database, as a writer that died leaves it (its process exits without closing)."""
    code = "import os, sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('SELECT 1 FROM requests'); os._exit(0)"
    subprocess.run([sys.executable, "-c", code, str(db)], check=True)
    assert Path(f"{db}-wal").exists()


def test_a_write_refused_on_a_read_only_file_system_says_the_message_opening_says(cli, make_client, small_disk):
    """Opening and writing meet a read-only file system with one message (README's table), in the CLI and the
    server: with a -wal file beside it the file opens (to read), and the write is refused."""
    db = small_disk.path / "refind.db"
    with Store(db, retention_days=None) as store:
        store.add(parse_add(request(1, size=200)))
    leave_wal(db)
    small_disk.remount("ro")
    try:
        result = cli("add", "Caroline: second", "--user", "alice", "--session", "s1", "--db", str(db))
        assert result.exit_code == 9
        written = f"database {db}: cannot be written (attempt to write a readonly database); {READ_ONLY}"
        assert error_line(result.output) == f"error: {written}"
        client = make_client(db=db)
        refused = client.post("/v1/memories/add", json=request(2, size=200))
        assert refused.status_code == 503
        assert refused.json() == {"error": {"type": "read_only", "message": written}}
    finally:
        small_disk.remount("rw")


def test_server_reading_a_read_only_file_system_logs_its_sweep_fault_by_kind(small_disk):
    """With a -wal file beside it (a writer that died), a database on a read-only file system can be read: the
    server starts and searches, and its retention sweep, which cannot write, is logged as the fault it is
    (`read_only`), as a request's storage fault is, not as an OperationalError at a line of code."""
    db = small_disk.path / "refind.db"
    with Store(db, retention_days=None) as store:
        store.add(parse_add(request(1, size=200)))
    leave_wal(db)
    small_disk.remount("ro")
    env = {k: v for k, v in os.environ.items() if not k.startswith("REFIND_")}
    server = subprocess.Popen(
        [sys.executable, "-m", "refind_cli", "serve", "--port", "0", "--db", str(db), "--mode", "bm25"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    import threading

    stop = threading.Timer(60, server.kill)  # a server that never logs the sweep ends the read below
    stop.start()
    try:
        assert server.stderr is not None
        lines: list[str] = []
        for line in server.stderr:  # the sweep runs once at startup, in its own thread: it may fail before or after
            lines.append(line)  # uvicorn says the startup is complete (its first write fails at once since m009)
            said = "".join(lines)
            if ("retention sweep failed" in said and "Application startup complete" in said) or len(lines) > 50:
                break
        said = "".join(lines)
        assert "Application startup complete" in said, said
        assert "retention sweep failed: storage fault: read_only\n" in said, said
        assert "OperationalError" not in said
    finally:
        stop.cancel()
        server.terminate()
        server.wait(30)
        small_disk.remount("rw")


# ---- locked by another process ---------------------------------------------------------------------------------


@pytest.fixture
def lock_holder(db_path: Path) -> Iterator[subprocess.Popen]:
    """A second process holding the database's write lock until its stdin closes."""
    with Store(db_path, retention_days=None):
        pass  # the schema exists before the lock is taken
    code = (
        "import sqlite3, sys\n"
        "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "conn.execute('BEGIN IMMEDIATE')\n"
        "print('locked', flush=True)\n"
        "sys.stdin.read()\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(db_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield holder
    finally:
        if holder.stdin and not holder.stdin.closed:
            holder.stdin.close()
        holder.wait(10)


def release(holder: subprocess.Popen) -> None:
    assert holder.stdin is not None
    holder.stdin.close()
    holder.wait(10)


LOCKED = (
    "locked by another process past the busy timeout (database is locked); nothing was written — retry once the "
    "other writer is done (REFIND_BUSY_TIMEOUT waits longer)"
)


def test_locked_database_is_exit_8_for_add_and_replay(cli, db_path, lock_holder, tmp_path, monkeypatch):
    monkeypatch.setenv("REFIND_BUSY_TIMEOUT", "0.2")
    one = cli("add", "Caroline: hi", "--user", "alice", "--session", "s1", "--retention-days", "off")
    assert one.exit_code == 8
    assert error_line(one.output) == f"error: database {db_path}: {LOCKED}"
    src = write_file(tmp_path / "few.jsonl", 30)
    replay = cli("add", "--file", str(src), "--retention-days", "off")
    assert replay.exit_code == 8
    assert error_line(replay.output) == (
        f"error: database {db_path}: {LOCKED}; stored 0 of 30 requests; the rest can be replayed with the same command"
    )
    release(lock_holder)
    assert cli("add", "--file", str(src), "--retention-days", "off").exit_code == 0
    assert sound(db_path) == 30


def test_a_storage_fault_under_a_replay_from_stdin_names_the_lines_to_give_again(
    cli, db_path, lock_holder, tmp_path, monkeypatch
):
    """stdin cannot be read again: "the rest can be replayed with the same command" sent a user back to a command
    that reads a new, empty stdin — or, for `producer | refind add --file -`, the producer's next lines (a probe of
    round 28). The line says what a Ctrl-C there says: which lines to give again."""
    monkeypatch.setenv("REFIND_BUSY_TIMEOUT", "0.2")
    src = write_file(tmp_path / "few.jsonl", 30)
    replay = cli("add", "--file", "-", "--retention-days", "off", input=src.read_text(encoding="utf-8"))
    assert replay.exit_code == 8
    assert error_line(replay.output) == (
        f"error: database {db_path}: {LOCKED}; stored 0 of 30 requests; <stdin> cannot be read again, and its lines "
        "were not stored: give refind add those lines again (or the whole input: what is stored is skipped)"
    )
    release(lock_holder)
    assert cli("add", "--file", "-", "--retention-days", "off", input=src.read_text(encoding="utf-8")).exit_code == 0
    assert sound(db_path) == 30


def test_locked_database_is_503_and_searches_go_on(make_client, db_path, monkeypatch, lock_holder):
    monkeypatch.setenv("REFIND_BUSY_TIMEOUT", "0.2")
    release(lock_holder)
    client = make_client()
    assert client.post("/v1/memories/add", json=request(1)).status_code == 200
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys\nc = sqlite3.connect(sys.argv[1], isolation_level=None)\nc.execute('BEGIN IMMEDIATE')\n"
            "print('locked', flush=True)\nsys.stdin.read()\n",
            str(db_path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        refused = client.post("/v1/memories/add", json=request(2))
        assert refused.status_code == 503
        assert refused.json() == {"error": {"type": "locked", "message": f"database {db_path}: {LOCKED}"}}
        found = client.post("/v1/memories/search", json={"query": "hiking", "user_id": "alice", "top_k": 5})
        assert found.status_code == 200 and len(found.json()["data"]) == 1
    finally:
        release(holder)
    assert client.post("/v1/memories/add", json=request(2)).status_code == 200
    assert sound(db_path) == 2


# ---- damaged files -------------------------------------------------------------------------------------------------


def filled_db(db: Path, n: int = 200) -> None:
    with Store(db, retention_days=None) as store:
        for i in range(n):
            store.add(parse_add(request(i, size=400)))
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def test_a_file_that_is_not_a_database_is_exit_10_everywhere(cli, db_path):
    db_path.write_bytes(b"these are not the bytes of a database\n" * 200)
    damaged = (
        f"error: cannot open database {db_path}: damaged or not a SQLite database (file is not a database); "
        "restore a copy made by `refind backup` (`refind inspect --check` reports what is wrong)"
    )
    for args in (
        ("search", "hiking", "--user", "alice", "--mode", "bm25"),
        ("add", "Caroline: hi", "--user", "alice", "--session", "s1"),
        ("inspect",),
    ):
        result = cli(*args)
        assert result.exit_code == 10, args
        assert error_line(result.output) == damaged
    check = cli("inspect", "--check", "--json")
    assert check.exit_code == 10
    assert json.loads(check.output) == {
        "db": str(db_path),
        "ok": False,
        "integrity": ["file is not a database"],
        "derived": [],
        "notes": [],
    }


def test_a_truncated_database_is_reported_not_a_traceback(cli, db_path):
    filled_db(db_path)
    size = db_path.stat().st_size
    with open(db_path, "r+b") as fh:
        fh.truncate(size // 2)
    check = cli("inspect", "--check", "--json")
    assert check.exit_code == 10
    report = json.loads(check.output)
    assert report["ok"] is False and report["integrity"] != ["ok"]
    result = cli("search", "hiking", "--user", "alice", "--mode", "bm25")
    assert result.exit_code in (0, 10)  # a read may miss the lost pages; when it meets them: one line, exit 10
    if result.exit_code == 10:
        assert "damaged or not a SQLite database" in error_line(result.output)
    assert "Traceback" not in result.output


def test_check_of_a_sound_database_and_of_derived_data_that_disagrees(cli, db_path):
    filled_db(db_path, 5)
    ok = cli("inspect", "--check", "--json")
    assert ok.exit_code == 0
    assert json.loads(ok.output) == {"db": str(db_path), "ok": True, "integrity": ["ok"], "derived": [], "notes": []}
    conn = sqlite3.connect(db_path)
    with conn:  # damage the data the way a bug would: messages deleted behind the store's back (request row, index)
        migrations.grant(conn)  # (past m009's triggers, as refind's own writes are)
        conn.execute("DELETE FROM messages WHERE request_id = 'r3'")
        migrations.revoke(conn)
    conn.close()
    bad = cli("inspect", "--check", "--json")
    assert bad.exit_code == 10
    derived = json.loads(bad.output)["derived"]
    assert derived[0] == "request 'r3' of user 'alice': 1 message(s) recorded, 0 stored"
    assert len(derived) == 2 and re.fullmatch(
        r"segment \d+: message seq \d+ is not a stored message of user 'alice'", derived[1]
    )


def test_check_while_a_writer_commits_reads_one_commit_and_reports_no_damage(cli, db_path, monkeypatch):
    from refind_cli import health

    filled_db(db_path, 5)
    opened = health._open

    class Racing:
        """The check's connection; a writer (refind serve) commits an Add just before the check reads the index."""

        def __init__(self, conn: sqlite3.Connection) -> None:
            self.conn, self.wrote = conn, False

        def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
            if not self.wrote and "FROM index_segments ORDER BY id" in sql:
                self.wrote = True
                with Store(db_path, retention_days=None) as writer:
                    writer.add(parse_add(request(99)))
            return self.conn.execute(sql, *args)

        def __getattr__(self, name: str) -> object:
            return getattr(self.conn, name)

    monkeypatch.setattr(health, "_open", lambda path: Racing(opened(path)))
    result = cli("inspect", "--check", "--json")
    assert result.exit_code == 0, result.output  # it said "message seq N is not a stored message" (exit 10)
    assert json.loads(result.output)["derived"] == []


# ---- backup --------------------------------------------------------------------------------------------------------


def test_backup_while_another_process_writes_is_a_sound_copy(cli, db_path, tmp_path):
    filled_db(db_path, 50)
    src = write_file(tmp_path / "more.jsonl", 3000, size=300, user="bob")
    env = {**os.environ, "REFIND_DB": str(db_path), "REFIND_RETENTION_DAYS": "off"}
    writer = subprocess.Popen(
        [sys.executable, "-m", "refind_cli", "add", "--file", str(src), "--quiet"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    copies = []
    try:
        for i in range(5):
            target = tmp_path / f"copy{i}.db"
            result = cli("backup", str(target))
            assert result.exit_code == 0, result.output
            copies.append(target)
    finally:
        assert writer.wait(120) == 0, writer.stderr.read() if writer.stderr else ""
    counts = [sound(copy) for copy in copies]  # each copy: integrity ok, every request whole
    assert counts == sorted(counts) and counts[0] >= 50 and counts[-1] <= 3050
    assert not list(tmp_path.glob("*.partial"))
    assert cli("backup", str(copies[0])).exit_code == 1  # never overwrites


def test_backup_writes_only_a_new_private_file_and_never_where_sqlite_looks(cli, tmp_path):
    db = tmp_path / "mem.partial"  # the old code wrote the copy to PATH.partial: here, the database itself
    filled_db(db, 3)
    notes = tmp_path / "copy.db.partial"  # … and here, a file of the user's, replaced and then deleted
    notes.write_text("my notes")
    old_umask = os.umask(0o022)
    try:
        for target in (tmp_path / "mem", tmp_path / "copy.db"):
            result = cli("backup", str(target), "--db", str(db))
            assert result.exit_code == 0, result.output
            assert sound(target) == 3
            assert target.stat().st_mode & 0o777 == 0o600  # everyone's memory, private as the database is
    finally:
        os.umask(old_umask)
    assert sound(db) == 3 and notes.read_text() == "my notes"
    assert not list(tmp_path.glob(".*.partial"))
    for suffix in ("-wal", "-shm", "-journal"):  # SQLite would replay, truncate or delete the copy on the next open
        result = cli("backup", f"{db}{suffix}", "--db", str(db))
        assert result.exit_code == 1
        assert f"error: {db}{suffix} is the name of the database's {suffix} file; give another path" in " ".join(
            result.output.split()
        )


# ---- a WAL deleted under a running server -------------------------------------------------------------------------


def test_wal_deleted_under_a_running_server_loses_nothing_acknowledged(make_client, db_path, tmp_path):
    client = make_client()
    for i in range(5):
        assert client.post("/v1/memories/add", json=request(i)).status_code == 200
    assert (
        client.post("/v1/memories/search", json={"query": "hiking", "user_id": "alice", "top_k": 3}).status_code == 200
    )
    wal = Path(f"{db_path}-wal")
    assert wal.exists() and wal.stat().st_size > 0  # the acknowledged Adds are (partly) only in the WAL
    wal.unlink()
    for i in range(5, 10):
        added = client.post("/v1/memories/add", json=request(i))
        assert added.status_code == 200, added.text
    for _ in range(3):
        found = client.post("/v1/memories/search", json={"query": "hiking", "user_id": "alice", "top_k": 100})
        assert found.status_code == 200, found.text
    assert len(found.json()["data"]) == 10
    # As a kill -9 now would leave it: copy the files while the server still runs, and open the copy.
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{db_path}{suffix}").exists():
            shutil.copy(f"{db_path}{suffix}", snapshot / f"refind.db{suffix}")
    assert sound(snapshot / "refind.db") == 10


def test_writes_that_change_nothing_succeed_on_a_read_only_file_system(cli, make_client, small_disk, tmp_path):
    """A replay of a stored log (CLI and HTTP) and a forget of nothing write nothing (Store.write rolls a no-op back,
    its grant refused at once): answered as on any disk — before, each was refused read-only (exit 9, 503) on its
    write-log row; a new request still is."""
    db = small_disk.path / "refind.db"
    log = write_file(tmp_path / "log.jsonl", 2, size=200)
    assert cli("add", "--file", str(log), "--db", str(db)).exit_code == 0
    leave_wal(db)
    small_disk.remount("ro")
    try:
        again = cli("add", "--file", str(log), "--db", str(db))
        assert again.exit_code == 0, again.output
        assert re.search(r"identical replays skipped\s*│\s*2\b", again.output), again.output
        nothing = cli("forget", "--user", "alice", "--session", "never", "--yes", "--db", str(db))
        assert nothing.exit_code == 4
        assert error_line(nothing.output) == "error: nothing stored for session 'never' of user 'alice'"
        client = make_client(db=db)
        assert client.post("/v1/memories/add", json=request(1, size=200)).status_code == 200
        assert client.post("/v1/memories/add", json=request(5, size=200)).status_code == 503
    finally:
        small_disk.remount("rw")
    assert sound(db) == 2


def test_a_replay_and_an_expire_with_nothing_due_succeed_on_a_full_disk(cli, small_disk, tmp_path):
    db = small_disk.path / "refind.db"
    log = write_file(tmp_path / "log.jsonl", 2, size=200)
    assert cli("add", "--file", str(log), "--db", str(db), "--retention-days", "30").exit_code == 0
    leave_wal(db)
    filler = small_disk.fill()
    again = cli("add", "--file", str(log), "--db", str(db))
    assert again.exit_code == 0, again.output
    assert re.search(r"identical replays skipped\s*│\s*2\b", again.output), again.output
    expired = cli("expire", "--db", str(db))
    assert expired.exit_code == 0, expired.output
    assert "nothing to expire" in expired.output
    assert cli("add", "--file", str(write_file(tmp_path / "more.jsonl", 5, size=200)), "--db", str(db)).exit_code != 0
    filler.unlink()
    assert sound(db) == 2
