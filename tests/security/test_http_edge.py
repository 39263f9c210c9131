"""Items 2, 4, 8, 11, 14 and 15 at the HTTP edge, through the real app (FastAPI TestClient, a real SQLite file),
and issue 11's "401 before routing"."""

from __future__ import annotations

import json
import logging

import pytest

from refind_cli import contract
from refind_cli.errors import InvalidInput
from refind_cli.server import ServerSettings, create_app

TOKEN = "edge-token-5ce1"
LOOPBACK = "http://127.0.0.1:8000"


def add_body(request_id: str = "r1", user_id: str = "alice", content: str = "Caroline: I adopted a cat") -> dict:
    return {
        "request_id": request_id,
        "user_id": user_id,
        "session_id": "s1",
        "messages": [{"role": "user", "content": content}],
    }


def stored(client, user_id: str = "alice") -> list:
    response = client.post("/v1/memories/search", json={"query": "cat", "user_id": user_id, "top_k": 5})
    assert response.status_code == 200
    return response.json()["data"]


# ---- item 2: cross-site writes and DNS rebinding without a token -------------------------------------------------


def test_a_cross_site_text_plain_write_is_refused_and_stores_nothing(make_client):
    client = make_client()
    import json

    response = client.post(
        "/v1/memories/add",
        content=json.dumps(add_body()),
        headers={"Content-Type": "text/plain", "Origin": "https://evil.example"},
    )
    assert response.status_code == 403
    assert "Origin 'https://evil.example'" in response.json()["error"]["message"]
    # the same page without an Origin header (some browsers omit it): the content type alone refuses it
    plain = client.post("/v1/memories/add", content=json.dumps(add_body()), headers={"Content-Type": "text/plain"})
    assert plain.status_code == 415
    assert plain.json()["error"]["message"] == "Content-Type 'text/plain' refused: send the body as application/json"
    assert stored(client) == []


def test_a_rebound_host_name_gets_no_data(make_client):
    make_client().post("/v1/memories/add", json=add_body())
    rebound = make_client(base_url="http://rebind.evil.example:8000")
    response = rebound.post("/v1/memories/search", json={"query": "cat", "user_id": "alice", "top_k": 5})
    assert response.status_code == 403
    assert "Host 'rebind.evil.example'" in response.json()["error"]["message"]
    assert "cat" not in response.text
    assert rebound.get("/health").status_code == 200  # liveness stays open to any name


def test_loopback_names_and_allowed_hosts_are_served(make_client):
    for base in ("http://localhost:8000", "http://[::1]:8000", LOOPBACK):
        assert make_client(base_url=base).post("/v1/memories/add", json=add_body()).status_code == 200
    same_origin = make_client().post("/v1/memories/add", json=add_body(), headers={"Origin": "http://localhost:8000"})
    assert same_origin.status_code == 200
    named = make_client(base_url="http://memory.lan:8000", allow_hosts=("memory.lan",))
    assert named.post("/v1/memories/add", json=add_body()).status_code == 200
    assert make_client(base_url="http://x.example", allow_hosts=("*",)).post("/v1/memories/add", json=add_body())


def test_with_a_token_the_browser_rules_give_way_to_the_token(make_client):
    client = make_client(base_url="http://memory.example", token=TOKEN)
    ok = client.post("/v1/memories/add", json=add_body(), headers={"X-Api-Key": TOKEN, "Origin": "https://app.example"})
    assert ok.status_code == 200


# ---- issue 11 and item 15: the token is checked before routing -----------------------------------------------


@pytest.mark.parametrize("path", ["/no/such/route", "/docs", "/redoc", "/openapi.json", "/v1/memories/add"])
def test_with_a_token_every_path_but_health_answers_401_without_it(make_client, path):
    client = make_client(token=TOKEN)
    response = client.get(path)
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "unauthorized"
    assert "swagger" not in response.text.lower()
    assert client.get(path, headers={"Authorization": f"Bearer {TOKEN}"}).status_code != 401
    assert client.get("/health").status_code == 200


# ---- item 11: a blank token -------------------------------------------------------------------------------------


def test_a_blank_token_is_refused_not_served_without_auth(db_path):
    with pytest.raises(InvalidInput, match="token is blank"):
        create_app(ServerSettings(db=db_path, token="   "))


def test_serve_refuses_a_blank_token_variable(cli, db_path, monkeypatch):
    from refind_cli.server import app as server

    def never(*args, **kwargs):  # the server must not start: fail loudly if it would
        raise AssertionError("serve started with a blank token")

    monkeypatch.setattr(server, "run", never)
    monkeypatch.setenv("REFIND_SERVER_TOKEN", "   ")
    result = cli("serve", "--mode", "bm25")
    assert result.exit_code == 2
    assert "REFIND_SERVER_TOKEN is blank" in result.output


@pytest.mark.parametrize("token", ["pässwörd", "tab\tinside", "s3cret\x1b"])
def test_a_token_no_header_can_carry_is_refused_at_startup(cli, db_path, monkeypatch, token):
    # a UTF-8 header is read as latin-1: a non-ASCII token matched no request, so every request was a 401
    from refind_cli.server import app as server

    monkeypatch.setattr(server, "run", lambda cfg, **kwargs: server.create_app(cfg))  # builds the app, serves nothing
    monkeypatch.setenv("REFIND_SERVER_TOKEN", token)
    result = cli("serve", "--mode", "bm25")
    assert result.exit_code == 2, result.output
    assert "the server token must be printable ASCII" in result.output and token.strip() not in result.output


# ---- item 4: memory caps -------------------------------------------------------------------------------------------


def test_an_add_over_the_message_limit_is_422_naming_the_limit(make_client):
    client = make_client()
    body = add_body()
    body["messages"] = [{"role": "user", "content": "x"}] * (contract.MAX_MESSAGES_PER_ADD + 1)
    response = client.post("/v1/memories/add", json=body)
    assert response.status_code == 422
    assert f"over the limit of {contract.MAX_MESSAGES_PER_ADD:,}" in response.json()["error"]["message"]
    body["messages"] = body["messages"][: contract.MAX_MESSAGES_PER_ADD]
    assert client.post("/v1/memories/add", json=body).status_code == 200


def test_a_query_over_the_length_limit_is_422_naming_the_limit(make_client):
    client = make_client()
    long = "cat " * (contract.MAX_QUERY_CHARS // 4 + 1)
    response = client.post("/v1/memories/search", json={"query": long, "user_id": "alice", "top_k": 5})
    assert response.status_code == 422
    assert f"over the limit of {contract.MAX_QUERY_CHARS:,}" in response.json()["error"]["message"]
    spread = {"query": "cat", "options": ["x" * contract.MAX_QUERY_CHARS], "user_id": "alice", "top_k": 5}
    assert make_client().post("/v1/memories/search", json=spread).status_code == 422


# ---- item 8: access-log injection --------------------------------------------------------------------------------


def test_a_path_cannot_forge_a_log_line_or_carry_terminal_escapes(make_client, caplog):
    caplog.set_level(logging.INFO, logger="refind.access")
    client = make_client()
    client.get("/x%0A2026-01-01 INFO refind.access: GET /admin 200%1b[31m")
    lines = [r.getMessage() for r in caplog.records if r.name == "refind.access"]
    assert len(lines) == 1
    assert "\n" not in lines[0] and "\x1b" not in lines[0]
    assert lines[0].startswith("GET /x\\x0a2026-01-01 INFO refind.access: GET /admin 200\\x1b[31m 404 ")


# ---- item 14: duplicate parameters ----------------------------------------------------------------------------


def test_a_duplicate_query_parameter_is_refused(make_client):
    client = make_client()
    client.post("/v1/memories/add", json=add_body(user_id="bob"))
    response = client.delete("/v1/memories", params=[("user_id", "bob"), ("user_id", "BOB")])
    assert response.status_code == 422
    assert response.json()["error"]["message"] == "user_id: given 2 times; send each parameter once"
    assert stored(client, "bob")  # nothing was forgotten


def test_a_misspelt_forget_scope_is_refused_not_read_as_the_whole_user(make_client):
    client = make_client()
    client.post("/v1/memories/add", json=add_body(user_id="bob"))
    for params in ({"user_id": "bob", "session": "s1"}, {"user_id": "bob", "sessionId": "s1"}):
        response = client.delete("/v1/memories", params=params)
        assert response.status_code == 422
        name = next(iter(set(params) - {"user_id"}))
        assert response.json()["error"]["message"] == (
            f"{name}: not a parameter of DELETE /v1/memories (user_id, session_id, request_id); nothing was deleted"
        )
    assert stored(client, "bob")  # nothing was forgotten
    assert client.delete("/v1/memories", params={"user_id": "bob", "session_id": "s1"}).status_code == 200


def test_a_duplicate_json_key_is_refused(make_client):
    client = make_client()
    raw = b'{"request_id": "r1", "user_id": "bob", "user_id": "alice", "session_id": "s", "messages": [{"role": "user", "content": "Caroline: cat"}]}'
    response = client.post("/v1/memories/add", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert response.json()["error"]["message"] == "request: the key 'user_id' appears 2 times in one object"
    assert stored(client) == [] and stored(client, "bob") == []


def test_a_duplicate_key_in_a_replay_line_is_a_line_error(cli, tmp_path):
    path = tmp_path / "log.jsonl"
    good = '{"user_id": "alice", "session_id": "s", "role": "user", "content": "Caroline: cat", "request_id": "r1"}'
    twice = (
        '{"user_id": "bob", "user_id": "alice", "session_id": "s", "role": "user", "content": "x", "request_id": "r2"}'
    )
    path.write_text(good + "\n" + twice + "\n")
    result = cli("add", "--file", str(path), "--quiet")
    assert result.exit_code == 2
    assert f"{path}:2: the key 'user_id' appears 2 times in one object" in result.output
    exported = cli("export", "--user", "alice").stdout
    assert "Caroline: cat" in exported and '"x"' not in exported


def test_the_first_key_given_twice_is_named_with_its_count():
    pairs = [("a", 1), ("b", 1), ("b", 2), ("a", 3), ("a", 4)]
    with pytest.raises(contract.DuplicateKey) as info:
        contract.unique_keys(pairs)
    assert (info.value.key, info.value.count) == ("a", 3)
    assert contract.unique_keys([("a", 1), ("b", 2)]) == {"a": 1, "b": 2}


# ---- a probe of round 17: text that is no Unicode, however it is sent ----------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b'{"request_id": "r1", "user_id": "alice", "session_id": "s1", '
        b'"messages": [{"role": "user", "content": "Caroline: cat \xed\xa0\x80"}]}',  # a surrogate in UTF-8 bytes
        b'{"request_id": "r1\xed\xa0\x80", "user_id": "alice", "session_id": "s1", '
        b'"messages": [{"role": "user", "content": "Caroline: cat"}]}',
        '{"request_id": "r1", "user_id": "alice", "session_id": "s1", '
        '"messages": [{"role": "user", "content": "Caroline: cat"}]}'.encode("utf-16"),  # JSON is UTF-8 (RFC 8259)
    ],
    ids=["content", "request-id", "utf-16"],
)
def test_a_body_that_is_not_utf8_text_is_422_and_stores_nothing(make_client, raw):
    # Checked by hand: json.loads of the bytes (the code before) took each of these, and the Add answered 500.
    client = make_client()
    response = client.post("/v1/memories/add", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert response.json()["error"]["message"] == "request: the body is not UTF-8 text"
    assert stored(client) == []


def test_a_search_for_a_user_id_holding_a_surrogate_in_utf8_bytes_is_422(make_client):
    client = make_client()
    raw = b'{"query": "cat", "user_id": "alice\xed\xa0\x80", "top_k": 5}'
    response = client.post("/v1/memories/search", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 422


def test_a_utf8_byte_order_mark_is_still_read(make_client):
    client = make_client()
    raw = (
        b"\xef\xbb\xbf"
        + b'{"request_id": "r1", "user_id": "alice", "session_id": "s1", "messages": [{"role": "user", "content": "Caroline: I adopted a cat"}]}'
    )
    response = client.post("/v1/memories/add", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text
    assert [item["content"] for item in stored(client)] != []


def test_a_forget_scope_that_is_not_utf8_once_decoded_is_refused(make_client):
    # "%FF" was read as U+FFFD: the DELETE forgot the user "bob\ufffd" though the client never named them
    client = make_client()
    client.post("/v1/memories/add", json=add_body(user_id="bob\ufffd"))
    response = client.delete("/v1/memories?user_id=bob%FF")
    assert response.status_code == 422
    assert response.json()["error"]["message"] == "a query parameter is not UTF-8 text once percent-decoded"
    assert stored(client, "bob\ufffd")  # nothing was forgotten


def test_query_string_bytes_outside_ascii_are_refused():
    from refind_cli.server.guard import query_refusal

    refused = query_refusal("user_id=Zoë".encode())  # Latin-1 would read "ZoÃ«", another user
    assert refused is not None and refused.message.startswith("the query string holds bytes outside ASCII")
    assert query_refusal(b"user_id=Zo%C3%AB") is None
    assert query_refusal(b"user_id=%ED%A0%80") is not None  # a lone surrogate, percent-encoded


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br", "GZIP"])
def test_a_compressed_body_is_415_not_read_as_text(make_client, coding):
    import gzip
    import json as json_module

    client = make_client()
    plain = json_module.dumps(add_body()).encode()
    body = gzip.compress(plain) if coding.lower() == "gzip" else plain  # (a coding named over a plain body: refused)
    headers = {"content-type": "application/json", "content-encoding": coding}
    response = client.post("/v1/memories/add", content=body, headers=headers)
    assert response.status_code == 415
    assert response.json()["error"]["message"] == (
        f"Content-Encoding {coding.lower()!r} refused: send the body uncompressed (identity)"
    )
    assert stored(client) == []
    identity = client.post("/v1/memories/add", content=plain, headers={**headers, "content-encoding": "identity"})
    assert identity.status_code == 200


def test_a_body_of_too_many_json_arrays_is_refused_before_parsing(make_client):
    # a probe of round 17: 32 MiB of "[]," in an ignored field parsed to ~0.75 GB (the in-flight budget counts bytes)
    client = make_client()
    body = add_body()
    raw = json.dumps(body)[:-1] + ', "junk": [' + "[]," * 150_000 + "[]]}"
    response = client.post("/v1/memories/add", content=raw.encode(), headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert response.json()["error"]["message"] == (
        f"request: the body holds 150,005 JSON objects and arrays, over the limit of {contract.MAX_CONTAINERS:,}"
    )  # the request, its messages and their one message, the field and its 150,001 arrays
    assert stored(client) == []
    text = "Caroline: a cat " + "[]{}" * 150_000  # brackets inside a string are text: stored as sent
    assert client.post("/v1/memories/add", json=add_body(content=text)).status_code == 200
    assert any(text in item["content"] for item in stored(client))


def test_a_plus_in_a_forget_scope_is_refused_not_read_as_a_space(make_client):
    # a probe of round 18: "?user_id=bob+test@x.com" was read as a form ("bob test@x.com"): it forgot another user
    client = make_client()
    for user in ("bob+test@x.com", "bob test@x.com"):
        assert client.post("/v1/memories/add", json=add_body(user_id=user)).status_code == 200
    response = client.delete("/v1/memories?user_id=bob+test@x.com")
    assert response.status_code == 422
    assert "percent-encode a plus as %2B and a space as %20" in response.json()["error"]["message"]
    assert stored(client, "bob+test@x.com") and stored(client, "bob test@x.com")  # nothing was forgotten
    response = client.delete("/v1/memories?user_id=bob%2Btest%40x.com")
    assert response.status_code == 200 and response.json()["user_id"] == "bob+test@x.com"
    assert not stored(client, "bob+test@x.com") and stored(client, "bob test@x.com")


def test_a_forget_scope_sent_as_a_body_is_refused_not_widened_to_the_user(make_client):
    # a probe of round 18: the body was not read, and the DELETE forgot every session of the user
    client = make_client()
    assert client.post("/v1/memories/add", json=add_body(user_id="dave")).status_code == 200
    response = client.request(
        "DELETE", "/v1/memories?user_id=dave", json={"session_id": "s1"}, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422 and "not in a body; nothing was deleted" in response.json()["error"]["message"]
    assert stored(client, "dave")
    assert client.delete("/v1/memories?user_id=dave").status_code == 200  # no body: as ever
