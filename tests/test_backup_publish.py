"""`refind backup` names its checked copy with a hard link, which never overwrites: a file made at PATH after the
command's check (a race) is kept, and the backup refused; where hard links are not supported, a rename."""

from __future__ import annotations

import errno
import os
import sqlite3
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
