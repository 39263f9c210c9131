"""`refind backup` names its checked copy with a hard link, which never overwrites: a file made at PATH after the
command's check (a race) is kept, and the backup refused; where hard links are not supported, a rename."""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from helpers import add_request, sound

from refind_cli import health
from refind_cli.store import Store


def _db(path: Path) -> None:
    with Store(path, retention_days=None) as store:
        add_request(store, "r1", "alice", "s1", "a message worth keeping")


def test_a_file_made_at_path_after_the_check_is_not_overwritten(cli, db_path, tmp_path, monkeypatch) -> None:
    _db(db_path)
    target = tmp_path / "copy.db"
    opened = health._open

    def open_then_race(path: Path) -> sqlite3.Connection:  # another program writes PATH while the copy is made
        target.write_text("the user's own file")
        return opened(path)

    monkeypatch.setattr(health, "_open", open_then_race)
    result = cli("backup", str(target))
    assert result.exit_code == 1
    assert f"{target} already exists; give a new path (a backup never overwrites)" in " ".join(result.output.split())
    assert target.read_text() == "the user's own file"
    assert not list(tmp_path.glob(".*.partial"))


def test_without_hard_links_the_copy_is_renamed_into_place(cli, db_path, tmp_path, monkeypatch) -> None:
    _db(db_path)

    def no_links(src: object, dst: object) -> None:
        raise OSError(errno.EPERM, os.strerror(errno.EPERM))

    monkeypatch.setattr(health.os, "link", no_links)
    target = tmp_path / "copy.db"
    result = cli("backup", str(target))
    assert result.exit_code == 0, result.output
    assert sound(target) == 1
    assert not list(tmp_path.glob(".*.partial"))


def test_a_backup_of_a_locked_database_gives_up_after_the_busy_timeout(cli, db_path, tmp_path, monkeypatch) -> None:
    # a probe of round 17: Python's backup loop retried a busy step without end (REFIND_BUSY_TIMEOUT ignored), and a
    # backup killed meanwhile left its .partial file
    _db(db_path)
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")  # another process's write: nobody else may even read
    holder.execute("CREATE TABLE IF NOT EXISTS held (x)")
    monkeypatch.setenv("REFIND_BUSY_TIMEOUT", "0.3")
    target = tmp_path / "copy.db"
    try:  # a process of its own: the old code's wait would have held the test run forever
        result = subprocess.run(
            [sys.executable, "-m", "refind_cli", "backup", str(target), "--db", str(db_path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert result.returncode == 8, result.stderr
    assert "locked by another process past the busy timeout" in " ".join(result.stderr.split())
    assert not target.exists() and not list(tmp_path.glob(".copy.db.*"))


def test_a_copy_that_finds_no_space_names_its_own_path_and_leaves_nothing(cli, db_path, tmp_path, monkeypatch) -> None:
    # the database is only read: "no space" is the copy's folder's, and the copy's journal goes with it
    _db(db_path)
    connect = health.sqlite3.connect

    class Full(sqlite3.Connection):
        def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
            if sql.startswith("PRAGMA journal_mode"):
                Path(f"{self.execute('PRAGMA database_list').fetchone()[2]}-journal").write_text("half a journal")
                raise sqlite3.OperationalError("database or disk is full")
            return super().execute(sql, *args)

    monkeypatch.setattr(health.sqlite3, "connect", lambda name, **kw: connect(name, factory=Full, **kw))
    target = tmp_path / "copy.db"
    result = cli("backup", str(target))
    assert result.exit_code == 7, result.output
    assert f"database {target}: no space left" in " ".join(result.output.split())
    assert not target.exists() and not list(tmp_path.glob(".copy.db.*"))


def test_a_backup_of_what_is_no_refind_database_says_so(cli, db_path, tmp_path) -> None:
    # it said "no such table: requests" (a probe of round 17)
    db_path.write_bytes(b"")
    result = cli("backup", str(tmp_path / "copy.db"))
    assert result.exit_code == 4 and "the file is empty, not a refind database" in " ".join(result.output.split())
    db_path.unlink()
    with sqlite3.connect(db_path) as conn:
        conn.execute("CREATE TABLE t (x)")
    result = cli("backup", str(tmp_path / "copy.db"))
    assert result.exit_code == 1 and "not a refind database but another program's" in " ".join(result.output.split())
    assert not list(tmp_path.glob("*copy.db*"))
