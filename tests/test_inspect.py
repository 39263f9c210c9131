"""`refind inspect`: every command renders a table and has --json that parses, with numbers that match the store."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from refind_cli.contract import parse_add
from refind_cli.store import Store

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture
def loaded(cli) -> None:
    assert cli("add", "--file", str(FIXTURES / "conversations.jsonl")).exit_code == 0
    assert cli("add", "--file", str(FIXTURES / "messages.jsonl")).exit_code == 0


def _add_in_2001(db_path: Path, user: str, text: str) -> None:
    with Store(db_path, clock=lambda: 1_000_000_000_000, retention_days=None) as old:
        old.add(
            parse_add(
                {"request_id": "r", "user_id": user, "session_id": "s", "messages": [{"role": "user", "content": text}]}
            )
        )


def _json(cli, *args: str):
    result = cli(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _expected(db_path: Path) -> dict:
    with Store(db_path, retention_days=None) as s:
        q = s.conn.execute
        return {
            "users": q("SELECT count(DISTINCT user_id) FROM messages").fetchone()[0],
            "messages": q("SELECT count(*) FROM messages").fetchone()[0],
            "alice_sessions": [
                r[0]
                for r in q(
                    "SELECT session_id FROM messages WHERE user_id = 'alice' GROUP BY session_id ORDER BY min(seq)"
                )
            ],
            "alice_s1": q(
                "SELECT id, content FROM messages WHERE user_id = 'alice' AND session_id = 's1' ORDER BY seq"
            ).fetchall(),
            "said": q("SELECT min(said_at), max(said_at) FROM messages").fetchone(),
        }


def test_every_inspect_command_has_json_that_parses(cli, loaded, db_path: Path) -> None:
    exp = _expected(db_path)
    info = _json(cli, "inspect")
    assert info["db"] == str(db_path) and info["size_bytes"] > 0
    assert info["schema_version"] >= 1 and info["migrations"][0] == "m001_core"
    assert (info["users"], info["messages"], info["retention_days"]) == (exp["users"], exp["messages"], 30.0)
    assert (info["said_at"]["min"], info["said_at"]["max"]) == exp["said"]

    users = _json(cli, "inspect", "users")
    assert [u["user_id"] for u in users] == ["alice", "bob", "carol", "dave"]
    assert sum(u["messages"] for u in users) == exp["messages"]

    alice = _json(cli, "inspect", "user", "alice")
    assert [s["session_id"] for s in alice["sessions"]] == exp["alice_sessions"]

    session = _json(cli, "inspect", "session", "alice", "s1")
    assert [(t["id"], t["messages"][0]["content"]) for t in session["turns"]] == exp["alice_s1"]

    middle = exp["alice_s1"][1][0]
    turn = _json(cli, "inspect", "turn", middle, "--neighbours", "1")
    assert turn["turn"]["id"] == middle
    assert [t["id"] for t in turn["before"]] == [exp["alice_s1"][0][0]]
    assert [t["id"] for t in turn["after"]] == [exp["alice_s1"][2][0]]

    events = _json(cli, "inspect", "events")
    assert {e["kind"] for e in events} == {"add", "migrate"}
    assert all(e["user_id"] == "bob" for e in _json(cli, "inspect", "events", "--user", "bob"))
    assert {e["kind"] for e in _json(cli, "inspect", "events", "--kind", "migrate")} == {"migrate"}
    assert _json(cli, "inspect", "events", "--limit", str(10**20)) == events  # past SQLite's integers: all
    bogus = cli("inspect", "events", "--kind", "adds")
    assert bogus.exit_code == 2
    assert "--kind: 'adds' is not an event kind; the kinds are add, expire, forget, migrate, restore" in bogus.output


def test_every_inspect_command_renders_a_table(cli, loaded) -> None:
    session = cli("inspect", "session", "alice", "s1").output
    turn_id = _json(cli, "inspect", "session", "alice", "s1")["turns"][1]["id"]
    for args in (
        ["inspect"],
        ["inspect", "users"],
        ["inspect", "user", "alice"],
        ["inspect", "session", "alice", "s1"],
        ["inspect", "events", "--user", "alice"],
    ):
        result = cli(*args)
        assert result.exit_code == 0, result.output
        assert "alice" in result.output or "refind database" in result.output
    assert "Lisbon" in session
    assert turn_id in session
    turn = cli("inspect", "turn", turn_id)
    assert turn.exit_code == 0 and "turn 2 of 3" in turn.output and "Lisbon" in turn.output


def test_options_before_the_subcommand_are_honoured_and_no_database_is_created(
    runner, cli, loaded, db_path, tmp_path: Path
) -> None:
    from refind_cli.cli import app

    ids = [
        u["user_id"]
        for u in json.loads(
            runner.invoke(app, ["inspect", "--db", str(db_path), "--json", "users"], env={"REFIND_DB": ""}).output
        )
    ]
    assert ids == ["alice", "bob", "carol", "dave"]
    missing = tmp_path / "typo.db"
    for args in (
        ["inspect", "--db", str(missing)],
        ["inspect", "users", "--db", str(missing)],
        ["expire", "--db", str(missing)],
        ["export", "--user", "alice", "--db", str(missing)],
    ):
        assert runner.invoke(app, args).exit_code == 4, args
    assert not missing.exists()


def test_unknown_things_are_not_found(cli, loaded) -> None:
    for args in (["inspect", "user", "nobody"], ["inspect", "session", "alice", "nope"], ["inspect", "turn", "f00"]):
        result = cli(*args)
        assert result.exit_code == 4, args


def test_audit_has_an_event_for_every_mutation(cli, loaded, db_path: Path) -> None:
    _add_in_2001(db_path, "erin", "old")
    assert cli("forget", "--user", "bob", "--yes").exit_code == 0
    assert cli("expire").exit_code == 0
    kinds = {(e["kind"], e["user_id"]) for e in _json(cli, "inspect", "events", "--limit", "0")}
    assert {("migrate", None), ("add", "alice"), ("add", "erin"), ("forget", "bob"), ("expire", "erin")} <= kinds
    text = json.dumps(_json(cli, "inspect", "events", "--limit", "0"), ensure_ascii=False)
    assert "杭州" not in text and "Lisbon" not in text  # counts and ids, never message text


def test_inspect_hides_messages_past_retention(cli, db_path: Path) -> None:
    _add_in_2001(db_path, "erin", "recorded in 2001")
    assert _json(cli, "inspect")["awaiting_expiry"] == 1
    assert _json(cli, "inspect", "users") == []
    assert cli("inspect", "session", "erin", "s").exit_code == 4
    kept = json.loads(cli("inspect", "session", "erin", "s", "--retention-days", "off", "--json").output)
    assert kept["turns"][0]["messages"][0]["content"] == "recorded in 2001"


@pytest.fixture
def small_parts(monkeypatch) -> None:
    from refind_cli import index_store

    monkeypatch.setattr(index_store, "PART_POSTINGS", 8)  # segments stored by part, as a big user's are


def test_inspect_shows_the_index_size_and_state(cli, small_parts, loaded, db_path: Path) -> None:
    index = _json(cli, "inspect")["index"]
    with Store(db_path, retention_days=None) as s:
        q = s.conn.execute
        segments, heads = q("SELECT count(*), sum(length(blob)) FROM index_segments").fetchone()
        parts, postings = q("SELECT count(*), coalesce(sum(length(blob)), 0) FROM index_parts").fetchone()
        content = q("SELECT sum(length(CAST(content AS BLOB))) FROM messages").fetchone()[0]
        messages = q("SELECT count(*) FROM messages").fetchone()[0]
    assert (index["state"], index["messages"], index["pending_messages"]) == ("ready", messages, 0)
    assert parts > 0 and (index["segments"], index["parts"], index["bytes"]) == (segments, parts, heads + postings)
    assert index["bytes_per_content_byte"] == round((heads + postings) / content, 3)
    from rich.console import Console

    from refind_cli.cli.render import overview

    wide = Console(width=240, record=True, file=io.StringIO())
    wide.print(overview(_json(cli, "inspect")))
    shown = wide.export_text()
    assert f"ready: {messages:,} messages in {segments:,} segment(s) ({parts:,} part(s) of postings)" in shown
    assert cli("inspect").exit_code == 0


def test_the_overview_counts_pairs_of_ids_as_pairs(cli, db_path: Path) -> None:
    # a probe of round 18: ids joined by U+001F were counted as one string — "a\x1fb" + "c" and "a" + "b\x1fc" one
    from refind_cli.api import Memory

    with Memory(str(db_path), retention_days=None) as memory:
        memory.add("one", user="a\x1fb", session="c", request_id="r")
        memory.add("two", user="a", session="b\x1fc", request_id="b\x1fr")
        memory.add("three", user="a\x1fb", session="c", request_id="r2")
    info = _json(cli, "inspect")
    assert (info["users"], info["sessions"], info["requests"], info["messages"]) == (2, 2, 3, 3)
