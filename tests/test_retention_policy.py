"""The retention policy the database remembers: a writer given one explicitly stores it; a command given none applies
it (a plain `refind expire` after `refind serve --retention-days 90` deletes nothing the server serves)."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import httpx
import pytest
from helpers import Clock, add_request
from test_server_e2e import AUTH, ServerProcess

from refind_cli import Memory
from refind_cli.store import DAY_MS, Store


def _seed(db: Path) -> None:
    """alice: one request recorded 60 days ago (inside 90, past 30), one 100 days ago (past both), one today."""
    now = int(time.time() * 1000)
    clock = Clock(now - 100 * DAY_MS)
    with Store(db, clock=clock, retention_days=None) as store:
        add_request(store, "r100", "alice", "s1", "a hundred days ago I painted the fence blue")
        clock.now = now - 60 * DAY_MS
        add_request(store, "r60", "alice", "s1", "sixty days ago I adopted a cat named Biscuit")
        clock.now = now
        add_request(store, "r0", "alice", "s1", "today I bought a kayak")


def _requests(db: Path) -> set[str]:
    with Store(db, retention_days=None) as store:
        return {r[0] for r in store.conn.execute("SELECT request_id FROM requests")}


@pytest.mark.slow
def test_a_plain_expire_after_serve_with_90_days_deletes_nothing_the_server_serves(db_path, cli, monkeypatch):
    monkeypatch.delenv("REFIND_RETENTION_DAYS", raising=False)
    _seed(db_path)
    server = ServerProcess(db_path, "--retention-days", "90")
    try:
        found = httpx.post(
            f"{server.url}/search",
            json={"user_id": "alice", "query": "cat named Biscuit", "top_k": 5},
            headers=AUTH,
            timeout=30,
        )
        assert found.status_code == 200, found.text
        assert "Biscuit" in found.text  # recorded 60 days ago: the server serves it
    finally:
        assert server.stop() in (0, -signal.SIGTERM)  # uvicorn re-raises the signal after shutdown

    result = cli("expire")
    assert result.exit_code == 0, result.output
    assert "retention window 90 days: the database's stored policy, set by refind serve" in result.output
    assert _requests(db_path) == {"r60", "r0"}  # only what is past 90 days went

    info = json.loads(cli("inspect", "--json").output)
    assert info["retention_days"] == 90
    assert info["retention_stored"]["days"] == 90 and info["retention_stored"]["set_by"] == "refind serve"


def test_an_explicit_shorter_expire_is_applied_and_said_and_leaves_the_policy(db_path, cli, monkeypatch):
    monkeypatch.delenv("REFIND_RETENTION_DAYS", raising=False)
    _seed(db_path)
    with Memory(db_path, retention_days=90):  # stores 90
        pass
    dry = cli("expire", "--dry-run", "--json")
    assert json.loads(dry.output)["policy"]["source"] == "stored" and json.loads(dry.output)["messages"] == 1

    result = cli("expire", "--days", "30")
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "retention window 30 days: given" in out
    assert "30 days is shorter than the stored policy of 90 days" in out
    assert _requests(db_path) == {"r0"}
    info = json.loads(cli("inspect", "--json").output)
    assert info["retention_stored"]["days"] == 90  # a sweep's window is for that run only


def test_a_writer_stores_an_explicit_retention_and_a_reader_does_not(db_path, cli, monkeypatch):
    monkeypatch.delenv("REFIND_RETENTION_DAYS", raising=False)
    # no retention given: nothing stored, the default applies
    assert cli("add", "hello", "--user", "alice", "--session", "s1").exit_code == 0
    info = json.loads(cli("inspect", "--json").output)
    assert (info["retention_days"], info["retention_stored"]) == (30, None)
    assert "none stored" in cli("inspect").output

    monkeypatch.setenv("REFIND_RETENTION_DAYS", "off")  # the variable is as explicit as the flag
    assert cli("add", "again", "--user", "alice", "--session", "s1").exit_code == 0
    monkeypatch.delenv("REFIND_RETENTION_DAYS")
    info = json.loads(cli("inspect", "--json").output)
    assert info["retention_days"] is None and info["retention_stored"]["days"] is None
    assert info["retention_stored"]["set_by"] == "refind add"

    # a reader given one applies it for itself only
    assert cli("search", "hello", "--user", "alice", "--mode", "bm25", "--retention-days", "7").exit_code == 0
    assert json.loads(cli("inspect", "--json").output)["retention_stored"]["days"] is None


def test_memory_applies_the_stored_policy_when_given_none(db_path) -> None:
    clock = Clock()
    with Memory(db_path, retention_days=None, clock=clock) as memory:  # retention off, stored
        memory.add("an old note", user="alice", session="s1")
    clock.now += 45 * DAY_MS
    with Memory(db_path, clock=clock) as memory:  # none given: the stored "off", not the default 30 days
        assert [h.content for h in memory.search("old note", user="alice")] == ["user: an old note"]
        assert memory.expire().messages == 0
    with Memory(db_path, retention_days=30, clock=clock) as memory:  # given: applied and stored
        assert memory.search("old note", user="alice") == []
    with Memory(db_path, clock=clock) as memory:
        assert memory.expire().messages == 1


def test_a_refused_add_stores_no_policy(db_path, cli, tmp_path, monkeypatch) -> None:
    """Bad input writes nothing, the retention given with it included."""
    monkeypatch.delenv("REFIND_RETENTION_DAYS", raising=False)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"user_id": "alice", "session_id": "s1", "role": "user", "content": "ok"}\n{not json\n')
    result = cli("add", "--file", str(bad), "--strict", "--retention-days", "90")
    assert result.exit_code == 2
    assert not db_path.exists()  # nothing at all: no database to hold a policy
    one = cli("add", "--file", str(bad), "--retention-days", "90")  # without --strict the good line is stored
    assert one.exit_code == 2
    assert json.loads(cli("inspect", "--json").output)["retention_stored"]["days"] == 90
