"""`refind inspect users/user/events/tombstones` past TABLE_MAX_ROWS rows: tab-separated lines, a row a line (rich
measured every cell before drawing: a user's 50,000 sessions took ~14 s, 50,000 events ~27 s); the table on request,
and as before for a short listing (round 28)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from refind_cli.cli import render
from refind_cli.contract import parse_add
from refind_cli.lifecycle import forget
from refind_cli.store import Store

T0 = 1_685_606_400_000
SESSIONS = ["s0", "s\t1", "s[b]2", "s\n3"]  # a tab, markup and a line break in ids: each shown on its line, escaped


@pytest.fixture
def many(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Store(db_path, retention_days=None) as store:
        for i, session in enumerate(SESSIONS):
            for user in ("alice", "bob[x]"):
                store.add(
                    parse_add(
                        {
                            "request_id": f"r{i}",
                            "user_id": user,
                            "session_id": session,
                            "messages": [{"role": "user", "content": f"hello {i}", "timestamp": T0 + i * 60_000}],
                        }
                    )
                )
        forget(store, user_id="bob[x]", session_id="s0")
        forget(store, user_id="bob[x]", session_id="s\t1")
    monkeypatch.setattr(render, "TABLE_MAX_ROWS", 1, raising=False)


def _lines(out: str) -> list[list[str]]:
    return [line.split("\t") for line in out.splitlines()[1:]]


def test_a_users_sessions_past_the_limit_are_lines(cli, many) -> None:
    result = cli("inspect", "user", "alice")
    assert result.exit_code == 0, result.output
    assert result.output.startswith(
        "user alice: 4 session(s), 4 message(s), 0 tombstone(s), as tab-separated lines "
        "(over 1 rows; --table draws the table anyway)\n"
    )
    assert "┃" not in result.output
    rows = _lines(result.output)
    assert rows[0] == ["session", "requests", "messages", "said at", "recorded at"]
    data = json.loads(cli("inspect", "user", "alice", "--json").output)["sessions"]
    assert [r[0] for r in rows[1:]] == [render.plain_id(s["session_id"]) for s in data]
    assert sorted(r[0] for r in rows[1:]) == sorted(["s0", "s\\x091", "s[b]2", "s\\x0a3"])
    assert all(len(r) == 5 and r[1:3] == ["1", "1"] for r in rows[1:])


def test_users_events_and_tombstones_past_the_limit_are_lines(cli, many) -> None:
    users = _lines(cli("inspect", "users").output)
    assert users[0][0] == "user" and sorted(r[0] for r in users[1:]) == ["alice", "bob[x]"]
    events = cli("inspect", "events", "--user", "bob[x]", "--limit", "0")
    assert events.output.startswith("6 event(s), newest first, as tab-separated lines (over 1 rows;")
    rows = _lines(events.output)
    assert rows[0] == ["id", "at", "kind", "user", "session", "request", "rows", "detail"]
    assert [r[2] for r in rows[1:]] == ["forget", "forget", "add", "add", "add", "add"]
    assert [r[4] for r in rows[1:]] == ["s\\x091", "s0", "s\\x0a3", "s[b]2", "s\\x091", "s0"]
    tombstones = _lines(cli("inspect", "tombstones", "--user", "bob[x]").output)
    assert [r[3] for r in tombstones[1:]] == ["bob[x]", "bob[x]"]
    assert [r[4] for r in tombstones[1:]] == ["s\\x091", "s0"]


def test_the_table_on_request_and_lines_on_request(cli, many, monkeypatch: pytest.MonkeyPatch) -> None:
    assert "┃" in cli("inspect", "user", "alice", "--table").output
    monkeypatch.setattr(render, "TABLE_MAX_ROWS", 1000)
    assert "┃" in cli("inspect", "users").output  # a short listing: the table, as before
    plain = cli("inspect", "users", "--plain").output
    assert plain.startswith("2 user(s), as tab-separated lines (--plain)\n") and "┃" not in plain
