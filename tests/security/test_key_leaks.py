"""Item 9: no API key in error text, the stored trace or the database; a custom --api-base never receives the
provider's own key. litellm over real HTTP to the scripted loopback server."""

from __future__ import annotations

import pytest
from helpers import T0, add, agent_cli
from llm_server import Fail

from refind_cli.errors import ModelError
from refind_cli.model import litellm_complete
from refind_cli.planner import agent_search
from refind_cli.redact import redact

PROVIDER_KEY = "sk-proj-REALPROVIDERKEY0123456789abcdef"
BASE_KEY = "local-base-key-7f3a9c21"


@pytest.fixture(autouse=True)
def _keys(monkeypatch):
    monkeypatch.delenv("REFIND_API_BASE", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", PROVIDER_KEY)


def model(llm):
    return litellm_complete("openai/scripted", llm.url, timeout_s=5, retries=0, backoff_s=0.01)


def test_a_custom_base_never_receives_the_provider_key(llm_server, store, monkeypatch):
    add(store, "alice", "s1", ("user", "Caroline: I went hiking", T0))
    llm_server.play('{"thought": "done", "action": "finish_search"}')
    agent_search(store, "alice", "hiking?", top_k=3, model=model(llm_server), model_name="openai/scripted")
    sent = " ".join(str(h.get("Authorization") or h.get("authorization")) for h in llm_server.headers)
    assert PROVIDER_KEY not in sent
    assert "Bearer refind-no-key" in sent  # the placeholder: nothing configured for this base
    monkeypatch.setenv("REFIND_API_KEY", BASE_KEY)
    llm_server.play('{"thought": "done", "action": "finish_search"}')
    agent_search(store, "alice", "hiking?", top_k=3, model=model(llm_server), model_name="openai/scripted")
    assert f"Bearer {BASE_KEY}" in str(llm_server.headers[-1])


def test_a_provider_echoing_the_key_leaks_it_nowhere(llm_server, store, db_path, monkeypatch, cli):
    monkeypatch.setenv("REFIND_API_KEY", BASE_KEY)
    add(store, "alice", "s1", ("user", "Caroline: I went hiking", T0))
    echo = f"invalid request: key {BASE_KEY} / sk-ant-api03-OTHERKEY0123456789abcdef is not allowed here"
    llm_server.play(Fail(400, echo))
    with pytest.raises(ModelError) as caught:
        agent_search(store, "alice", "hiking?", top_k=3, model=model(llm_server), model_name="openai/scripted")
    assert "is not allowed here" in caught.value.message  # the provider's message still reaches the user
    assert BASE_KEY not in caught.value.message and "OTHERKEY" not in caught.value.message
    stored = store.conn.execute("SELECT trace FROM searches").fetchall()
    assert stored and all(BASE_KEY not in t and "OTHERKEY" not in t for (t,) in stored)
    llm_server.play(Fail(400, echo))
    result = agent_cli(cli, llm_server, query="hiking?")
    assert result.exit_code == 5 and "is not allowed here" in result.output
    assert BASE_KEY not in result.output and "OTHERKEY" not in result.output
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw = db_path.read_bytes()
    assert BASE_KEY.encode() not in raw and b"OTHERKEY" not in raw


def test_key_shapes_are_redacted_and_plain_text_is_not():
    assert redact("use Bearer abcdefghijklmnop0123 please") == "use [redacted] please"
    assert redact('{"api_key": "abcd1234efgh"}') == '{"[redacted]"}'
    assert redact("AIzaSyA0123456789abcdefghijklmnopqrstu") == "[redacted]"
    # Stripe's keys join with underscores: "sk_live_…" stayed in the stored query and the trace (a probe)
    assert redact("my stripe key sk_live_51HxYzABCDEFGHIJKLMNOPqrst ok") == "my stripe key [redacted] ok"
    assert redact("rk_test_51HxYzABCDEFGHIJKLMNOP and whsec_0123456789abcdefABCD") == "[redacted] and [redacted]"
    assert redact("sk_live_ is the prefix; task_test_plan stays") == "sk_live_ is the prefix; task_test_plan stays"
    assert redact("the skyline is 4417 m tall, ask-me anything") == "the skyline is 4417 m tall, ask-me anything"


def test_a_key_pasted_into_a_query_is_stored_and_listed_redacted_as_the_trace_is(
    llm_server, store, db_path, monkeypatch, cli
):
    import json

    monkeypatch.setenv("REFIND_API_KEY", BASE_KEY)
    add(store, "alice", "s1", ("user", "Caroline: I went hiking", T0))
    query = f"hiking? my key is {BASE_KEY} and sk-ant-api03-OTHERKEY0123456789abcdef"
    llm_server.play('{"thought": "done", "action": "finish_search"}')
    result = agent_cli(cli, llm_server, "--json", query=query)
    assert result.exit_code == 0, result.output
    (stored,) = store.conn.execute("SELECT query, trace FROM searches").fetchall()
    assert stored[0] == "hiking? my key is [redacted] and [redacted]"  # was the query as typed
    start = next(e for e in json.loads(stored[1]) if e["kind"] == "start")
    assert start["data"]["question"] == stored[0]  # the trace's start event says the same
    listed = cli("inspect", "searches")
    as_json = cli("inspect", "--json", "searches")
    shown = cli("inspect", "search", json.loads(result.stdout)["search_id"])
    for r in (listed, as_json, shown):
        assert r.exit_code == 0 and BASE_KEY not in r.output and "OTHERKEY" not in r.output, r.output
    assert json.loads(as_json.stdout)["searches"][0]["query"] == stored[0]
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw = db_path.read_bytes()
    assert BASE_KEY.encode() not in raw and b"OTHERKEY" not in raw


def test_a_short_value_of_another_variable_is_chat_text_not_a_key(monkeypatch):
    # "development" as a server token blanked that word in every trace (2.5% of the shared sets' messages hold it)
    monkeypatch.setenv("REFIND_SERVER_TOKEN", "development")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_" + "a1B2" * 9)  # a generated key is as hidden as before
    monkeypatch.setenv("SOME_SECRET", "correcthorsebatterystaple")  # 16 characters or more: hidden
    monkeypatch.setenv("REFIND_API_KEY", "password1")  # the key refind sends a server: hidden from 8 characters
    said = "development notes; password1 was sent; correcthorsebatterystaple; ghp_" + "a1B2" * 9
    assert redact(said) == "development notes; [redacted] was sent; [redacted]; [redacted]"
