"""A database written by main while the replay11 merge was on it (124e2a7 and 143c6da, reverted by f07859f) records
two migrations this version does not run, m008_add_events_by_request and m009_replay_gaps: it is upgraded like any
older database (what they made dropped), not refused as a newer refind's — there is no newer refind to upgrade to."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest
from helpers import T0

from refind_cli import migrations
from refind_cli.derived_ids import message_id

NOW = int(time.time() * 1000)  # recorded now: within the retention
TEXT = "Caroline: I went hiking at Mount Rainier 🏔️ 很好"


def written_by_143c6da(path: Path) -> None:
    """The file 143c6da left: m001-m007 (the same as this version's), its m008 and m009 as they shipped, and one Add
    (request, message, event) and one replay_gaps row as its store wrote them."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)")
    conn.execute("BEGIN")
    shipped = [fn for _, fn in migrations.MIGRATIONS[:7]] + [
        lambda c: c.execute("CREATE INDEX events_add_by_request ON events (user_id, request_id) WHERE kind = 'add'"),
        lambda c: c.execute(
            "CREATE TABLE replay_gaps (user_id TEXT NOT NULL, session_id TEXT NOT NULL, request_id TEXT NOT NULL, "
            "position INTEGER NOT NULL, lines INTEGER NOT NULL, messages INTEGER NOT NULL, "
            "PRIMARY KEY (user_id, session_id, request_id, position)) WITHOUT ROWID"
        ),
    ]
    names = [name for name, _ in migrations.MIGRATIONS[:7]] + ["m008_add_events_by_request", "m009_replay_gaps"]
    for name, fn in zip(names, shipped):
        fn(conn)
        conn.execute("INSERT INTO _migrations VALUES (?, ?)", (name, T0))
        conn.execute("INSERT INTO events (at, kind, rows, detail) VALUES (?, 'migrate', 0, ?)", (T0, name))
    conn.execute("INSERT INTO requests VALUES ('alice', 'r1', 's1', 'h', 1, ?)", (NOW,))
    conn.execute(
        "INSERT INTO messages (id, user_id, session_id, request_id, idx, role, content, said_at, recorded_at) "
        "VALUES (?, 'alice', 's1', 'r1', 0, 'user', ?, ?, ?)",
        (message_id("alice", "r1", 0), TEXT, T0, NOW),
    )
    conn.execute("INSERT INTO users VALUES ('alice', 1)")
    conn.execute(
        "INSERT INTO events (at, kind, user_id, session_id, request_id, rows) VALUES (?, 'add', 'alice', 's1', 'r1', 1)",
        (T0,),
    )
    conn.execute("INSERT INTO replay_gaps VALUES ('alice', 's1', 'auto-0123456789abcdef0123', 2, 1, 3)")
    conn.execute("COMMIT")
    conn.close()


def test_a_database_written_while_the_withdrawn_migrations_were_on_main_is_upgraded(cli, db_path: Path) -> None:
    written_by_143c6da(db_path)
    before = db_path.read_bytes()
    assert cli("inspect", "--check").exit_code == 0  # read as it is, as any older schema
    assert db_path.read_bytes() == before
    found = cli("search", "Rainier", "--user", "alice", "--mode", "bm25", "--json")
    assert found.exit_code == 0, found.output
    assert [hit["id"] for hit in json.loads(found.output)["data"]] == [message_id("alice", "r1", 0)]
    with sqlite3.connect(db_path) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM _migrations ORDER BY rowid")] == [
            name for name, _ in migrations.MIGRATIONS
        ]
        assert not conn.execute(
            "SELECT name FROM sqlite_master WHERE name IN ('replay_gaps', 'events_add_by_request')"
        ).fetchall()
        undone = conn.execute("SELECT detail FROM events WHERE kind = 'migrate' AND detail LIKE '%undone'").fetchall()
        assert sorted(undone) == [("m008_add_events_by_request undone",), ("m009_replay_gaps undone",)]
        assert conn.execute("SELECT content, said_at FROM messages").fetchall() == [(TEXT, T0)]
    assert cli("inspect", "users").exit_code == 0
    assert cli("inspect", "--check").exit_code == 0
    exported = cli("export", "--user", "alice")
    assert exported.exit_code == 0
    assert json.loads(exported.output)["messages"] == [{"role": "user", "content": TEXT, "timestamp": T0}]


@pytest.mark.parametrize("args", [["search", "x", "--user", "alice", "--mode", "bm25"], ["inspect", "--check"]])
def test_a_newer_migration_beside_the_withdrawn_ones_is_still_refused_and_named_alone(cli, db_path, args) -> None:
    written_by_143c6da(db_path)
    with sqlite3.connect(db_path) as conn:
        conn.execute("INSERT INTO _migrations VALUES ('m999_from_the_future', 0)")
    before = db_path.read_bytes()
    result = cli(*args)
    assert result.exit_code == 1
    assert "written by a newer refind (migration m999_from_the_future unknown to this version)" in " ".join(
        result.output.split()
    )
    assert db_path.read_bytes() == before
