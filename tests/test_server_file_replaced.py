"""The database file deleted or replaced under a running server: refused (503, retried), never acknowledged into a
file a restart does not see, and never a new file created beside the old one's -wal."""

from __future__ import annotations

import shutil

import pytest

from refind_cli.contract import parse_add

ADD = {"request_id": "r1", "user_id": "u", "session_id": "s", "messages": [{"role": "user", "content": "alpha"}]}


def test_a_deleted_database_file_is_refused_until_a_restart(make_client, db_path) -> None:
    client = make_client()
    assert client.post("/v1/memories/add", json=ADD).status_code == 200
    assert client.app.state.runtime.warmer.idle(30)  # no connection is being opened while the file goes
    db_path.unlink()
    for path, body in (
        ("/v1/memories/add", {**ADD, "request_id": "r2"}),
        ("/v1/memories/search", {"query": "alpha", "user_id": "u", "top_k": 1}),
    ):
        answer = client.post(path, json=body)
        assert answer.status_code == 503, answer.text
        message = answer.json()["error"]["message"]
        assert message.startswith(f"database {db_path.absolute()}: the file was deleted or replaced while the server")
    # /health says so too: a supervisor watching it restarts the server (it answered 200 while all else was a 503)
    for path in ("/health", "/health/"):
        health = client.get(path)
        assert health.status_code == 503  # (unauthenticated: the database's path is not said)
        assert health.json()["error"]["message"] == (
            "the database file was deleted or replaced while the server had it open: restart the server"
        )
    assert not db_path.exists()  # no new, empty file beside the old -wal


def test_a_database_file_replaced_by_a_copy_is_refused(make_client, db_path, tmp_path) -> None:
    client = make_client()
    assert client.post("/v1/memories/add", json=ADD).status_code == 200
    copy = tmp_path / "copy.db"
    shutil.copy(db_path, copy)
    copy.replace(db_path)  # a restore by rename while serving (README: stop the server first)
    answer = client.post("/v1/memories/add", json={**ADD, "request_id": "r2"})
    assert answer.status_code == 503 and "deleted or replaced" in answer.json()["error"]["message"]
    assert client.get("/health").status_code == 503


def _wal_drained(db_path, seconds: float = 10.0) -> bool:
    import os
    import time

    wal = f"{db_path}-wal"
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        if not os.path.exists(wal) or os.path.getsize(wal) == 0:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("notice", ["health", "search"])
def test_noticing_a_replaced_file_drains_the_old_files_log(make_client, db_path, tmp_path, notice) -> None:
    # a probe of round 25: /health (or a search) noticed the replacement but only an Add drained the old file's -wal,
    # still named after the path; a kill -9 then let the next open replay the old file's pages over the new one
    from refind_cli.store import Store

    client = make_client()
    for i in range(20):
        assert client.post("/v1/memories/add", json={**ADD, "request_id": f"r{i}"}).status_code == 200
    assert client.app.state.runtime.warmer.idle(30)  # (a warm-up meeting the change would drain it: not the case)
    assert not _wal_drained(db_path, 0.2)  # the writer's commits wait in the log
    new = tmp_path / "new.db"
    with Store(new, retention_days=None) as store:
        store.add(parse_add({**ADD, "user_id": "v", "request_id": "n1"}))
    new.replace(db_path)  # a restore by rename while serving
    if notice == "health":
        assert client.get("/health").status_code == 503
    else:
        search = {"query": "alpha", "user_id": "u", "top_k": 1}
        assert client.post("/v1/memories/search", json=search).status_code == 503
    assert _wal_drained(db_path)  # … drained into the old file: what a restart opens is the new file alone
    with Store(db_path, retention_days=None) as store:
        assert [m.user_id for m in store.user_messages("v")] == ["v"] and not store.user_messages("u")
