"""Agent mode's model settings with bad values: one line naming the setting, before any model call, never seconds
of retries reported as a provider's error."""

from __future__ import annotations

import json

import pytest
from helpers import T0, add, agent_app

pytestmark = pytest.mark.usefixtures("no_model_env")


def agent(cli, base):
    return cli(
        "search", "hiking", "--user", "alice", "--mode", "agent", "--model", "openai/scripted", "--api-base", base
    )


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        # a socket's deadline past the platform's time_t: every call failed, retried as an 'HTTP 500'
        ("REFIND_LLM_TIMEOUT", "1e300", "REFIND_LLM_TIMEOUT: must be at most 86,400, got '1e300'"),
        # unbounded retries kept a search on a failing provider for as long as it failed
        (
            "REFIND_LLM_RETRIES",
            "99999999999999999999",
            "REFIND_LLM_RETRIES: must be at most 20, got '99999999999999999999'",
        ),
    ],
)
def test_a_model_setting_past_its_limit_is_one_line(cli, store, llm_server, monkeypatch, variable, value, message):
    add(store, "alice", "hike", ("user", "I went hiking at Mount Rainier", T0))
    monkeypatch.setenv(variable, value)
    llm_server.default = '{"action": "finish_search"}'  # a provider that answers: only the setting can be refused
    r = agent(cli, llm_server.url)
    assert r.exit_code == 2 and r.output == f"error: {message}\n"  # invalid input
    assert llm_server.requests == []


@pytest.mark.parametrize("base", ["localhost:11434/v1", "file:///etc/passwd", "http://[::1", "http://"])
def test_an_api_base_that_is_not_an_http_url_is_refused_before_any_call(cli, store, base):
    add(store, "alice", "hike", ("user", "I went hiking at Mount Rainier", T0))
    r = agent(cli, base)
    assert r.exit_code == 2, r.output  # the flag's value: invalid input, not a model failure (5)
    flat = " ".join(r.output.split())
    assert f"api base {base!r} is not an http:// or https:// URL" in flat and "--mode bm25" in flat


SEARCH = '{"action": "search_chatrecord", "keywords": "hiking"}'


def test_the_server_gives_its_planner_the_budget_it_was_started_with(db_path, llm_server):
    from fastapi.testclient import TestClient

    app = agent_app(db_path, llm_server, max_actions=2)
    llm_server.default = SEARCH  # a planner that never finishes: the budget ends it
    with TestClient(app, raise_server_exceptions=False, base_url="http://127.0.0.1") as client:
        r = client.post("/v1/memories/search", json={"query": "hiking", "user_id": "alice", "top_k": 5})
    assert r.status_code == 200, r.text
    assert len(llm_server.requests) == 2  # it ran the default 4 whatever REFIND_MAX_ACTIONS said


def test_serve_in_agent_mode_refuses_a_bad_budget_before_it_starts(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("REFIND_MAX_ACTIONS", "lots")
    missing = tmp_path / "missing" / "refind.db"  # never opened: the budget is refused first
    r = cli("serve", "--mode", "agent", "--db", str(missing), "--port", "0")
    assert r.exit_code == 2, r.output
    assert "--max-actions / REFIND_MAX_ACTIONS: 'lots' is not a whole number from 1 to 50" in r.output


def test_eval_in_agent_mode_gives_its_planner_the_budget(cli, llm_server, monkeypatch):
    from conftest import FIXTURES

    monkeypatch.setenv("REFIND_MODEL", "openai/scripted")
    monkeypatch.setenv("REFIND_API_BASE", llm_server.url)
    monkeypatch.setenv("REFIND_MAX_ACTIONS", "1")
    llm_server.default = SEARCH
    path = FIXTURES / "eval" / "locomo_small.json"
    r = cli("eval", str(path), "--mode", "agent", "--limit", "2", "--json", "--top-k", "5")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["systems"]["refind"]["llm_calls"] == len(llm_server.requests) == 2  # was 2 * 4


@pytest.mark.parametrize("value", [True, "3", 10**6, 2.5, 0])
def test_memory_agent_search_refuses_a_budget_that_is_not_a_whole_number_from_1_to_50(tmp_path, value):
    from refind_cli.api import Memory
    from refind_cli.errors import InvalidInput
    from refind_cli.model import Reply

    calls = []

    def model(messages):
        calls.append(messages)
        return Reply(content='{"action": "finish_search"}')

    with Memory(tmp_path / "m.db") as memory:
        memory.add("I went hiking at Mount Rainier", user="alice", session="s")
        with pytest.raises(InvalidInput) as refused:
            memory.agent_search("hiking", user="alice", model=model, max_actions=value)
    assert refused.value.message == f"max_actions: must be a whole number from 1 to 50, got {value!r}"
    assert calls == []  # True ran one action, "3" raised a TypeError, 10**6 and 2.5 ran


def _answer(content: str, usage: dict | None, choices: bool = True) -> dict:
    message = {"role": "assistant", "content": content}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "scripted",
        "choices": [{"index": 0, "finish_reason": "stop", "message": message}] if choices else [],
        **({"usage": usage} if usage is not None else {}),
    }


def test_an_answer_without_choices_is_one_model_error_line(cli, store, llm_server, monkeypatch):
    from llm_server import Raw

    add(store, "alice", "hike", ("user", "I went hiking at Mount Rainier", T0))
    monkeypatch.setenv("REFIND_LLM_RETRIES", "0")
    llm_server.play(Raw(_answer("", None, choices=False)))
    r = agent(cli, llm_server.url)  # an IndexError traceback (a 500 from the server)
    assert r.exit_code == 5, r.output
    assert "model openai/scripted: the provider's answer holds no message (no choices)" in " ".join(r.output.split())


def test_token_counts_no_database_can_hold_are_unknown_and_the_search_is_stored(cli, store, llm_server):
    from llm_server import Raw

    add(store, "alice", "hike", ("user", "I went hiking at Mount Rainier", T0))
    finish = '{"action": "finish_search"}'
    llm_server.play(Raw(_answer(finish, {"prompt_tokens": 10**30, "completion_tokens": -5, "total_tokens": 1})))
    r = agent(cli, llm_server.url)  # an OverflowError traceback when the trace was saved: the search was lost
    assert r.exit_code == 0, r.output
    (row,) = json.loads(cli("inspect", "--json", "searches").output)["searches"]
    assert (row["prompt_tokens"], row["completion_tokens"]) == (0, 0)


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"choices": "nope"}, "provider returned 'choices' that is not a list (str)"),
        ({**_answer("hi", None), "usage": "lots"}, "Invalid response object"),
    ],
    ids=["choices", "usage"],
)
def test_a_malformed_answer_is_named_as_one_without_warnings_or_retries(
    cli, store, llm_server, recwarn, monkeypatch, body, detail
):
    from llm_server import Fail, Raw

    add(store, "alice", "hike", ("user", "I went hiking at Mount Rainier", T0))
    llm_server.play(*[Raw(body)] * 4)
    r = agent(cli, llm_server.url)
    said = " ".join(r.output.split())
    assert r.exit_code == 5, said
    assert said.startswith(
        "error: model openai/scripted: the provider's answer is malformed: it came with a success status (HTTP 2xx), "
        "but litellm could not read it (OpenAIException - "
    )
    assert detail in said and "HTTP 500" not in said  # litellm's label for it: 'HTTP 500: InternalServerError: …'
    assert len(llm_server.requests) == 1  # retried as a 5xx: the same answer 4 times, 7 s of backoff
    assert [str(w.message) for w in recwarn if "Pydantic serializer warnings" in str(w.message)] == []
    monkeypatch.setenv("REFIND_LLM_RETRIES", "1")
    llm_server.play(Fail(503, "busy"), Fail(503, "busy"))
    busy = agent(cli, llm_server.url)  # a status the provider sent is still said, and retried
    assert "HTTP 503: " in busy.output and "(gave up after 2 attempts)" in busy.output


def test_a_refused_connection_is_not_said_to_be_an_http_500(cli, store, monkeypatch):
    import socket

    add(store, "alice", "hike", ("user", "I went hiking at Mount Rainier", T0))
    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("REFIND_LLM_RETRIES", "0")
    r = agent(cli, f"http://127.0.0.1:{port}/v1")
    said = " ".join(r.output.split())
    assert r.exit_code == 5, said
    assert "HTTP 500" not in said  # litellm's status_code of a connection no server answered
    # … and its words, "InternalServerError: OpenAIException - Connection error.", named no server, nor the address
    assert said.startswith(
        f"error: model openai/scripted: could not connect to http://127.0.0.1:{port}/v1: nothing answered there (is "
        "the server running, and is the address right?) (gave up after 1 attempt) agent search "
    )
    assert said.endswith(" shows its trace")  # the failed search, stored: `refind inspect search ID`


def test_a_server_that_answers_then_resets_is_not_said_to_be_absent():
    # a reset mid-answer is a server that was there and failed: not "nothing answered there"
    import socket
    import struct
    import threading

    from refind_cli.errors import ModelError
    from refind_cli.model import litellm_complete

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{")
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a reset
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        complete = litellm_complete("openai/scripted", f"http://127.0.0.1:{port}/v1", retries=0, timeout_s=5)
        with pytest.raises(ModelError) as failed:
            complete([{"role": "user", "content": "hello"}])
    finally:
        listener.close()
    assert "could not connect" not in failed.value.message and "nothing answered" not in failed.value.message


BLANK_FLAG = (
    "--model: {!r} names no model; give a litellm model string, or leave it out for REFIND_MODEL or the default "
    "(openai/gpt-4o-mini)"
)
BLANKS = [
    # `--model "$M"` with M unset asked the default model (a paid provider's) as if no flag were given (`mcp`: ran
    # bm25, silently; `serve`: served)
    (["--model", ""], None, BLANK_FLAG.format("")),
    (["--model", " "], None, BLANK_FLAG.format(" ")),  # (it said "no model configured", exit 5)
    (
        [],
        " ",
        "REFIND_MODEL: ' ' names no model; give a litellm model string, or unset it for the default (openai/gpt-4o-mini)",
    ),
]


@pytest.mark.parametrize(
    ("command", "args", "variable", "message"),
    [
        (command, *blank)
        for command in ("search", "mcp", "serve")
        for blank in BLANKS
        if (command, blank[0]) != ("serve", ["--model", ""])  # (before round 29 it served for good: a hung test)
    ],
)
def test_a_blank_model_is_refused_naming_where_it_was_given(
    cli, store, llm_server, monkeypatch, command, args, variable, message
):
    add(store, "alice", "s1", ("user", "we went hiking"), at=T0)
    if variable is not None:
        monkeypatch.setenv("REFIND_MODEL", variable)
    argv = {
        "search": ["search", "hiking", "--user", "alice", "--mode", "agent"],
        "mcp": ["mcp", "--user", "alice"],
        "serve": ["serve", "--mode", "agent"],
    }[command]
    r = cli(*argv, *args, "--api-base", llm_server.url)
    assert r.exit_code == 2, r.output
    assert " ".join(r.output.split()) == f"error: {message}"
    assert llm_server.requests == []


def test_an_empty_refind_model_is_unset_as_every_refind_variable_is(cli, store, llm_server, monkeypatch):
    add(store, "alice", "s1", ("user", "we went hiking"), at=T0)
    monkeypatch.setenv("REFIND_MODEL", "")
    llm_server.play('{"action": "finish_search"}')
    r = cli("search", "hiking", "--user", "alice", "--mode", "agent", "--api-base", llm_server.url)
    assert r.exit_code == 0, r.output
    assert [body["model"] for body in llm_server.requests] == ["gpt-4o-mini"]  # the default, as documented


def test_memory_agent_search_refuses_a_blank_model_or_model_name(tmp_path) -> None:
    from refind_cli import Memory
    from refind_cli.errors import InvalidInput
    from refind_cli.model import Reply

    def complete(messages):
        return Reply('{"action": "finish_search"}', prompt_tokens=1, completion_tokens=1)

    with Memory(tmp_path / "m.db", retention_days=None) as memory:
        memory.add("we went hiking", user="alice", session="s1", at=T0)
        for blank in ("", "  "):
            with pytest.raises(InvalidInput) as refused:  # was: REFIND_MODEL, else the default model, asked
                memory.agent_search("hiking", user="alice", model=blank)
            assert refused.value.message == (
                f"model: {blank!r} names no model; give a litellm model string, or leave it out for REFIND_MODEL or "
                "the default (openai/gpt-4o-mini)"
            )
            with pytest.raises(InvalidInput) as refused:  # was: the callable's own name, recorded
                memory.agent_search("hiking", user="alice", model=complete, model_name=blank)
            assert refused.value.message == (
                f"model_name: {blank!r} names nothing; give the name its traces record, or leave it out (None) for "
                "the callable's own"
            )
        assert memory._store.conn.execute("SELECT count(*) FROM searches").fetchone()[0] == 0


BLANK_BASE = (
    "--api-base: {!r} names no server; give its URL (such as http://127.0.0.1:11434/v1), or leave it out for "
    "REFIND_API_BASE or the provider's own address"
)


@pytest.mark.parametrize(
    ("args", "variable", "message"),
    [
        # `--api-base "$BASE"` with BASE unset asked the model's provider at its own address: the memory sent to a
        # cloud provider (its key in the environment) instead of the local server meant
        (["--api-base", ""], None, BLANK_BASE.format("")),
        (["--api-base", " "], None, BLANK_BASE.format(" ")),
        (
            [],
            " ",
            "REFIND_API_BASE: ' ' names no server; give its URL (such as http://127.0.0.1:11434/v1), or unset it for "
            "the provider's own address",
        ),
    ],
)
@pytest.mark.parametrize("command", ["search", "mcp"])
def test_a_blank_api_base_is_refused_naming_where_it_was_given(
    cli, store, monkeypatch, command, args, variable, message
):
    add(store, "alice", "s1", ("user", "we went hiking"), at=T0)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")  # the provider's own key, which must not be used
    if variable is not None:
        monkeypatch.setenv("REFIND_API_BASE", variable)
    argv = {
        "search": ["search", "hiking", "--user", "alice", "--mode", "agent", "--deadline", "3"],
        "mcp": ["mcp", "--user", "alice"],
    }[command]
    r = cli(*argv, "--model", "openai/llama3", *args)
    assert r.exit_code == 2, r.output
    assert " ".join(r.output.split()) == f"error: {message}"


def test_memory_agent_search_refuses_a_blank_api_base(tmp_path, monkeypatch) -> None:
    from refind_cli import Memory
    from refind_cli.errors import InvalidInput

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    with Memory(tmp_path / "m.db", retention_days=None) as memory:
        memory.add("we went hiking", user="alice", session="s1", at=T0)
        with pytest.raises(InvalidInput) as refused:  # was: the provider asked at its own address
            memory.agent_search("hiking", user="alice", model="openai/llama3", api_base="", deadline=3)
        assert refused.value.message == (
            "api_base: '' names no server; give its URL (such as http://127.0.0.1:11434/v1), or leave it out for "
            "REFIND_API_BASE or the provider's own address"
        )
        assert memory._store.conn.execute("SELECT count(*) FROM searches").fetchone()[0] == 0
