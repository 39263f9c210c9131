"""A refused `refind add` leaves no trace: where no database was, none is created — not for one message refused
before any file is opened, nor for a replay that stored nothing — while a database that was there before, or that
another connection uses, is never removed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from helpers import T0, add


def _files(db: Path) -> list[str]:
    return sorted(p.name for p in db.parent.iterdir() if p.name.startswith(db.name))


BAD_LINES = (
    '{"user_id": "u", "session_id": "s", "role": "user", "content": "ok"}\n'
    '{"user_id": "u", "session_id": "s", "role": "robot", "content": "x"}\n'
    "not json\n"
)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # named by the argument or flag that gave it, not by the request's field ("messages[0].role")
        (("", "--user", "u", "--session", "s"), "error: TEXT: must be a non-empty string"),
        (("hi", "--user", "u", "--session", "s", "--role", "robot"), "error: --role: must be one of user, assistant"),
        (("hi", "--user", "u", "--session", "s", "--request-id", ""), "error: --request-id: must be a non-empty"),
        (("hi", "--user", "u", "--session", "s", "--at", "yesterday"), "--at: 'yesterday' is not an ISO 8601 time"),
        (("hi", "--user", "u"), "one message needs --user and --session"),
    ],
)
def test_a_refused_message_creates_no_database(cli, db_path, args, message) -> None:
    r = cli("add", *args)
    assert r.exit_code == 2 and message in r.output, r.output
    assert _files(db_path) == []


def test_an_empty_file_replayed_without_fault_keeps_the_database_it_asked_for(cli, db_path, tmp_path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert cli("add", "--file", str(empty)).exit_code == 0
    assert db_path.exists()
    assert cli("search", "hi", "--user", "u", "--mode", "bm25", "--json").exit_code == 0  # (was "no database")


def test_a_strict_replay_refused_whole_creates_no_database(cli, db_path, tmp_path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(BAD_LINES)
    r = cli("add", "--file", str(path), "--strict")
    assert r.exit_code == 2 and "role: must be one of" in r.output, r.output
    assert _files(db_path) == []  # no database, no -wal, no -shm


def test_a_replay_that_stored_nothing_creates_no_database(cli, db_path, tmp_path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(BAD_LINES.split("\n", 1)[1])  # every line invalid
    r = cli("add", "--file", str(path))
    assert r.exit_code == 2, r.output
    assert _files(db_path) == []
    missing = cli("add", "--file", str(tmp_path / "missing.jsonl"))
    assert missing.exit_code == 1 and "no such file" in missing.output
    assert _files(db_path) == []


def test_a_replay_that_stored_something_keeps_the_new_database(cli, db_path, tmp_path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(BAD_LINES)
    r = cli("add", "--file", str(path))
    assert r.exit_code == 2, r.output
    assert db_path.exists()
    assert sqlite3.connect(db_path).execute("SELECT count(*) FROM messages").fetchone() == (1,)


def test_a_refused_replay_never_removes_a_database_that_was_there(cli, db_path, tmp_path) -> None:
    from refind_cli.store import Store

    Store(db_path).close()  # a database with nothing in it, made by an earlier command: not this replay's to remove
    path = tmp_path / "bad.jsonl"
    path.write_text(BAD_LINES)
    r = cli("add", "--file", str(path), "--strict")
    assert r.exit_code == 2, r.output
    assert db_path.exists()
    with Store(db_path) as store:
        add(store, "alice", "s", ("user", "I went hiking", T0))
    assert cli("add", "--file", str(path), "--strict").exit_code == 2
    with Store(db_path) as store:
        assert len(store.user_messages("alice")) == 1


def test_a_new_database_another_connection_has_read_is_kept(tmp_path) -> None:
    from refind_cli.store import Store

    db = tmp_path / "new.db"
    store = Store(db)
    assert store.created
    other = sqlite3.connect(db)  # another process's connection, opened meanwhile
    other.execute("SELECT count(*) FROM requests").fetchone()
    assert store.remove_if_unused() is False
    assert db.exists()
    assert other.execute("SELECT count(*) FROM requests").fetchone() == (0,)  # still a sound database
    other.close()
    assert Store(db).created is False  # (and so never removed by the next one)


def test_a_new_database_replaced_meanwhile_is_kept(tmp_path) -> None:
    from refind_cli.store import Store

    db = tmp_path / "new.db"
    store = Store(db)
    db.unlink()
    with Store(db) as theirs:  # another process made a database at the path since
        add(theirs, "alice", "s", ("user", "I went hiking", T0))
    assert store.remove_if_unused() is False
    with Store(db) as again:
        assert len(again.user_messages("alice")) == 1


def test_a_database_renamed_onto_the_path_during_the_removal_is_kept(tmp_path, monkeypatch) -> None:
    """The last check passes, then another process renames its database onto the path (``mv theirs.db new.db``):
    what is removed is checked where it was moved aside, so theirs is put back, not unlinked."""
    from refind_cli.store import Store

    db = tmp_path / "new.db"
    theirs = tmp_path / "theirs.db"
    with Store(theirs) as other:
        add(other, "alice", "s", ("user", "I went hiking", T0))
    store = Store(db)
    checks = []
    unused = Store._unused

    def checked_then_replaced(self: Store) -> bool:
        result = unused(self)
        checks.append(result)
        if len(checks) == 2:  # the check under the exclusive lock, just before the unlink
            theirs.replace(db)
        return result

    monkeypatch.setattr(Store, "_unused", checked_then_replaced)
    assert store.remove_if_unused() is False
    assert checks == [True, True]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.db"]  # theirs, at the path; nothing left aside
    monkeypatch.setattr(Store, "_unused", unused)
    with Store(db) as again:
        assert len(again.user_messages("alice")) == 1


def test_a_database_left_aside_by_an_interrupted_removal_is_never_replaced_by_a_new_one(tmp_path, cli) -> None:
    """A process killed between the rename aside and the unlink or putting back (a data-safety review, round 17)
    leaves the path empty and the database that was renamed onto it under the private name: a later open must not
    make a new, empty database there as if nothing had been (``refind add`` exited 0, ``export`` showed only the new
    message), but say where the old one is."""
    from refind_cli.errors import StorageError
    from refind_cli.store import Store

    db = tmp_path / "new.db"
    aside = tmp_path / ".new.db.0123456789abcdef.removing"
    with Store(aside) as theirs:
        add(theirs, "alice", "s", ("user", "I went hiking", T0))
    with pytest.raises(StorageError, match=r"\.new\.db\.0123456789abcdef\.removing is beside it"):
        Store(db)
    result = cli("add", "a new message", "--user", "alice", "--session", "s2", "--db", str(db))
    assert result.exit_code == 7
    assert "rename it back to new.db if it is" in result.output
    assert not db.exists()
    looked = cli("inspect", "--db", str(db))  # a reader says where it is too
    assert looked.exit_code != 0 and ".new.db.0123456789abcdef.removing beside it" in looked.output
    aside.rename(db)  # what the message says to do
    with Store(db) as back:
        assert [m.content for m in back.user_messages("alice")] == ["I went hiking"]


def test_without_hard_links_a_file_moved_aside_in_error_is_renamed_back(tmp_path, monkeypatch) -> None:
    import os

    from refind_cli.store import _unlink_if_same, file_identity

    path, other = tmp_path / "new.db", tmp_path / "other"
    path.write_text("theirs")
    other.write_text("mine")
    mine = file_identity(other)

    def no_links(src: object, dst: object, **kwargs: object) -> None:
        raise PermissionError("hard links are not supported here")

    monkeypatch.setattr(os, "link", no_links)
    assert _unlink_if_same(path, mine) is False
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.db", "other"]
    assert path.read_text() == "theirs"


def test_a_file_that_cannot_be_put_back_is_kept_aside_and_said(tmp_path, monkeypatch) -> None:
    """A third file made at the path while another's database was aside: neither is removed, and the warning names
    where the other one is."""
    import os

    from refind_cli.store import _unlink_if_same, file_identity

    path, other = tmp_path / "new.db", tmp_path / "other"
    path.write_text("theirs")
    other.write_text("mine")

    def path_taken(src: object, dst: object, **kwargs: object) -> None:
        Path(str(dst)).write_text("a third")
        raise FileExistsError(dst)

    monkeypatch.setattr(os, "link", path_taken)
    with pytest.warns(RuntimeWarning, match="is kept as") as caught:
        assert _unlink_if_same(path, file_identity(other)) is False
    aside = [p for p in tmp_path.iterdir() if p.name.endswith(".removing")]
    assert len(aside) == 1 and aside[0].read_text() == "theirs" and str(aside[0]) in str(caught[0].message)
    assert path.read_text() == "a third" and other.read_text() == "mine"
