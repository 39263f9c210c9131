"""What a process holds of a database in memory is served only while the file's content descends from what it read:
a copy restored into the file (the same id, path and inode) is told apart by the file's write log (migration m008),
and writes by other processes are not mistaken for one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import DAY, T0, add

from refind_cli import index_cache, index_store
from refind_cli import search as S
from refind_cli.store import Store

ADD = (
    "import sys; sys.path.insert(0, sys.argv[2]); from helpers import T0, add; from refind_cli import index_store; "
    "from refind_cli.store import Store; index_store.WRITE_LOG = int(sys.argv[4]); "
    "s = Store(sys.argv[1], retention_days=None); "
    "[add(s, 'v', f'other{i}', ('user', f'Vic: line {i}'), at=T0) for i in range(int(sys.argv[3]))]; s.close()"
)


def other_process_adds(db: Path, count: int, *, log: int = index_store.WRITE_LOG) -> None:
    """Another process adds ``count`` messages of user v, each in its own write (its write log kept to ``log``)."""
    tests = str(Path(__file__).parent)
    subprocess.run([sys.executable, "-c", ADD, str(db), tests, str(count), str(log)], check=True, timeout=120)


def live_state(store: Store, user: str) -> object:
    return index_cache.CACHE.get(("live", index_cache._db_key(store), user))


def shown(store: Store, config: S.SearchConfig | None = None) -> str:
    return " ".join(b.content for b in S.search(store, "u", "ski", top_k=5, config=config))


@pytest.mark.parametrize("restore", ["copied into the file", "renamed over it"])
@pytest.mark.parametrize("config", [S.SearchConfig(), S.SearchConfig(index_dates=False)], ids=["maintained", "scratch"])
def test_a_copy_restored_over_the_database_is_never_served_what_was_read_before(tmp_path, config, restore) -> None:
    # the maintained index's state, and an index of another shape built from the rows: both cached by version. A
    # copy written into the file keeps its inode (told apart by the write log); one renamed over it is a new file
    db, backup = tmp_path / "memory.db", tmp_path / "backup.db"
    with Store(db, retention_days=None) as store:
        add(store, "u", "s1", ("user", "Bob: any ski plans?"), at=T0)
    shutil.copy(db, backup)
    with Store(db, retention_days=None) as store:
        add(store, "u", "s2", ("user", "Kate: ski chalet, door code 4411"), at=T0 + DAY)
        assert "4411" in shown(store, config)
        inode, replaced = store.identity, store.index_db_id
    if restore == "renamed over it":
        os.replace(backup, db)
    else:
        shutil.copyfile(backup, db)
    with Store(db, retention_days=None) as store:
        assert (store.identity == inode) == (restore == "copied into the file")
        add(store, "u", "s3", ("user", "Zed: ski lessons on Sunday"), at=T0 + 2 * DAY)  # version 2 and seq 2 again
        assert "Zed: ski lessons on Sunday" in shown(store, config) and "Bob: any ski plans?" in shown(store, config)
        assert "4411" not in shown(store, config)
        if restore == "renamed over it":  # what was read of the replaced file is gone from memory
            assert not [k for k in index_cache.CACHE._items if isinstance(k, tuple) and k[1:2] == (replaced,)]


def test_a_copy_taken_after_what_a_process_read_is_its_descendant_and_keeps_the_cache(tmp_path, monkeypatch) -> None:
    # the process read the file at Bob's Add; the copy was taken after it: the file still descends from that read,
    # and the state read then grows by the new message (no state is assembled from all the segments again)
    assembled = []
    real = index_cache._assemble
    monkeypatch.setattr(index_cache, "_assemble", lambda *a: assembled.append(a) or real(*a))
    db, backup = tmp_path / "memory.db", tmp_path / "backup.db"
    with Store(db, retention_days=None) as store:
        add(store, "u", "s1", ("user", "Bob: any ski plans?"), at=T0)
        assert "Bob" in shown(store)
        held = live_state(store, "u")
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the copy holds every commit so far
        shutil.copy(db, backup)
        add(store, "u", "s2", ("user", "Kate: ski chalet, door code 4411"), at=T0 + DAY)  # not searched
    shutil.copyfile(backup, db)
    with Store(db, retention_days=None) as store:
        add(store, "u", "s3", ("user", "Zed: ski lessons on Sunday"), at=T0 + 2 * DAY)
        assert held is not None
        assembled.clear()
        assert "Zed" in shown(store) and "4411" not in shown(store)
        assert assembled == [] and live_state(store, "u") is not held  # grown from it, not dropped and read again
        assert [m.seq for m in store.user_messages("u")] == [1, 2]


@pytest.mark.parametrize(
    ("writes", "log", "kept"),
    [
        (3, index_store.WRITE_LOG, True),  # other processes' writes: u's state is still the one read before them
        (120, 10, False),  # past the write log: read again (the file cannot be told from a restored copy)
    ],
)
def test_other_processes_writes_keep_what_this_one_holds_until_the_log_forgets(tmp_path, writes, log, kept) -> None:
    db = tmp_path / "memory.db"
    with Store(db, retention_days=None) as store:
        add(store, "u", "s1", ("user", "Bob: any ski plans?"), at=T0)
        assert "Bob" in shown(store)
        held = live_state(store, "u")
        other_process_adds(db, writes, log=log)
        assert "Bob" in shown(store)
        assert (live_state(store, "u") is held) == kept


def test_text_read_outside_a_search_goes_into_the_state_only_while_the_file_descends_from_it(tmp_path) -> None:
    # the planner keeps its index through its model calls and the server's warmer preloads: they read text outside
    # a search's snapshot, into the state every search shares — only while the file descends from the state's write
    from refind_cli.index_store import IndexChanged

    db = tmp_path / "memory.db"
    with Store(db, retention_days=None) as store:
        add(store, "u", "s1", ("user", "Bob: any ski plans?"), at=T0)
        index = S.user_index(store, "u").index  # held, as the planner and the warmer hold it
        state = index.turns._state
        state.read_at = 12345  # as if read of content the file no longer descends from (a copy restored into it)
        with pytest.raises(IndexChanged):
            index.turns.preload()
        assert state.turn_cache == {}
        state.read_at = index_store.last_write(store.conn)
        assert index.turns.preload() and [t.messages[0].content for t in state.turn_cache.values()] == [
            "Bob: any ski plans?"
        ]
