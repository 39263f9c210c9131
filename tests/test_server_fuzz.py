"""Property-based fuzzing of the routes from the app's own OpenAPI schema (schemathesis + hypothesis).

Add, Search and forget, with positive cases (valid per the schema) and negative ones (each breaking it somewhere):
never a 5xx, always the one error shape, never more than top_k items.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode

from refind_cli.server import ServerSettings, create_app

pytestmark = pytest.mark.slow  # subprocesses, real servers or fuzzing: `make test-fast` skips them


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=lambda m: m.value)
@pytest.mark.parametrize(
    ("path", "method"), [("/v1/memories/add", "POST"), ("/v1/memories/search", "POST"), ("/v1/memories", "DELETE")]
)
def test_no_generated_input_makes_a_server_error(db_path, path, method, mode):
    app = create_app(  # schemathesis calls the app as Host "testserver"
        ServerSettings(db=db_path, retention_days=None, mode="bm25", expire_interval_s=0, allow_hosts=("testserver",))
    )
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operation = schema[path][method]
    seen = []

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def check(case):
        response = case.call()
        seen.append(response.status_code)
        assert response.status_code < 500, (response.status_code, response.text)
        body = response.json()
        if response.status_code == 200:
            if method == "DELETE":
                assert body["success"] is True and body["user_id"] == case.query["user_id"]
            elif path.endswith("search"):
                assert len(body["data"]) <= case.body["top_k"]
            else:
                assert body["success"] is True and body["request_id"] == case.body["request_id"]
        else:
            assert set(body["error"]) == {"type", "message"} and body["error"]["message"]

    check()
    if mode is GenerationMode.POSITIVE and method == "POST":
        assert 200 in seen  # the schema's valid bodies are accepted, not merely "not 5xx"


def test_any_text_in_any_field_is_stored_or_refused_never_a_server_error(db_path):
    """Hypothesis over the whole of Unicode, lone surrogates included (JSON can carry them as \\ud800 escapes)."""
    import json

    from fastapi.testclient import TestClient
    from hypothesis import strategies as st

    client = TestClient(
        create_app(ServerSettings(db=db_path, retention_days=None, mode="bm25", expire_interval_s=0)),
        raise_server_exceptions=False,
        base_url="http://127.0.0.1",
    )
    JSON = {"content-type": "application/json"}
    surrogate = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF, blacklist_categories=())
    text = st.lists(st.one_of(st.characters(blacklist_categories=()), surrogate), min_size=1, max_size=40).map(
        "".join
    )  # st.text() never yields a surrogate

    @given(rid=text, uid=text, content=text)
    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def check(rid, uid, content):
        message = {"role": "user", "content": content}
        body = {"request_id": rid, "user_id": uid, "session_id": "s", "messages": [message]}
        raw = json.dumps(body).encode()  # ensure_ascii: a lone surrogate travels as a \\udxxx escape
        added = client.post("/v1/memories/add", content=raw, headers=JSON)
        assert added.status_code in (200, 409, 422), added.text
        found = client.post(
            "/v1/memories/search", content=json.dumps({"query": content, "user_id": uid, "top_k": 5}), headers=JSON
        )
        assert found.status_code in (200, 422), found.text

    check()
