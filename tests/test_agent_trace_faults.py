"""An agent search whose trace cannot be stored still answers: storing the trace is a record of the search, not the
search. The database is locked for real (a second connection holds SQLite's write lock, as another process's
`refind add` does); the planner talks to the scripted model over real HTTP.

Before: the planner ran, the model was paid, the evidence was found — and the CLI exited 8 (the server answered 503
`locked`) after waiting the whole busy timeout (30 s by default) past the search's deadline, because the trace's
INSERT met the lock."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers import T0, add, agent_app, agent_cli
from llm_server import Slow

from refind_cli.store import Store

SEARCH = '{"action": "search_chatrecord", "keywords": "hiking"}'
NOTE = '{"action": "take_note", "results": [1]}'
FINISH = '{"action": "finish_search"}'
RAINIER = "[2023-06-01 08:00] user: Caroline: I went hiking at Mount Rainier"

pytestmark = pytest.mark.usefixtures("no_model_env")


@contextmanager
def write_lock_held(db: Path) -> Iterator[None]:
    """SQLite's write lock on ``db`` held by another connection for the duration."""
    holder = sqlite3.connect(db, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@pytest.fixture
def hikes(store):
    add(store, "alice", "hike", ("user", "Caroline: I went hiking at Mount Rainier", T0))
    return store


def stored_searches(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("SELECT count(*) FROM searches").fetchone()[0])
    finally:
        conn.close()


def test_a_locked_database_loses_the_trace_not_the_search(cli, hikes, llm_server, db_path, monkeypatch):
    monkeypatch.setenv("REFIND_BUSY_TIMEOUT", "0.2")
    llm_server.play(SEARCH, NOTE, FINISH)
    with write_lock_held(db_path):
        r = agent_cli(cli, llm_server, "--json")
    assert r.exit_code == 0, r.output
    found = json.loads(r.stdout)
    assert found["search_id"] is None and found["path"] == "notes"
    assert [d["content"] for d in found["data"]] == [RAINIER]
    unrecorded = next(e for e in found["trace"] if e["kind"] == "unrecorded")["data"]
    assert unrecorded["type"] == "locked" and "locked by another process" in unrecorded["reason"]
    assert stored_searches(db_path) == 0  # nothing half-written

    llm_server.play(SEARCH, NOTE, FINISH)
    with write_lock_held(db_path):
        plain = agent_cli(cli, llm_server)
    assert plain.exit_code == 0, plain.output
    said = " ".join(plain.output.split())
    assert "Mount Rainier" in said
    assert "agent search (not stored)" in said and "its trace was not stored: the database is locked" in said


def test_the_trace_waits_for_the_lock_no_longer_than_the_search_may_take(cli, hikes, llm_server, db_path, monkeypatch):
    busy = 60.0  # how long any other write waits for the lock here
    monkeypatch.setenv("REFIND_BUSY_TIMEOUT", str(busy))
    llm_server.play(SEARCH, NOTE, FINISH)
    began = time.monotonic()
    with write_lock_held(db_path):
        r = agent_cli(cli, llm_server, "--deadline", "2", "--json")
    assert time.monotonic() - began < busy / 2  # it did not wait out the busy timeout
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["search_id"] is None


def test_a_stored_trace_is_still_stored_once_the_lock_is_free(cli, hikes, llm_server, db_path):
    llm_server.play(SEARCH, NOTE, FINISH)
    r = agent_cli(cli, llm_server, "--json")
    assert r.exit_code == 0, r.output
    found = json.loads(r.stdout)
    assert found["search_id"] is not None and "unrecorded" not in [e["kind"] for e in found["trace"]]
    assert stored_searches(db_path) == 1


def test_the_server_answers_an_agent_search_while_another_process_holds_the_lock(
    db_path, llm_server, monkeypatch, caplog
):
    from fastapi.testclient import TestClient

    monkeypatch.setenv("REFIND_BUSY_TIMEOUT", "0.2")
    caplog.set_level(logging.INFO, logger="refind.server")
    app = agent_app(db_path, llm_server)
    llm_server.play(SEARCH, NOTE, FINISH)
    with (
        TestClient(app, raise_server_exceptions=False, base_url="http://127.0.0.1") as client,
        write_lock_held(db_path),
    ):
        r = client.post("/v1/memories/search", json={"query": "hiking", "user_id": "alice", "top_k": 5})
    assert r.status_code == 200, r.text
    assert [d["content"] for d in r.json()["data"]] == [RAINIER]
    logged = caplog.text
    assert "trace not stored (locked)" in logged and "Rainier" not in logged


def test_traces_finishing_together_in_the_server_each_wait_only_their_own_deadline(db_path):
    # The server queues its writes on one Python lock before SQLite's: six traces at their deadlines (1 s each may
    # wait) behind another process's lock waited 1, 2, … 6 s in turn; the queue now counts against the same wait
    import threading

    from refind_cli import planner
    from refind_cli.planner import AgentResult, Stats
    from refind_cli.server.dbpool import SerialStore
    from refind_cli.store import Store

    with Store(db_path, retention_days=None) as first:
        add(first, "alice", "a", ("user", "hello world", T0))
    stores = [SerialStore(db_path, retention_days=None) for _ in range(6)]  # six search threads' pooled stores
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process writing
    waited: list[tuple[float, str | None]] = []

    def finish(store: SerialStore) -> None:
        result = AgentResult(
            blocks=[], events=[], stats=Stats(), path="notes", user_id="alice", query="q",
            at=int(time.time() * 1000), deadline_at=time.monotonic(),
        )  # fmt: skip
        began = time.monotonic()
        result = planner.record_search(store, result)
        waited.append((time.monotonic() - began, result.unrecorded))

    threads = [threading.Thread(target=finish, args=(s,)) for s in stores]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        for s in stores:
            s.close()
    assert all(why is not None and "locked" in why for _, why in waited)
    assert max(w for w, _ in waited) < 3.5  # the sixth waited ~6 s in turn behind the others


def test_traces_not_stored_one_search_after_another_are_logged_once_then_once_over(
    db_path, llm_server, monkeypatch, caplog
):
    """Each agent search whose trace a storage fault kept out logged a line of its own ('trace not stored'): a full
    disk under a stream of searches flooded the operator's log as refused Adds did (a probe of round 29). Now the
    first is logged, the next ones counted, and the first trace stored again says the fault is over."""
    from fastapi.testclient import TestClient

    monkeypatch.setenv("REFIND_BUSY_TIMEOUT", "0.2")
    caplog.set_level(logging.INFO, logger="refind.server")
    app = agent_app(db_path, llm_server)
    body = {"query": "hiking", "user_id": "alice", "top_k": 5}
    with TestClient(app, raise_server_exceptions=False, base_url="http://127.0.0.1") as client:
        with write_lock_held(db_path):
            for _ in range(4):
                llm_server.play(SEARCH, NOTE, FINISH)
                assert client.post("/v1/memories/search", json=body).status_code == 200
        # a trace dropped because a forget removed what it quotes while the search ran is no trace stored: the
        # fault's run goes on (it was said over, though nothing had been stored)
        llm_server.play(SEARCH, NOTE, Slow(2.0, FINISH))
        forget = threading.Timer(1.0, lambda: client.delete("/v1/memories", params={"user_id": "alice"}))
        forget.start()
        dropped = client.post("/v1/memories/search", json=body)
        forget.join()
        assert dropped.status_code == 200 and dropped.json()["data"] == []
        assert not [r for r in caplog.records if "over" in r.getMessage()]
        with Store(db_path, retention_days=None) as store:
            add(store, "alice", "hike", ("user", "Caroline: I went hiking at Mount Rainier", T0), request_id="again")
        llm_server.play(SEARCH, NOTE, FINISH)
        assert client.post("/v1/memories/search", json=body).status_code == 200
    said = [r.getMessage() for r in caplog.records if "trace" in r.getMessage()]
    assert said == [
        "agent search (not stored): trace not stored (locked) (more agent search traces not stored by it are "
        "counted: one line every 10 s)",
        said[-1],
    ]
    assert said[-1].startswith("storage fault over: traces are stored again, after 4 not stored (locked) over ")
    assert stored_searches(db_path) == 1
