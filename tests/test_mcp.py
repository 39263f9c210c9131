"""`refind mcp` as a real subprocess, driven by the mcp SDK's own stdio client: the tools, remember and search,
clean errors naming the field, and one user per server — no tool call reaches another user's memory."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from refind_cli import Memory

pytestmark = pytest.mark.slow  # every test but the JSON check starts `refind mcp` (the SDK's import: seconds)

SECRET = "Bob's locker code is 4417 and his boat is the Saltwind"


def _params(db: Path, *args: str, user: str | None = "alice") -> Any:
    from mcp import StdioServerParameters

    env = {
        "PYTHONPATH": str(ROOT),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PATH": os.environ.get("PATH", ""),
        "REFIND_MCP_CACHE": str(db.parent / "mcp-cache"),  # the SDK's recorded first answers (mcp_start.py)
    }
    argv = ["-m", "refind_cli", "mcp", "--db", str(db), "--retention-days", "off", *args]
    if user is not None:
        argv += ["--user", user]
    return StdioServerParameters(command=sys.executable, args=argv, env=env)


def _drive(params: Any, script: Callable[[Any], Awaitable[None]]) -> None:
    from mcp import Client

    async def main() -> None:
        async with Client(params, read_timeout_seconds=120) as client:
            await script(client)

    asyncio.run(main())


def _data(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


def _error(result: Any) -> str:
    assert result.is_error, result
    return result.content[0].text


def test_tools_remember_search_and_clean_errors(tmp_path: Path) -> None:
    db = tmp_path / "m.db"

    async def script(client: Any) -> None:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {"remember", "remember_exchange", "search_memory", "recent_sessions"}
        assert "evidence block" in tools["search_memory"].description
        assert all(not {"user", "user_id"} & set(t.input_schema["properties"]) for t in tools.values())  # no user

        await client.call_tool("remember", {"content": "I adopted a cat named Biscuit", "at": "2023-05-08T13:56"})
        await client.call_tool(
            "remember_exchange",
            {
                "user_message": "Any tips for Lisbon? I go with my sister Maya",
                "assistant_reply": "Take tram 28 early",
                "session": "trip",
                "at": "2023-06-01T09:00",
            },
        )
        found = _data(await client.call_tool("search_memory", {"query": "what is the cat called", "top_k": 2}))
        assert found["mode"] == "bm25"
        assert found["evidence"][0]["content"] == "[2023-05-08 13:56] user: I adopted a cat named Biscuit"
        trip = _data(await client.call_tool("search_memory", {"query": "Lisbon tram", "date_from": "2023-06-01"}))
        assert [e["session_id"] for e in trip["evidence"]] == ["trip"]
        assert "assistant: Take tram 28 early" in trip["evidence"][0]["content"]
        sessions = _data(await client.call_tool("recent_sessions", {}))["sessions"]
        assert sessions[0]["session_id"] == "trip" and sessions[0]["messages"] == 2 and len(sessions) == 2

        bad = _error(await client.call_tool("search_memory", {"query": "cat", "date_from": "2023/02/30"}))
        assert "date_from: date '2023/02/30' is not a date" in bad
        assert "top_k: must be a whole number from 1 to 1000, got 0" in _error(
            await client.call_tool("search_memory", {"query": "cat", "top_k": 0})
        )
        assert "top_k" in _error(await client.call_tool("search_memory", {"query": "cat", "top_k": "many"}))
        assert "at: 'someday' is not an ISO 8601 time such as 2023-05-08T13:56 or 2023-05-08, nor Unix ms" in _error(
            await client.call_tool("remember", {"content": "x", "at": "someday"})
        )
        # JSON's true is no timestamp: said as what was sent (pydantic's lax mode made it 1, "at: 1 is neither …")
        bad_at = _error(await client.call_tool("remember", {"content": "x", "at": True}))
        assert bad_at.endswith("at: must be an ISO 8601 time (a string) or Unix ms (a number), got true"), bad_at
        # every argument of the wrong kind in refind's words, not pydantic's ("2 validation errors for
        # rememberArguments … errors.pydantic.dev/…", found by a probe)
        for tool, arguments, said in (
            ("remember", {"content": 5}, "content: must be a string, got 5"),
            (
                "remember",
                {"content": "x", "at": [1]},
                "at: must be an ISO 8601 time (a string) or Unix ms (a number), got [1]",
            ),
            ("remember", {"content": "x", "session": 7}, "session: must be a string (or left out), got 7"),
            (
                "remember_exchange",
                {"user_message": ["hi"], "assistant_reply": "yo"},
                'user_message: must be a string, got ["hi"]',
            ),
            ("remember_exchange", {"user_message": "hi", "assistant_reply": None}, "assistant_reply: required"),
            # a required argument left out, in the HTTP contract's words: pydantic's ("1 validation error for
            # search_memoryArguments … Field required … errors.pydantic.dev/…") until round 24
            ("search_memory", {"top_k": 3}, "query: required"),
            ("search_memory", {}, "query: required"),
            ("remember", {"at": "2023-05-08"}, "content: required"),
            ("remember_exchange", {"assistant_reply": "yo"}, "user_message: required"),
            ("search_memory", {"query": 3}, "query: must be a string, got 3"),
            (
                "search_memory",
                {"query": "cat", "date_to": 20230601},
                "date_to: must be a string (or left out), got 20230601",
            ),
        ):
            refused = _error(await client.call_tool(tool, arguments))
            assert refused.endswith(said) and "pydantic" not in refused, (tool, refused)
        assert "assistant_reply: must be a non-empty string" in _error(
            await client.call_tool("remember_exchange", {"user_message": "hi", "assistant_reply": ""})
        )
        # read strictly, as the contract reads them (a probe of round 17: true was 1, "2" and 2.0 were 2, and an
        # empty session went to this server's own)
        # … in the CLI's words, not pydantic's ("Input should be a valid integer … errors.pydantic.dev/…")
        for lax, sent in ((True, "true"), ("2", '"2"'), (2.0, "2.0")):
            top_k = _error(await client.call_tool("search_memory", {"query": "cat", "top_k": lax}))
            assert top_k.endswith(f"top_k: must be a whole number from 1 to 1000, got {sent}"), top_k
            limit = _error(await client.call_tool("recent_sessions", {"limit": lax}))
            assert limit.endswith(f"limit: must be a whole number from 1 to 1000, got {sent}"), limit
            assert "pydantic" not in top_k + limit
        tools = {t.name: t for t in (await client.list_tools()).tools}
        for tool, name in (("search_memory", "top_k"), ("recent_sessions", "limit")):  # the schema still says so
            schema = tools[tool].input_schema["properties"][name]
            assert (schema["type"], schema["minimum"], schema["maximum"], schema["default"]) == ("integer", 1, 1000, 10)
        remember = tools["remember"].input_schema  # the text arguments' types, though each is checked by refind
        assert remember["properties"]["content"]["type"] == "string" and remember["required"] == ["content"]
        assert remember["properties"]["at"]["anyOf"] == [{"type": "string"}, {"type": "number"}, {"type": "null"}]
        assert tools["search_memory"].input_schema["properties"]["date_from"]["anyOf"][0] == {"type": "string"}
        assert "session: must be a non-empty string" in _error(
            await client.call_tool("remember", {"content": "x", "session": ""})
        )
        still = _data(await client.call_tool("search_memory", {"query": "cat Biscuit"}))  # the server lives on
        assert still["evidence"][0]["content"].endswith("I adopted a cat named Biscuit")

    _drive(_params(db), script)
    with Memory(db, retention_days=None) as memory:  # what the tools stored, as the Python API sees it
        stored = memory.export(user="alice")
    assert [len(r["messages"]) for r in stored] == [1, 2]  # the refused calls stored nothing


def test_a_bad_role_is_refused_in_the_clis_words(tmp_path: Path) -> None:
    # the role was a Literal: pydantic refused it first, in its own words ("Input should be 'user', 'assistant' or
    # 'system' … errors.pydantic.dev/…"); the contract checks it now, as it checks the CLI's --role and a replay's
    db = tmp_path / "m.db"

    async def script(client: Any) -> None:
        remember = {t.name: t for t in (await client.list_tools()).tools}["remember"]
        role = remember.input_schema["properties"]["role"]
        assert (role["type"], role["enum"], role["default"]) == ("string", ["user", "assistant", "system"], "user")
        for bad, said in (("robot", "'robot'"), ("User", "'User'")):
            text = _error(await client.call_tool("remember", {"content": "x", "role": bad}))
            assert text.endswith(f": role: must be one of user, assistant, system; got {said}"), text
            assert "pydantic" not in text and "Input should be" not in text
        not_text = _error(await client.call_tool("remember", {"content": "x", "role": 5}))
        assert "role: " in not_text and "pydantic" not in not_text, not_text
        assert _data(await client.call_tool("remember", {"content": "I adopted a cat", "role": "assistant"}))["stored"]

    _drive(_params(db), script)
    with Memory(db, retention_days=None) as memory:
        stored = memory.export(user="alice")
    assert [[m["role"] for m in r["messages"]] for r in stored] == [["assistant"]]  # the refused calls stored nothing


def test_the_same_message_again_says_why_it_is_not_stored(tmp_path: Path) -> None:
    # a probe of round 17: a second "yes" at the same minute answered a bare "stored": false, and after
    # forget_session the same message was refused advising a request_id no tool takes
    db = tmp_path / "m.db"
    said = {"content": "yes", "session": "chat", "at": "2024-01-01T10:00"}

    async def script(client: Any) -> None:
        assert _data(await client.call_tool("remember", said))["stored"] is True
        again = _data(await client.call_tool("remember", said))
        assert again["stored"] is False and "give another `at`" in again["reason"]
        assert _data(await client.call_tool("forget_session", {"session": "chat"}))["messages"] == 1
        refused = _error(await client.call_tool("remember", said))
        assert "was forgotten" in refused and "request_id" not in refused and "give another `at`" in refused
        assert _data(await client.call_tool("remember", {**said, "at": "2024-01-01T10:01"}))["stored"] is True

    _drive(_params(db, "--allow-forget"), script)


def test_at_is_read_as_the_contract_reads_a_timestamp_and_one_message_is_stored_once(tmp_path: Path) -> None:
    # `at` refused a fraction HTTP floors (1700000000000.5), and a message sent again with its time spelt another
    # way (seconds, a string of digits) was stored again: its request id hashed the arguments as sent
    db = tmp_path / "m.db"
    ms = 1_700_000_000_000

    async def script(client: Any) -> None:
        spellings = (ms + 0.5, ms, ms // 1000, str(ms), f" {ms} ", "1700000000", "2023-11-14T22:13:20Z")
        stored = [
            _data(await client.call_tool("remember", {"content": "kayak", "at": at}))["stored"] for at in spellings
        ]
        assert stored == [True] + [False] * (len(spellings) - 1)
        placeholders = (-1, "-1", 0)  # no said-at, as over HTTP (left out, `at` is now)
        stored = [
            _data(await client.call_tool("remember", {"content": "canoe", "at": at}))["stored"] for at in placeholders
        ]
        assert stored == [True, False, False]
        exchange = {"user_message": "hi", "assistant_reply": "hello", "at": ms + 1.75}
        assert _data(await client.call_tool("remember_exchange", exchange))["stored"] is True
        refused = _error(await client.call_tool("remember", {"content": "x", "at": "202311"}))
        assert refused.endswith(
            "at: '202311' is not a date (in digits a date is YYYYMMDD, such as 20231101) nor Unix ms"
        )
        refused = _error(await client.call_tool("remember_exchange", {**exchange, "at": 17.5}))
        assert refused.endswith(
            ": at: 17.5 is neither Unix milliseconds in [100000000000, 10000000000000) nor Unix seconds in [100000000, 10000000000) (1973-03-03T09:46:40Z to 2286-11-20T17:46:39.999Z)"
        ), refused

    _drive(_params(db), script)
    with Memory(db, retention_days=None) as memory:
        stored = memory.export(user="alice")
    assert [[m["timestamp"] for m in r["messages"]] for r in stored] == [[ms], [None], [ms + 1, ms + 1]]


def test_the_sdks_client_drives_a_launch_that_answers_from_its_record(tmp_path: Path) -> None:
    db = tmp_path / "m.db"

    async def first(client: Any) -> None:
        assert len((await client.list_tools()).tools) == 4

    async def second(client: Any) -> None:
        first_tools = [t.name for t in (await client.list_tools()).tools]
        assert first_tools == ["remember", "remember_exchange", "search_memory", "recent_sessions"]
        await client.call_tool("remember", {"content": "Our dog Pepper chews shoes", "at": "2023-05-08"})
        found = _data(await client.call_tool("search_memory", {"query": "dog chews"}))
        assert found["evidence"][0]["content"] == "[2023-05-08 00:00] user: Our dog Pepper chews shoes"
        assert "not a date" in _error(await client.call_tool("search_memory", {"query": "x", "date_to": "soon"}))

    _drive(_params(db), first)
    assert list((tmp_path / "mcp-cache").glob("mcp-*.json"))  # the SDK's answers to server/discover, tools/list
    _drive(_params(db), second)


def test_no_tool_call_reaches_another_users_memory(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    with Memory(db, retention_days=None) as memory:
        memory.add(SECRET, user="bob", session="bob-1", at="2023-05-01")
        memory.add("Alice keeps her bike in the garage", user="alice", session="a-1", at="2023-05-02")

    async def script(client: Any) -> None:
        names = {t.name for t in (await client.list_tools()).tools}
        assert "forget_session" in names
        for args in (
            {"query": "locker code Saltwind boat"},
            {"query": "locker code Saltwind boat", "user_id": "bob"},
            {"query": "locker code Saltwind boat", "user": "bob", "top_k": 1000},
        ):
            evidence = _data(await client.call_tool("search_memory", args))["evidence"]
            assert all("Saltwind" not in e["content"] for e in evidence), args
        sessions = _data(await client.call_tool("recent_sessions", {"limit": 1000, "user_id": "bob"}))["sessions"]
        assert [s["session_id"] for s in sessions] == ["a-1"]
        refused = _error(await client.call_tool("forget_session", {"session": "bob-1", "user_id": "bob"}))
        assert "'bob-1' of user 'alice'" in refused and "Saltwind" not in refused  # alice has no session bob-1
        await client.call_tool("remember", {"content": "planted by the agent", "user_id": "bob", "session": "bob-1"})

    _drive(_params(db, "--allow-forget"), script)
    with Memory(db, retention_days=None) as memory:
        bob = memory.export(user="bob")
        alice = memory.export(user="alice")
    assert [m["content"] for r in bob for m in r["messages"]] == [SECRET]  # untouched
    assert "planted by the agent" in [m["content"] for r in alice for m in r["messages"]]


def test_without_a_user_the_server_refuses_to_start(tmp_path: Path) -> None:
    import subprocess

    params = _params(tmp_path / "m.db", user=None)
    out = subprocess.run(
        [params.command, *params.args], capture_output=True, text=True, timeout=60, env={**os.environ, **params.env}
    )
    assert out.returncode == 2
    assert "--user: required (or set REFIND_USER)" in out.stderr
    assert not (tmp_path / "m.db").exists()
    # an id no write could carry is refused at launch, not at every remember (a probe of round 17)
    for flag, value in (("--user", "u" * 2_000), ("--session", "s" * 2_000), ("--session", " ")):
        extra = () if flag == "--user" else (flag, value)
        params = _params(tmp_path / "m.db", *extra, user=value if flag == "--user" else "alice")
        out = subprocess.run(
            [params.command, *params.args], capture_output=True, text=True, timeout=60, env={**os.environ, **params.env}
        )
        assert out.returncode == 2, (flag, out.stderr)
        assert f"{flag}: " in out.stderr
        assert not (tmp_path / "m.db").exists()


def _readme_mcp_section() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return readme[readme.index("### `refind mcp`") : readme.index("## Python API")]


def test_the_readme_client_script_runs_as_written(tmp_path: Path) -> None:
    import subprocess

    section = _readme_mcp_section()
    script = section.split("python - <<'EOF'\n", 1)[1].split("\nEOF\n", 1)[0]
    launch = 'command="refind", args=["mcp",'
    assert launch in script
    env = {"PYTHONPATH": str(ROOT), "REFIND_MCP_CACHE": str(tmp_path / "mcp-cache")}
    here = f"command={sys.executable!r}, env={env!r}, "  # this checkout's refind
    script = script.replace(launch, here + 'args=["-m", "refind_cli", "mcp",')
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    fixtures = ROOT / "fixtures" / "conversations.jsonl"
    added = subprocess.run(
        [sys.executable, "-m", "refind_cli", "add", "--file", str(fixtures), "--db", "demo.db", "-q"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert added.returncode == 0, added.stderr
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180
    )
    assert out.returncode == 0, out.stderr
    tools, evidence = out.stdout.splitlines()[:2]
    assert tools == "['recent_sessions', 'remember', 'remember_exchange', 'search_memory']"
    assert "Lisbon" in evidence


def test_the_readme_desktop_config_is_valid_json_launching_refind_mcp() -> None:
    section = _readme_mcp_section()
    config = json.loads(section.split("```json\n", 1)[1].split("```", 1)[0])
    server = config["mcpServers"]["refind"]
    assert server["command"] == "refind" and server["args"][0] == "mcp" and server["env"]["REFIND_USER"]


def test_agent_mode_runs_the_planner_over_the_fixed_user_only(tmp_path: Path, llm_server: Any) -> None:
    db = tmp_path / "agent.db"
    with Memory(db, retention_days=None) as memory:
        memory.add("Bob hiked Rainier with his secret club Nightjar", user="bob", session="b1", at="2023-05-01")
        memory.add("We went hiking on Mount Rainier last weekend", user="alice", session="a1", at="2023-05-02")
    llm_server.play(
        '{"thought": "look", "action": "search_chatrecord", "keywords": "hiking Rainier", "user_id": "bob"}',
        '{"thought": "keep", "action": "take_note", "results": [1]}',
        '{"thought": "done", "action": "finish_search"}',
    )

    async def script(client: Any) -> None:
        found = _data(await client.call_tool("search_memory", {"query": "where did we go hiking", "top_k": 3}))
        assert found["mode"] == "agent"
        assert [e["session_id"] for e in found["evidence"]] == ["a1"]

    _drive(_params(db, "--model", "openai/scripted", "--api-base", llm_server.url), script)
    assert len(llm_server.requests) == 3
    assert "Mount Rainier last weekend" in llm_server.bodies_text()
    assert "Nightjar" not in llm_server.bodies_text()  # the planner was never shown bob's memory


def test_agent_mode_says_the_model_refused(tmp_path: Path, llm_server: Any) -> None:
    from test_planner_refusal import _refusing

    db = tmp_path / "agent.db"
    with Memory(db, retention_days=None) as memory:
        memory.add("We went hiking on Mount Rainier last weekend", user="alice", session="a1", at="2023-05-02")
    llm_server.play('{"action": "search_chatrecord", "keywords": "hiking"}', _refusing())
    found: list[dict[str, Any]] = []

    async def script(client: Any) -> None:
        found.append(_data(await client.call_tool("search_memory", {"query": "where did we go hiking", "top_k": 3})))

    _drive(_params(db, "--model", "openai/scripted", "--api-base", llm_server.url), script)
    assert found[0]["refused"] is True  # (the trace alone said so)
    assert [e["session_id"] for e in found[0]["evidence"]] == ["a1"]  # what its one search showed


def test_a_failed_agent_search_names_its_stored_trace(tmp_path: Path, llm_server: Any) -> None:
    from llm_server import Fail

    from refind_cli import trace
    from refind_cli.store import Store

    db = tmp_path / "agent.db"
    with Memory(db, retention_days=None) as memory:
        memory.add("We went hiking on Mount Rainier last weekend", user="alice", session="a1", at="2023-05-02")
    llm_server.play(Fail(400, "the provider says: model quota exceeded"))
    said: list[str] = []

    async def script(client: Any) -> None:
        said.append(_error(await client.call_tool("search_memory", {"query": "where did we go hiking"})))

    _drive(_params(db, "--model", "openai/scripted", "--api-base", llm_server.url), script)
    assert "model quota exceeded" in said[0]
    search_id = said[0].rsplit("`refind inspect search ", 1)[1].rstrip("`)")
    with Store(db, retention_days=None) as store:
        assert trace.load(store, search_id).events[-1].kind == "error"


def test_agent_mode_says_what_it_withheld_when_a_forget_came_while_it_ran(tmp_path: Path, llm_server: Any) -> None:
    from refind_cli.lifecycle import forget
    from refind_cli.store import Store

    db = tmp_path / "agent.db"
    with Memory(db, retention_days=None) as memory:
        memory.add("We went hiking on Mount Rainier", user="alice", session="a1", at="2023-05-02")
        memory.add("hiking and camping by Lake Tahoe", user="alice", session="a2", at="2023-05-03")

    def forget_then_finish() -> str:  # `refind forget` in another process, while the planner waits on the model
        with Store(db, retention_days=None) as other:
            forget(other, "alice", session_id="a1")
        return '{"action": "finish_search"}'

    llm_server.play(
        '{"action": "search_chatrecord", "keywords": "hiking"}',
        '{"action": "take_note", "results": [1, 2]}',
        forget_then_finish,
    )

    async def script(client: Any) -> None:
        found = _data(await client.call_tool("search_memory", {"query": "where did we go hiking", "top_k": 3}))
        assert [e["session_id"] for e in found["evidence"]] == ["a2"]
        assert "Mount Rainier" not in json.dumps(found)
        assert (
            found["withheld"]["blocks"] == 1
            and "forgotten or expired while the search ran" in (found["withheld"]["reason"])
        )

    _drive(_params(db, "--model", "openai/scripted", "--api-base", llm_server.url), script)


def test_a_remember_is_answered_while_an_agent_search_waits_on_its_model(tmp_path: Path, llm_server: Any) -> None:
    # what an agent does: search, and store the user's turn meanwhile. Before round 29 the remember took turns on the
    # server's one connection and waited for the whole search (here: until the held model was released)
    import threading

    db = tmp_path / "agent.db"
    with Memory(db, retention_days=None) as memory:
        memory.add("We went hiking on Mount Rainier", user="alice", session="a1", at="2023-05-02")
    asked, release = threading.Event(), threading.Event()

    def held() -> str:
        asked.set()
        release.wait(60)
        return '{"action": "finish_search"}'

    llm_server.play(held)

    async def script(client: Any) -> None:
        search = asyncio.create_task(client.call_tool("search_memory", {"query": "where did we go hiking"}))
        while not asked.is_set():
            await asyncio.sleep(0.01)
        try:
            stored = _data(
                await asyncio.wait_for(client.call_tool("remember", {"content": "I love the Enchantments"}), 10)
            )
            assert stored["stored"] is True
            assert _data(await asyncio.wait_for(client.call_tool("recent_sessions", {}), 10))["sessions"]
            # read-your-writes: a search sent after the remember's answer finds it
            llm_server.play(
                '{"action": "search_chatrecord", "keywords": "Enchantments"}', '{"action": "take_note", "results": [1]}'
            )
            found = _data(await asyncio.wait_for(client.call_tool("search_memory", {"query": "Enchantments"}), 30))
            assert "I love the Enchantments" in json.dumps(found["evidence"])
            assert not search.done()  # the first search was held all along
        finally:
            release.set()
        assert _data(await search)["mode"] == "agent"

    llm_server.default = '{"action": "finish_search"}'
    _drive(_params(db, "--model", "openai/scripted", "--api-base", llm_server.url), script)


def test_a_remember_is_answered_while_more_agent_searches_wait_than_the_sdk_has_threads(
    tmp_path: Path, llm_server: Any
) -> None:
    # the SDK runs a tool on one of anyio's 40 shared threads: with 40 agent searches waiting on the model, a
    # remember (and recent_sessions) waited for one of them to end. Searches and writes have threads of their own now
    import threading

    db = tmp_path / "agent.db"
    with Memory(db, retention_days=None) as memory:
        memory.add("We went hiking on Mount Rainier", user="alice", session="a1", at="2023-05-02")
    asked: list[int] = []
    release = threading.Event()

    def held() -> str:
        asked.append(1)
        release.wait(60)
        return '{"action": "finish_search"}'

    searches = 42
    llm_server.play(*[held] * searches)

    async def script(client: Any) -> None:
        held_calls = [
            asyncio.create_task(client.call_tool("search_memory", {"query": f"hiking {n}"})) for n in range(searches)
        ]
        try:
            for _ in range(3000):
                if len(asked) >= 40:
                    break
                await asyncio.sleep(0.01)
            assert len(asked) >= 40
            stored = _data(await asyncio.wait_for(client.call_tool("remember", {"content": "still listening"}), 10))
            assert stored["stored"] is True
            assert _data(await asyncio.wait_for(client.call_tool("recent_sessions", {}), 10))["sessions"]
        finally:
            release.set()
        for call in held_calls:
            assert _data(await call)["mode"] == "agent"

    _drive(_params(db, "--model", "openai/scripted", "--api-base", llm_server.url), script)


def test_writes_sent_without_waiting_are_stored_in_the_order_they_were_sent(tmp_path: Path) -> None:
    # an agent sends its remembers (and a forget) without waiting for each answer: before round 29 each ran on a
    # thread of its own and took the connection in whichever order (40 sent: 4-6 stored out of order; a test of 100 failed 5 times in 5), and a forget
    # sent after the remembers of its session could run before some of them, which were then kept
    db = tmp_path / "m.db"
    outcome: list[Any] = []

    async def script(client: Any) -> None:
        calls = [client.call_tool("remember", {"content": f"turn {n}", "session": "order"}) for n in range(100)]
        calls += [client.call_tool("remember", {"content": f"forget me {n}", "session": "gone"}) for n in range(5)]
        calls.append(client.call_tool("forget_session", {"session": "gone"}))
        outcome.extend(await asyncio.gather(*calls))

    _drive(_params(db, "--allow-forget"), script)
    assert all(not r.is_error for r in outcome), [r.content for r in outcome if r.is_error]
    assert _data(outcome[-1])["messages"] == 5  # every remember sent before it
    with Memory(db) as memory:
        stored = [r["messages"][0]["content"] for r in memory.export(user="alice")]
    assert stored == [f"turn {n}" for n in range(100)]


@pytest.mark.parametrize("missing", ["mcp", "mcp_types"])
def test_a_missing_sdk_is_one_clear_error(cli, monkeypatch: pytest.MonkeyPatch, missing: str) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == missing else real(name, *a))
    r = cli("mcp", "--user", "u", "--mode", "bm25")
    assert r.exit_code == 1
    assert "refind mcp needs the mcp package: pip install 'mcp>=2,<3'" in r.output
