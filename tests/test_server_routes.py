"""The contract's POST routes answered straight from ASGI (server/routes.py): the same answers as FastAPI's routes,
and everything else still goes to FastAPI."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from refind_cli.server import routes
from refind_cli.server.app import ServerSettings, create_app

TOKEN = "routes-token"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}


@pytest.fixture
def client(tmp_path):
    with TestClient(create_app(ServerSettings(db=tmp_path / "r.db", retention_days=None, token=TOKEN))) as c:
        yield c


def _add(client: TestClient, path: str = "/v1/memories/add", content: str = "we paddled the kayak") -> object:
    body = {"request_id": "r1", "user_id": "u", "session_id": "s", "messages": [{"role": "user", "content": content}]}
    return client.post(path, headers=AUTH, content=json.dumps(body))


def test_add_and_search_never_reach_fastapi_s_router_yet_answer_as_documented(client, monkeypatch):
    routed: list[str] = []
    router = client.app.router
    original = router.__call__

    async def spy(scope, receive, send):  # FastAPI's router: every route it answers passes here
        routed.append(f"{scope['method']} {scope['path']}")
        await original(scope, receive, send)

    monkeypatch.setattr(type(router), "__call__", lambda self, *a: spy(*a))
    assert _add(client).json() == {"success": True, "request_id": "r1", "user_id": "u", "session_id": "s"}
    assert _add(client, "/add").status_code == 200  # an identical replay, through the alias
    found = client.post("/search", headers=AUTH, content=json.dumps({"query": "kayak", "user_id": "u", "top_k": 3}))
    assert found.headers["content-type"] == "application/json"
    assert [item["content"] for item in found.json()["data"]] == ["user: we paddled the kayak"]
    assert routed == []
    assert client.get("/v1/memories/search", headers=AUTH).status_code == 405  # any other method: FastAPI's
    assert routed == ["GET /v1/memories/search"]
    assert "/v1/memories/search" in client.app.openapi()["paths"]  # still documented


def test_refusals_on_the_direct_routes_read_as_the_app_s_error_handlers_write_them(client):
    conflict = _add(client), _add(client, content="another text")
    assert conflict[1].status_code == 409 and conflict[1].json()["error"]["type"] == "conflict"
    bad = client.post("/v1/memories/search", headers=AUTH, content=b"{not json")
    assert bad.status_code == 422 and bad.json()["error"]["message"].startswith("request: the body is not valid JSON")
    unauthorized = client.post("/search", headers={"Content-Type": "application/json"}, content=b"{}")
    assert unauthorized.status_code == 401 and unauthorized.headers["www-authenticate"] == "Bearer"


def test_a_body_is_read_to_its_end_and_a_hang_up_before_it_is_a_client_disconnect():
    import asyncio

    from starlette.requests import ClientDisconnect

    seen: list[bytes] = []

    async def add(body: bytes) -> dict:
        seen.append(body)
        return {"success": True}

    async def search(body: bytes) -> bytes:
        return b"{}"

    direct = routes.ContractRoutes(None, add=add, search=search, errors=lambda exc, scope: None)
    scope = {"type": "http", "method": "POST", "path": "/add", "headers": [], "query_string": b""}
    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    messages = iter(
        [
            {"type": "http.request", "body": b'{"a":', "more_body": True},
            {"type": "http.request", "body": b"1}", "more_body": False},
        ]
    )

    async def receive():
        return next(messages)

    asyncio.run(direct(scope, receive, send))
    assert seen == [b'{"a":1}']
    assert sent[0]["status"] == 200
    cut = iter([{"type": "http.request", "body": b"{", "more_body": True}, {"type": "http.disconnect"}])

    async def hang_up():
        return next(cut)

    with pytest.raises(ClientDisconnect):
        asyncio.run(direct(scope, hang_up, send))
    assert seen == [b'{"a":1}']  # nothing reached add


def test_a_contract_path_with_a_trailing_slash_is_the_same_route_and_nothing_redirects(client):
    # a POST to "/v1/memories/add/" got a 307 with an empty body: a client not following redirects (httpx's default)
    # took the Add for a failure the platform does not retry (found by a server probe)
    assert _add(client, "/v1/memories/add/").json()["success"] is True
    assert _add(client, "/add/").status_code == 200  # an identical replay
    for path in ("/v1/memories/search/", "/search/"):
        found = client.post(path, headers=AUTH, content=json.dumps({"user_id": "u", "query": "kayak", "top_k": 3}))
        assert found.status_code == 200 and "kayak" in found.json()["data"][0]["content"]
    other = client.get("/v1/memories/add/", headers=AUTH, follow_redirects=False)
    assert other.status_code in (404, 405) and other.json()["error"]


def test_forget_with_a_trailing_slash_deletes_as_without_it(client):
    # DELETE /v1/memories/ answered 404 not_found — the contract's "nothing stored in that scope" — and deleted
    # nothing: a client took the user's memory for gone while it stayed searchable (found by a probe)
    assert _add(client, content="tess keeps a kiwi").json()["success"] is True
    gone = client.delete("/v1/memories/", params={"user_id": "u"}, headers=AUTH, follow_redirects=False)
    assert gone.status_code == 200, gone.text
    assert gone.json()["success"] is True and gone.json()["messages"] == 1, gone.json()
    found = client.post(
        "/v1/memories/search", headers=AUTH, content=json.dumps({"user_id": "u", "query": "kiwi", "top_k": 3})
    )
    assert found.status_code == 200 and found.json()["data"] == []
    again = client.delete("/v1/memories/", params={"user_id": "u"}, headers=AUTH)
    assert again.status_code == 404 and again.json()["error"]["type"] == "not_found"  # now truly nothing in scope
    paths = client.get("/openapi.json", headers=AUTH).json()["paths"]
    assert "/v1/memories" in paths and "/v1/memories/" not in paths  # documented once


def test_health_with_a_trailing_slash_answers_without_a_token(client):
    # it was a redirect to /health; with redirects off it would be a 404 (401 with a token): a probe broke (review)
    for method in ("GET", "HEAD"):
        answer = client.request(method, "/health/", follow_redirects=False)
        assert answer.status_code == 200, (method, answer.status_code)
    assert client.get("/health/").json() == {"status": "ok"}
