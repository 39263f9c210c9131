"""Item 6: tombstone hashes are keyed with a per-database secret, so a short forgotten text cannot be recovered by
guessing from `refind inspect tombstones`; tombstones written before (unkeyed) lose their hashes on migration."""

from __future__ import annotations

import hashlib
import json
import sqlite3

from refind_cli import lifecycle, migrations
from refind_cli.contract import parse_add
from refind_cli.store import Store

GUESSES = ["yes", "no", "ok", "My PIN is 4417", "thanks"] + [f"My PIN is {n:04d}" for n in range(10_000)]


def _add(store: Store, rid: str, text: str) -> None:
    body = {"request_id": rid, "user_id": "alice", "session_id": "s", "messages": [{"role": "user", "content": text}]}
    store.add(parse_add(body))


def test_a_short_forgotten_text_cannot_be_found_by_guessing(db_path, cli) -> None:
    with Store(db_path) as store:
        _add(store, "r1", "My PIN is 4417")
        _add(store, "r2", "yes")
        lifecycle.forget(store, "alice")
    listing = cli("inspect", "tombstones", "--user", "alice", "--json").stdout
    hashes = set(json.loads(listing)[0]["content_hashes"])
    assert len(hashes) == 2
    unkeyed = {hashlib.sha256(g.encode()).hexdigest() for g in GUESSES}
    assert not hashes & unkeyed


def test_each_database_has_its_own_key(tmp_path) -> None:
    keys = []
    for name in ("a.db", "b.db"):
        with Store(tmp_path / name) as store:
            keys.append(lifecycle.tombstone_key(store))
    assert len(keys[0]) == 32 and keys[0] != keys[1]


def test_unkeyed_hashes_of_an_older_database_are_dropped(db_path) -> None:
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)")
    conn.execute("BEGIN")
    for name, fn in migrations.MIGRATIONS:
        if name == "m003_security_tombstone_key":
            break
        fn(conn)
        conn.execute("INSERT INTO _migrations VALUES (?, 0)", (name,))
    old = json.dumps([hashlib.sha256(b"yes").hexdigest()])
    conn.execute(
        "INSERT INTO tombstones (at, scope, user_id, rows, message_ids, content_hashes) "
        "VALUES (0, 'user', 'alice', 1, '[\"x\"]', ?)",
        (old,),
    )
    conn.execute("COMMIT")
    conn.close()
    with Store(db_path) as store:
        [stone] = lifecycle.tombstones(store)
        assert stone["content_hashes"] == [] and stone["message_ids"] == ["x"]
