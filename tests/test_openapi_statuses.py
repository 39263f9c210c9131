"""/openapi.json documents every status the contract's routes answer, so a client generated from it (or a
schemathesis run against a live server) does not meet an undocumented 410 or 415."""

from __future__ import annotations

JSON = {"content-type": "application/json"}


def test_every_status_the_routes_answer_is_documented(make_client) -> None:
    client = make_client()
    add = {"request_id": "r", "user_id": "u", "session_id": "s", "messages": [{"role": "user", "content": "hi"}]}
    other = {**add, "messages": [{"role": "user", "content": "changed"}]}
    search = {"query": "hi", "user_id": "u", "top_k": 1}
    answered = {
        ("/v1/memories/add", "post"): [
            client.post("/v1/memories/add", json=add).status_code,
            client.post("/v1/memories/add", json=other).status_code,
            client.post("/v1/memories/add", json={**add, "messages": []}).status_code,
            client.post("/v1/memories/add", content=b"{}", headers={"content-type": "text/plain"}).status_code,
            client.post("/v1/memories/add", json=add, headers={"origin": "http://elsewhere.example"}).status_code,
        ],
        ("/v1/memories/search", "post"): [
            client.post("/v1/memories/search", json=search).status_code,
            client.post("/v1/memories/search", json={**search, "top_k": 0}).status_code,
            client.post("/v1/memories/search", content=b"{}", headers={"content-type": "text/plain"}).status_code,
        ],
    }
    assert client.delete("/v1/memories", params={"user_id": "u", "request_id": "r"}).status_code == 200
    answered[("/v1/memories/add", "post")].append(client.post("/v1/memories/add", json=add).status_code)
    assert answered == {
        ("/v1/memories/add", "post"): [200, 409, 422, 415, 403, 410],
        ("/v1/memories/search", "post"): [200, 422, 415],
    }
    paths = client.get("/openapi.json").json()["paths"]
    for (path, method), statuses in answered.items():
        documented = paths[path][method]["responses"]
        assert [s for s in statuses if str(s) not in documented] == [], path
