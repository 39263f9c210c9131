"""Item 15: `refind export --output DIR` is one error line, and `refind serve --workers` never puts the token itself
into its workers' environment."""

from __future__ import annotations

import json

from refind_cli.contract import parse_add
from refind_cli.server.app import SETTINGS_ENV, ServerSettings, settings_to_env
from refind_cli.store import Store

TOKEN = "workers-token-0b7d1e"


def test_export_to_a_folder_is_one_error_line(cli, db_path, tmp_path) -> None:
    with Store(db_path) as store:
        body = {
            "request_id": "r",
            "user_id": "alice",
            "session_id": "s",
            "messages": [{"role": "user", "content": "hi"}],
        }
        store.add(parse_add(body))
    folder = tmp_path / "out"
    folder.mkdir()
    result = cli("export", "--user", "alice", "--output", str(folder))
    assert result.exit_code == 2
    assert f"--output: {folder} is a folder" in result.output and "Traceback" not in result.output
    assert list(folder.iterdir()) == []


def test_workers_receive_the_token_hash_not_the_token(db_path, monkeypatch) -> None:
    from fastapi.testclient import TestClient

    from refind_cli.server import app_from_env

    env = settings_to_env(ServerSettings(db=db_path, token=TOKEN, retention_days=None, expire_interval_s=0))
    assert TOKEN not in env
    monkeypatch.setenv(SETTINGS_ENV, env)
    with TestClient(app_from_env(), base_url="http://127.0.0.1") as worker:  # a worker built from that environment
        assert worker.get("/v1/memories", params={"user_id": "u"}).status_code == 401
        ok = worker.delete("/v1/memories", params={"user_id": "u"}, headers={"Authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 404  # authorised: nothing stored for u
    assert json.loads(env)["token"] is None
