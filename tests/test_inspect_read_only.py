"""`refind inspect` never creates, migrates or writes a database: a missing path, a zero-byte file, another
program's SQLite file or a file that is no database is refused with one error line, and left byte for byte as it
was (no -wal or -shm beside it either). Writers (add, mcp, Memory) refuse another program's database too."""

from __future__ import annotations

import sqlite3
import subprocess

import pytest
from helpers import T0, add

from refind_cli import Memory, RefindError
from refind_cli.store import Store

SUBCOMMANDS = [
    [],
    ["--check"],
    ["users"],
    ["user", "alice"],
    ["session", "alice", "s1"],
    ["turn", "x"],
    ["events"],
    ["tombstones"],
    ["searches"],
    ["search", "x"],
]
EMPTY = "the file is empty, not a refind database; nothing was changed (refind add creates one)"
FOREIGN = (
    "not a refind database but another program's (tables notes); nothing was changed — give --db the path of a "
    "refind database, or of a new file"
)


def _folder(path):
    """Every file beside ``path`` (its own included) with its bytes and mode."""
    return {p.name: (p.read_bytes(), p.stat().st_mode) for p in path.parent.iterdir()}


def _foreign(path):
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.execute("INSERT INTO notes VALUES ('not refind''s')")
    conn.commit()
    conn.close()


def _said(result) -> str:
    return " ".join(result.output.split())


@pytest.mark.parametrize("sub", SUBCOMMANDS, ids=lambda s: " ".join(s) or "overview")
def test_inspect_refuses_what_is_not_a_refind_database_and_changes_nothing(cli, tmp_path, sub):
    missing = tmp_path / "missing" / "typo.db"
    missing.parent.mkdir()
    r = cli("inspect", *sub, "--db", str(missing))
    assert r.exit_code == 4 and f"no database at {missing}" in _said(r)
    assert list(missing.parent.iterdir()) == []

    empty = tmp_path / "empty" / "zero.db"
    empty.parent.mkdir()
    empty.touch(mode=0o644)
    before = _folder(empty)
    r = cli("inspect", *sub, "--db", str(empty))

    def where(path):
        return f"database {path}" if sub == ["--check"] else f"cannot open database {path}"

    assert r.exit_code == 4, _said(r)  # was 0: ~110 KB of refind's schema written into it, mode 0644 kept
    assert _said(r) == f"error: {where(empty)}: {EMPTY}"
    assert _folder(empty) == before

    other = tmp_path / "other" / "notes.db"
    other.parent.mkdir()
    _foreign(other)
    before = _folder(other)
    r = cli("inspect", *sub, "--db", str(other))
    assert r.exit_code == 1, _said(r)  # was 0: refind's tables added to it, and the file turned to WAL
    assert _said(r) == f"error: {where(other)}: {FOREIGN}"
    assert _folder(other) == before

    text = tmp_path / "text" / "notes.db"
    text.parent.mkdir()
    text.write_text("hello, not a database\n" * 100)
    before = _folder(text)
    r = cli("inspect", *sub, "--db", str(text))
    assert r.exit_code == 10 and "not a database" in _said(r)
    assert _folder(text) == before


def test_inspect_of_a_refind_database_changes_no_byte_of_it(cli, db_path):
    with Store(db_path, retention_days=None) as store:
        add(store, "alice", "s1", ("user", "Caroline: I went hiking", T0))
    before = _folder(db_path)
    assert sorted(before) == [db_path.name]  # the writer's close removed its -wal and -shm
    turn = None
    for sub in SUBCOMMANDS:
        r = cli("inspect", *sub, "--db", str(db_path))
        assert r.exit_code in (0, 4), (sub, _said(r))  # 4: no turn or search "x"
        turn = turn or ("Caroline" in r.output)
    assert turn
    assert _folder(db_path) == before


@pytest.mark.parametrize("name", ["odd ?#%41 name.db", "b\udcffd.db"], ids=["uri-characters", "not-utf8"])
def test_inspect_reads_a_database_whatever_its_name(tmp_path, name):
    # inspect opens the file by a URI (mode=rw/ro): its name is quoted there byte for byte, so what a writer opened
    # is read ('\udcff': the byte 0xFF of a name that is not UTF-8; quoting the str raised UnicodeEncodeError)
    path = tmp_path / name
    with Store(path, retention_days=None) as store:
        add(store, "alice", "s1", ("user", "Caroline: I went hiking", T0))
    before = _folder(path)
    with Store(path, read_only=True) as store:
        assert store.conn.execute("SELECT content FROM messages").fetchall() == [("Caroline: I went hiking",)]
    assert _folder(path) == before


@pytest.fixture
def read_only_mount(tmp_path):
    """A folder and a callable that remounts it read-only: a tmpfs of its own (mounting needs root; skipped
    elsewhere — a folder without write permission is no read-only file system to root)."""
    folder = tmp_path / "media"
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(folder)], capture_output=True, check=False).returncode:
        pytest.skip("mounting a file system needs root")
    try:
        yield folder, lambda: subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=False)  # (a failed test may still hold a file there)


def _backup_on_read_only_media(read_only_mount):
    """A database of one message on a file system remounted read-only, and its folder's bytes as they are."""
    folder, remount_read_only = read_only_mount
    path = folder / "backup.db"
    with Store(path, retention_days=None) as store:
        add(store, "alice", "s1", ("user", "Caroline: I went hiking", T0))
    remount_read_only()
    return path, _folder(path)


def test_inspect_reads_a_database_on_a_read_only_file_system(cli, read_only_mount):
    # a backup on read-only media: SQLite opens a WAL database read-only only through its -shm file, which nothing
    # can make there (exit 9, 'cannot be written', from every subcommand and --check): read as immutable instead
    path, before = _backup_on_read_only_media(read_only_mount)
    for sub in SUBCOMMANDS:
        r = cli("inspect", *sub, "--db", str(path))
        assert r.exit_code in (0, 4), (sub, _said(r))  # 4: no turn or search "x"
    assert "Caroline" in cli("inspect", "session", "alice", "s1", "--db", str(path)).output
    assert _folder(path) == before


def test_inspect_of_an_older_refinds_database_does_not_upgrade_it(cli, db_path):
    from refind_cli.migrations import MIGRATIONS

    NOW = len(MIGRATIONS)  # the schema version: one a migration
    with Store(db_path, retention_days=None) as store:
        add(store, "alice", "s1", ("user", "Caroline: I went hiking", T0))
        with store.write():
            store.conn.execute("DELETE FROM _migrations WHERE name = 'm007_settings'")
            store.conn.execute("DROP TABLE settings")
    before = _folder(db_path)
    r = cli("inspect", "users", "--db", str(db_path))
    assert r.exit_code == 1, _said(r)
    assert _said(r) == (
        f"error: cannot open database {db_path}: written by an older refind (schema version {NOW - 1}; this version's "
        f"is {NOW}); "
        "this command changes nothing; any other but refind backup upgrades it, for good (add, search, serve, mcp, "
        "export, expire, forget): refind backup copies it as it is first"
    )
    assert _folder(db_path) == before
    assert cli("inspect", "--check", "--db", str(db_path)).exit_code == 0  # --check reads an older schema as it is
    assert _folder(db_path) == before
    assert cli("search", "hiking", "--user", "alice", "--mode", "bm25", "--db", str(db_path)).exit_code == 0
    assert cli("inspect", "users", "--db", str(db_path)).exit_code == 0  # a writer upgraded it


def test_search_and_export_of_an_older_refinds_database_on_read_only_media_say_how_to_read_it(
    cli, read_only_mount, tmp_path
):
    # they read a database on read-only media as inspect does, but an older refind's must be upgraded first: they
    # said inspect's refusal, which names them among the commands that upgrade it (exit 1)
    folder, remount_read_only = read_only_mount
    path = folder / "backup.db"
    with Store(path, retention_days=None) as store:
        add(store, "alice", "s1", ("user", "Caroline: I went hiking", T0))
        with store.write():
            store.conn.execute("DELETE FROM _migrations WHERE name = 'm007_settings'")
            store.conn.execute("DROP TABLE settings")
    remount_read_only()
    before = _folder(path)
    for args in (["search", "hiking", "--user", "alice", "--mode", "bm25"], ["export", "--user", "alice"]):
        r = cli(*args, "--db", str(path), "--retention-days", "off")
        assert r.exit_code == 9, _said(r)
        assert _said(r) == (
            f"error: cannot open database {path}: cannot be written (unable to open database file); the file, its "
            "folder (SQLite creates the -wal and -shm files beside it) or the file system is read-only; and an older "
            "refind wrote it, which this version reads only once a command that can write it has upgraded it — "
            f"nothing was changed: `refind backup COPY --db {path}` copies it as it is to where it can be written, "
            "and this command upgrades and reads the copy there"
        )
    assert _folder(path) == before
    copy = tmp_path / "copy.db"
    assert cli("backup", str(copy), "--db", str(path)).exit_code == 0
    found = cli("search", "hiking", "--user", "alice", "--mode", "bm25", "--db", str(copy), "--retention-days", "off")
    assert found.exit_code == 0 and "Caroline: I went hiking" in found.output, _said(found)
    assert _folder(path) == before


@pytest.mark.parametrize(
    "args",
    [
        ["search", "hiking", "--user", "alice", "--mode", "bm25"],
        ["export", "--user", "alice"],
        ["forget", "--user", "alice", "--yes"],
        ["expire"],
    ],
    ids=lambda a: a[0],
)
def test_commands_that_need_a_database_refuse_a_zero_byte_file_and_write_nothing(cli, tmp_path, args):
    empty = tmp_path / "zero.db"
    empty.touch(mode=0o644)
    before = _folder(empty)
    r = cli(*args, "--db", str(empty))
    assert r.exit_code == 4, _said(r)  # was 0 (4 for forget): refind's whole schema written into the file
    assert _said(r) == f"error: cannot open database {empty}: {EMPTY}"
    assert _folder(empty) == before


def test_writers_refuse_another_programs_database_and_change_nothing(cli, tmp_path):
    other = tmp_path / "notes.db"
    _foreign(other)
    before = _folder(other)
    for args in (["add", "hello", "--user", "u", "--session", "s"], ["mcp", "--user", "u"]):
        r = cli(*args, "--db", str(other))
        assert r.exit_code == 1, _said(r)
        assert _said(r) == f"error: cannot open database {other}: {FOREIGN}"
    with pytest.raises(RefindError, match="not a refind database but another program's"):
        Memory(other)
    assert _folder(other) == before


def test_inspect_shows_an_index_of_an_earlier_analyzer_stale_and_does_not_index_it_again(cli, db_path):
    import json

    from test_case_folding import old_database

    old_database(db_path)  # indexed by analyzer 1: the next writer's open indexes every message again
    before = _folder(db_path)
    r = cli("inspect", "--json", "--db", str(db_path))
    assert r.exit_code == 0, _said(r)
    assert json.loads(r.stdout)["index"]["state"] == "stale"  # was "ready": inspect indexed it again, writing
    assert _folder(db_path) == before


def test_search_and_export_read_a_database_on_a_read_only_file_system(cli, read_only_mount, tmp_path):
    # a probe of round 24: inspect read such a backup, search and export answered exit 9 "cannot be written"
    path, before = _backup_on_read_only_media(read_only_mount)
    found = cli("search", "hiking", "--user", "alice", "--mode", "bm25", "--db", str(path), "--json")
    assert found.exit_code == 0, _said(found)
    assert "Caroline: I went hiking" in found.output
    exported = cli("export", "--user", "alice", "--db", str(path), "--output", str(tmp_path / "alice.jsonl"))
    assert exported.exit_code == 0, _said(exported)
    assert "Caroline: I went hiking" in (tmp_path / "alice.jsonl").read_text(encoding="utf-8")
    assert _folder(path) == before
