"""The server's contract through FastAPI's TestClient: real app, real SQLite file, real search."""

from __future__ import annotations

import logging
import sqlite3

import pytest

from refind_cli.contract import parse_add, parse_search
from refind_cli.errors import InvalidInput
from refind_cli.store import DAY_MS, Store, system_clock

TOKEN = "s3cret-token"


@pytest.fixture
def client(make_client):
    return make_client()


def add_body(
    request_id="r1", user_id="alice", session_id="s1", contents=("Caroline: I went hiking at Mount Rainier",), **extra
):
    messages = [{"role": "user", "content": c, "timestamp": 1_683_554_160_000 + i} for i, c in enumerate(contents)]
    return {"request_id": request_id, "user_id": user_id, "session_id": session_id, "messages": messages, **extra}


def search(client, query, user_id="alice", top_k=10, **kw):
    return client.post("/v1/memories/search", json={"query": query, "user_id": user_id, "top_k": top_k}, **kw)


# ---- health, shapes, aliases ---------------------------------------------------------------------------------


def test_health_is_exact_and_open_even_with_a_token(make_client):
    client = make_client(token=TOKEN)
    response = client.get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert response.content == b'{"status": "ok"}'  # the contract's text, byte for byte (some compare it raw)
    assert response.headers["content-type"] == "application/json"


def test_add_answers_exactly_the_contract_and_echoes_ids_byte_for_byte(client, db_path):
    body = add_body(request_id="eval:run_abc:conv-26:chunk-0 ", user_id="ユーザー:1", session_id=" s:1")
    body["messages"][0]["content"] = "  Caroline: padded  \n"
    response = client.post("/v1/memories/add", json=body)
    assert response.status_code == 200
    assert response.json() == {
        "success": True,
        "request_id": "eval:run_abc:conv-26:chunk-0 ",
        "user_id": "ユーザー:1",
        "session_id": " s:1",
    }
    with Store(db_path, retention_days=None) as store:  # stored verbatim, committed before the answer
        assert [m.content for m in store.user_messages("ユーザー:1")] == ["  Caroline: padded  \n"]


def test_identical_replay_is_200_and_writes_once_other_payload_is_409(client, db_path):
    assert client.post("/v1/memories/add", json=add_body()).status_code == 200
    again = client.post("/add", json=add_body())
    assert again.status_code == 200 and again.json()["success"] is True
    changed = client.post("/v1/memories/add", json=add_body(contents=("Caroline: something else",)))
    assert changed.status_code == 409
    assert changed.json()["error"]["type"] == "conflict" and "r1" in changed.json()["error"]["message"]
    with Store(db_path, retention_days=None) as store:
        assert store.counts()["requests"] == 1 and store.counts()["messages"] == 1


def test_unknown_fields_are_ignored_and_timestamp_may_be_null_or_absent(client, db_path):
    body = add_body(metadata={"a": 1}, app_id="x", agent_id="y", async_mode=True)
    body["messages"][0]["timestamp"] = None
    body["messages"][0]["name"] = "Caroline"
    body["messages"].append({"role": "assistant", "content": "no timestamp at all"})
    assert client.post("/v1/memories/add", json=body).status_code == 200
    response = client.post(
        "/v1/memories/search",
        json={"query": "hiking", "user_id": "alice", "top_k": 5, "filters": {"x": 1}, "rerank": True},
    )
    assert response.status_code == 200 and response.json()["data"]
    with Store(db_path, retention_days=None) as store:
        assert [m.said_at for m in store.user_messages("alice")] == [None, None]


@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("/v1/memories/add", {"request_id": "r", "session_id": "s", "messages": [{"role": "user", "content": "x"}]}),
        ("/v1/memories/add", add_body(contents=("",))),
        ("/v1/memories/add", {**add_body(), "messages": []}),
        ("/v1/memories/add", {**add_body(), "messages": [{"role": "robot", "content": "x"}]}),
        ("/v1/memories/add", {**add_body(), "messages": [{"role": "user", "content": "x", "timestamp": 50000000000}]}),
        ("/v1/memories/add", ["not", "an", "object"]),
        ("/v1/memories/search", {"query": "q", "user_id": "u", "top_k": 0}),
        ("/v1/memories/search", {"query": "q", "user_id": "u"}),
        ("/v1/memories/search", {"query": "q", "user_id": "u", "top_k": "ten"}),
        ("/v1/memories/search", {"query": "q", "user_id": "u", "top_k": 5, "options": "A"}),
        ("/v1/memories/search", {"query": "", "user_id": "u", "top_k": 5}),
    ],
)
def test_validation_faults_are_422_with_the_same_message_as_the_cli(client, route, body):
    parse = parse_add if route.endswith("add") else parse_search
    with pytest.raises(InvalidInput) as expected:
        parse(body)
    response = client.post(route, json=body)
    assert response.status_code == 422
    assert response.json() == {"error": {"type": "invalid", "message": expected.value.message}}


@pytest.mark.parametrize(
    "raw", [b"", b"{not json", b"\xff\xfe", b"[" * 100_000 + b"]" * 100_000, b'{"top_k": ' + b"1" * 5_000 + b"}"]
)  # past Python's 4,300-digit int limit
def test_a_body_that_is_not_json_is_a_422_not_a_crash(client, raw):
    for route in ("/v1/memories/add", "/v1/memories/search"):
        response = client.post(route, content=raw, headers={"content-type": "application/json"})
        assert response.status_code == 422
        assert response.json()["error"]["type"] == "invalid"


def test_unknown_route_and_wrong_method_use_the_one_error_shape(client):
    missing = client.get("/v1/nothing")
    assert missing.status_code == 404 and set(missing.json()["error"]) == {"type", "message"}
    wrong = client.get("/v1/memories/add")
    assert wrong.status_code == 405 and set(wrong.json()["error"]) == {"type", "message"}
    assert wrong.headers["allow"] == "POST"  # RFC 9110: a 405 names the methods that are allowed
    assert "GET" in client.request("TRACE", "/health").headers["allow"]


def test_aliases_answer_like_the_routes_and_stay_out_of_openapi(client):
    assert client.post("/add", json=add_body()).json() == client.post("/v1/memories/add", json=add_body()).json()
    assert (
        client.post("/search", json={"query": "hiking", "user_id": "alice", "top_k": 3}).json()
        == search(client, "hiking", top_k=3).json()
    )
    paths = client.get("/openapi.json").json()["paths"]
    assert set(paths) == {"/health", "/v1/memories/add", "/v1/memories/search", "/v1/memories"}
    assert paths["/v1/memories/add"]["post"]["requestBody"]["content"]["application/json"]["schema"]["required"] == [
        "request_id",
        "user_id",
        "session_id",
        "messages",
    ]


# ---- search --------------------------------------------------------------------------------------------------


def test_search_of_an_unknown_user_is_an_empty_list(client):
    client.post("/v1/memories/add", json=add_body())
    response = search(client, "hiking", user_id="nobody")
    assert response.status_code == 200 and response.json() == {"data": []}


def test_search_never_returns_more_than_top_k_and_every_item_is_well_formed(client):
    contents = [f"Caroline: hiking trip number {i} to the mountains" for i in range(20)]
    for start in range(0, 20, 5):
        client.post("/v1/memories/add", json=add_body(request_id=f"r{start}", contents=contents[start : start + 5]))
    for top_k in (1, 3, 7, 100):
        response = search(client, "hiking mountains", top_k=top_k)
        assert response.headers["content-type"].startswith("application/json")
        data = response.json()["data"]
        assert 1 <= len(data) <= top_k
        for item in data:
            assert isinstance(item["id"], str) and item["id"]
            assert isinstance(item["content"], str) and item["content"].strip()
            assert isinstance(item["score"], float) and isinstance(item["created_at"], str)
        assert len({item["id"] for item in data}) == len(data)


def test_a_search_sees_every_add_acknowledged_before_it(client):
    for i in range(15):
        word = f"zebra{i}quokka"
        body = add_body(request_id=f"r{i}", contents=(f"Caroline: I saw a {word}",))
        added = client.post("/v1/memories/add", json=body)
        assert added.status_code == 200
        data = search(client, word, top_k=3).json()["data"]
        assert data and word in data[0]["content"]


def test_one_users_memory_never_reaches_another_users_search(client):
    client.post("/v1/memories/add", json=add_body(user_id="alice", contents=("Alice: my pin is marmalade42",)))
    client.post("/v1/memories/add", json=add_body(user_id="bob", contents=("Bob: I like tea",)))
    assert "marmalade42" in search(client, "marmalade42 pin", user_id="alice").text
    bob = search(client, "marmalade42 pin tea", user_id="bob")
    assert bob.status_code == 200 and "marmalade42" not in bob.text


def test_options_are_used_by_the_search(client):
    client.post("/v1/memories/add", json=add_body(contents=("Caroline: the capybara lives in Brazil",)))
    # (not "which animal": a capybara is a kind of animal, which the search finds by itself — kinds.py)
    assert search(client, "which one was it").json()["data"] == []
    response = client.post(
        "/v1/memories/search",
        json={"query": "which one was it", "user_id": "alice", "top_k": 5, "options": ["capybara", "wombat"]},
    )
    assert "capybara" in response.json()["data"][0]["content"]


def test_messages_past_retention_are_never_served(make_client, db_path):
    long_ago = system_clock() - 3 * DAY_MS
    with Store(db_path, clock=lambda: long_ago, retention_days=None) as old:
        old.add(parse_add(add_body(request_id="old", contents=("Caroline: ancient llama story",))))
    client = make_client(retention_days=2.0)
    client.post("/v1/memories/add", json=add_body(request_id="new", contents=("Caroline: fresh llama story",)))
    data = search(client, "llama story").json()["data"]
    assert data and all("ancient" not in item["content"] for item in data)


# ---- auth ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": f"Bearer {TOKEN}"},
        {"Authorization": f"Token {TOKEN}"},
        {"X-Api-Key": TOKEN},
        {"authorization": f"bearer {TOKEN}"},
    ],
)
def test_each_token_header_is_accepted(make_client, headers):
    client = make_client(token=TOKEN)
    assert client.post("/v1/memories/add", json=add_body(), headers=headers).status_code == 200
    assert search(client, "hiking", headers=headers).status_code == 200


def test_a_token_configured_with_surrounding_whitespace_still_matches(make_client):
    """A token read from an env file keeps its newline; headers never carry one, so it must not count."""
    client = make_client(token=f"  {TOKEN}\n")
    assert client.post("/v1/memories/add", json=add_body(), headers={"X-Api-Key": TOKEN}).status_code == 200
    assert client.post("/v1/memories/add", json=add_body(), headers={"X-Api-Key": "wrong"}).status_code == 401


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": TOKEN},
        {"X-Api-Key": TOKEN + "x"},
        {"Authorization": "Bearer "},
    ],
)
def test_a_missing_or_wrong_token_is_401_and_nothing_is_stored(make_client, db_path, headers):
    client = make_client(token=TOKEN)
    for route in ("/v1/memories/add", "/add"):
        response = client.post(route, json=add_body(), headers=headers)
        assert response.status_code == 401
        assert response.json()["error"]["type"] == "unauthorized"
    assert search(client, "hiking", headers=headers).status_code == 401
    with Store(db_path, retention_days=None) as store:
        assert store.counts()["requests"] == 0


# ---- limits, errors, logs --------------------------------------------------------------------------------------


def test_a_body_over_the_limit_is_413_by_header_and_by_stream(make_client, db_path):
    client = make_client(max_body_bytes=4096)
    big = add_body(contents=("x" * 5000,))
    response = client.post("/v1/memories/add", json=big)
    assert response.status_code == 413 and response.json()["error"]["type"] == "too_large"

    import json

    raw = json.dumps(big).encode()
    chunks = (raw[i : i + 1000] for i in range(0, len(raw), 1000))  # no Content-Length: chunked
    streamed = client.post("/v1/memories/add", content=chunks, headers={"content-type": "application/json"})
    assert streamed.status_code == 413
    assert client.post("/v1/memories/add", json=add_body(contents=("x" * 3000,))).status_code == 200
    with Store(db_path, retention_days=None) as store:
        assert store.counts()["requests"] == 1


def test_an_unexpected_failure_is_a_json_500_without_traceback_or_content(client, db_path, caplog):
    with sqlite3.connect(db_path) as conn:
        conn.execute("DROP TABLE messages")
    caplog.set_level(logging.INFO)
    response = client.post("/v1/memories/add", json=add_body(contents=("Caroline: secret-pelican",)))
    assert response.status_code == 500
    assert response.json()["error"]["type"] == "internal"
    assert "Traceback" not in response.text and "secret-pelican" not in response.text
    assert "secret-pelican" not in caplog.text and "Traceback" not in caplog.text
    # the server keeps answering
    assert client.get("/health").json() == {"status": "ok"}


def test_unambiguous_input_is_stored_and_logged_without_content(client, db_path, caplog):
    """Seconds, digits and a big top_k are read, not refused (a 422 loses the memory); the log names fields only."""
    caplog.set_level(logging.INFO)
    body = add_body(contents=("Caroline: a-private-ferret",))
    body["messages"][0]["timestamp"] = 1_683_554_160
    assert client.post("/v1/memories/add", json=body).status_code == 200
    second = add_body(request_id="r-digits", contents=("Caroline: kept-too",))
    second["messages"][0]["timestamp"] = "1683554160000"
    assert client.post("/v1/memories/add", json=second).status_code == 200
    with Store(db_path) as store:
        assert {m.said_at for m in store.user_messages("alice")} == {1_683_554_160_000}
    found = client.post("/v1/memories/search", json={"query": "ferret", "user_id": "alice", "top_k": 5000})
    assert found.status_code == 200 and found.json()["data"]
    notes = [r.getMessage() for r in caplog.records if r.name == "refind.server" and "normalized" in r.getMessage()]
    assert notes == [
        "add normalized 1 value(s): messages[0].timestamp (seconds ×1000)",
        "add normalized 1 value(s): messages[0].timestamp (digits)",
        "search normalized: top_k (clamped)",
    ]
    assert "ferret" not in caplog.text and "1683554160" not in caplog.text


def test_an_add_of_many_normalized_values_logs_one_short_line(client, caplog):
    caplog.set_level(logging.INFO)
    body = add_body(request_id="r-many", contents=tuple(f"Caroline: line {i}" for i in range(1_000)))
    for i, message in enumerate(body["messages"]):
        message["timestamp"] = 1_683_554_160 + i
    assert client.post("/v1/memories/add", json=body).status_code == 200
    notes = [r.getMessage() for r in caplog.records if r.name == "refind.server" and "normalized" in r.getMessage()]
    assert notes == [
        "add normalized 1000 value(s): "
        + "; ".join(f"messages[{i}].timestamp (seconds ×1000)" for i in range(5))
        + "; and 995 more"
    ]


def test_one_access_line_per_request_and_no_content_query_or_token_in_logs(make_client, caplog):
    caplog.set_level(logging.DEBUG)
    client = make_client(token=TOKEN)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    client.post("/v1/memories/add", json=add_body(contents=("Caroline: private-walrus-content",)), headers=headers)
    client.post(
        "/v1/memories/search", json={"query": "secret-query-otter", "user_id": "alice", "top_k": 3}, headers=headers
    )
    client.post("/v1/memories/search", json={"query": "q", "user_id": "alice", "top_k": 0}, headers=headers)
    client.get("/health?probe=private-probe")
    access = [r.getMessage() for r in caplog.records if r.name == "refind.access"]
    assert [line.rsplit(" ", 1)[0] for line in access] == [
        "POST /v1/memories/add 200",
        "POST /v1/memories/search 200",
        "POST /v1/memories/search 422",
        "GET /health 200",
    ]
    assert all(line.endswith("ms") for line in access)
    server_side = "\n".join(r.getMessage() for r in caplog.records if not r.name.startswith("httpx"))
    for secret in ("private-walrus-content", "secret-query-otter", TOKEN, "private-probe"):
        assert secret not in server_side


# ---- forget and retention --------------------------------------------------------------------------------------


def test_forget_removes_a_request_a_session_or_a_user_and_the_next_search_sees_it(make_client, db_path):
    client = make_client(token=TOKEN)
    h = {"X-Api-Key": TOKEN}
    client.post("/add", json=add_body(request_id="a1", session_id="s1", contents=("Caroline: kayak trip",)), headers=h)
    client.post("/add", json=add_body(request_id="a2", session_id="s2", contents=("Caroline: kayak race",)), headers=h)
    client.post("/add", json=add_body(request_id="a3", session_id="s2", contents=("Caroline: kayak club",)), headers=h)
    before = search(client, "kayak", headers=h).text  # the user's index is now cached
    assert all(word in before for word in ("trip", "race", "club"))

    assert client.delete("/v1/memories", params={"user_id": "alice", "request_id": "a1"}).status_code == 401
    gone = client.delete("/v1/memories", params={"user_id": "alice", "request_id": "a1"}, headers=h)
    assert gone.status_code == 200 and gone.json()["scope"] == "request" and gone.json()["messages"] == 1
    after = search(client, "kayak", headers=h).text
    assert "trip" not in after and "race" in after
    session = client.delete("/v1/memories", params={"user_id": "alice", "session_id": "s2"}, headers=h)
    assert session.status_code == 200 and session.json()["messages"] == 2
    assert search(client, "kayak", headers=h).json() == {"data": []}

    again = client.delete("/v1/memories", params={"user_id": "alice", "session_id": "s2"}, headers=h)
    assert again.status_code == 404 and again.json()["error"]["type"] == "not_found"
    both = client.delete("/v1/memories", params={"user_id": "alice", "session_id": "s", "request_id": "r"}, headers=h)
    assert both.status_code == 422
    assert client.delete("/v1/memories", headers=h).status_code == 422
    replay = client.post(
        "/add", json=add_body(request_id="a1", session_id="s1", contents=("Caroline: kayak trip",)), headers=h
    )
    assert replay.status_code == 410  # a forgotten request is not stored again by a retry
    with Store(db_path, retention_days=None) as store:
        assert store.counts()["messages"] == 0


def test_the_retention_sweep_deletes_expired_rows_while_serving(make_client, db_path):
    import time

    long_ago = system_clock() - 3 * DAY_MS
    with Store(db_path, clock=lambda: long_ago, retention_days=None) as old:
        old.add(parse_add(add_body(request_id="old", contents=("Caroline: ancient llama story",))))
    client = make_client(retention_days=2.0, expire_interval_s=0.1)
    client.post("/v1/memories/add", json=add_body(request_id="new", contents=("Caroline: fresh llama story",)))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with Store(db_path, retention_days=None) as store:
            remaining = [m.request_id for m in store.user_messages("alice")]
        if remaining == ["new"]:
            break
        time.sleep(0.05)
    assert remaining == ["new"]


def test_half_an_emoji_is_stored_as_a_replacement_character_and_an_id_holding_one_is_a_precise_422(client, caplog):
    """The platform cuts messages over ~8,000 characters; a cut by UTF-16 units leaves half an emoji, escaped in the
    JSON. A 422 lost the whole Add (the platform does not retry one): the text is stored with U+FFFD, and logged."""
    json_type = {"content-type": "application/json"}
    cut = (
        b'{"request_id": "r", "user_id": "u", "session_id": "s", "messages": [{"role": "user", "content": '
        b'"I live in Lisbon"}, {"role": "assistant", "content": "cut here \\ud83d"}, {"role": "assistant", '
        b'"content": "\\ude00 and on"}]}'
    )
    with caplog.at_level(logging.INFO, logger="refind.server"):
        assert client.post("/v1/memories/add", content=cut, headers=json_type).status_code == 200
    assert "add normalized 2 value(s): messages[1].content (half a character as U+FFFD); messages[2].content" in (
        caplog.text
    )
    found = [r["content"] for r in search(client, "Lisbon cut here and on", user_id="u", top_k=5).json()["data"]]
    assert "I live in Lisbon" in "".join(found) and "cut here \ufffd" in "".join(found)
    assert "\ufffd and on" in "".join(found)
    pair = cut.replace(b'"r"', b'"r2"').replace(b"\\ud83d", b"\\ud83d\\ude00")
    assert client.post("/v1/memories/add", content=pair, headers=json_type).status_code == 200
    lone_id = cut.replace(b'"user_id": "u"', b'"user_id": "u\\udc00"')
    response = client.post("/v1/memories/add", content=lone_id, headers=json_type)
    assert response.status_code == 422
    assert response.json()["error"]["message"].startswith("user_id: contains an unpaired UTF-16 surrogate (\\udc00)")
    lone_query = b'{"user_id": "u", "query": "Lisbon \\ud800", "top_k": 5}'
    response = client.post("/v1/memories/search", content=lone_query, headers=json_type)
    assert response.status_code == 422
    assert response.json()["error"]["message"].startswith("query: contains an unpaired UTF-16 surrogate (\\ud800)")
    assert client.head("/health").status_code == 200


def test_a_server_on_an_in_memory_database_is_refused() -> None:
    from pathlib import Path

    from refind_cli.server import ServerSettings, create_app

    # the writer and every search connection each had their own: Adds were acknowledged and never found
    with pytest.raises(InvalidInput, match="^--db: ':memory:' is one connection's database, and the server opens"):
        create_app(ServerSettings(db=Path(":memory:"), mode="bm25", expire_interval_s=0))


def test_a_number_past_4300_digits_is_refused_in_refind_s_words(client):
    raw = b'{"query": "q", "user_id": "u", "top_k": ' + b"1" * 5_000 + b"}"
    response = client.post("/v1/memories/search", content=raw, headers={"content-type": "application/json"})
    assert response.json()["error"]["message"] == "request: the body holds a number of more than 4,300 digits"


def test_a_timestamp_note_is_logged_as_what_was_done() -> None:
    # a probe of round 24: a fraction dropped or a placeholder read as no said-at was logged "(clamped)"
    from refind_cli.server.app import _fields

    notes = (
        "messages[0].timestamp: 1700000000000.5 read as 1700000000000 ms (the fraction of a millisecond dropped)",
        "messages[1].timestamp: 0 read as no said-at (a placeholder for an unknown time)",
        "top_k: 5000 clamped to 1000",
    )
    assert _fields(notes) == [
        "messages[0].timestamp (fraction dropped)",
        "messages[1].timestamp (no said-at)",
        "top_k (clamped)",
    ]
