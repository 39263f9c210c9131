"""The database file deleted or replaced under a running server: refused (503, retried), never acknowledged into a
file a restart does not see, and never a new file created beside the old one's -wal."""

from __future__ import annotations

import shutil

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
