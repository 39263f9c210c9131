"""The forms of reply the planner accepts (refind_cli/reply.py) — the JSON protocol, the paper's ReAct text and tool
calls — parsed alone and driven end to end: litellm over real HTTP to the scripted server, the real store and index,
the CLI and the server. Also: who stores the trace (the caller, through planner.record_search)."""

from __future__ import annotations

import json

import pytest
from helpers import DAY, T0, add, agent_app
from llm_server import Fail, Tools

from refind_cli import trace
from refind_cli.errors import ModelError
from refind_cli.model import ToolCall, litellm_complete
from refind_cli.planner import agent_search, plan, record_search
from refind_cli.reply import ReplyError, parse_reply

DEEP = 200_000  # issue 14 item 10: a reply nesting JSON this deep raised RecursionError (a traceback, a 500)
NESTED = 20_000  # as deep past json's recursion limit, in a reply the planner reads (64,000 characters at most)
FINISH = '{"thought": "enough", "action": "finish_search"}'


def react(action: str, action_input: str, thought: str = "next step") -> str:
    return f"Thought: {thought}\nAction: {action}\nAction Input: {action_input}"


@pytest.fixture
def memory(store):
    add(
        store,
        "alice",
        "hike",
        ("user", "Caroline: I went hiking at Mount Rainier with my sister", T0),
        ("assistant", "That sounds like a great hike!", T0 + 60_000),
    )
    add(store, "alice", "dog", ("user", "Caroline: my dog Rex loves the beach", T0 + DAY))
    add(store, "alice", "job", ("user", "Caroline: I started a new job as a nurse", T0 + 2 * DAY))
    return store


def model_for(llm):
    return litellm_complete("openai/scripted", llm.url, timeout_s=5, retries=0)


def events(result, kind):
    return [e for e in result.events if e.kind == kind]


# ---- the parser alone ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, name, args, thought",
    [
        (  # the paper's own format, exactly
            'Thought: broad first\nAction: search_chatrecord\nAction Input: {"keywords": "hiking", '
            '"date_from": "2023/05/01"}',
            "search_chatrecord",
            {"keywords": "hiking", "date_from": "2023/05/01"},
            "broad first",
        ),
        (  # what the paper's re-implementations send: keyword lists, "indices", an empty input for finish
            'Thought: search.\nAction: search_chatrecord\nAction Input: {"keywords": ["cat", "name"], "top_k": 5}',
            "search_chatrecord",
            {"keywords": "cat name"},
            "search.",
        ),
        (
            'Thought: save.\nAction: take_note\nAction Input: {"indices": [1, 2]}',
            "take_note",
            {"results": [1, 2]},
            "save.",
        ),
        ("Thought: done.\nAction: finish_search\nAction Input: {}", "finish_search", {}, "done."),
        (
            "Action: search_chatrecord\nAction Input: Mount Rainier hike",
            "search_chatrecord",
            {"keywords": "Mount Rainier hike"},
            "",
        ),
        ("Thought: keep two\nAction: take_note\nAction Input: 1, 3", "take_note", {"results": [1, 3]}, "keep two"),
        ("**Thought:** keep\n**Action:** `take_note`\n**Action Input:** [2]", "take_note", {"results": [2]}, "keep"),
        (
            'Thought: x\nAction: Search_ChatRecord\nAction Input:\n```json\n{"query": "red kayak"}\n```',
            "search_chatrecord",
            {"keywords": "red kayak"},
            "x",
        ),
        ("Thought: that is all\nAction: finish", "finish_search", {}, "that is all"),
        (  # the model plays the tool and goes on: only its first action counts
            'Thought: a\nAction: search_chatrecord\nAction Input: {"keywords": "kayak"}\nObservation: found 2\n'
            "Thought: keep\nAction: take_note\nAction Input: [1]",
            "search_chatrecord",
            {"keywords": "kayak"},
            "a",
        ),
        (
            '<think>hmm</think>\nThought: t\nAction: take_note\nAction Input: {"results": 4}',
            "take_note",
            {"results": [4]},
            "t",
        ),
    ],
)
def test_the_react_text_parses_into_the_same_actions(text, name, args, thought):
    action = parse_reply(text)
    assert (action.name, action.args, action.thought, action.form) == (name, args, thought, "react")


@pytest.mark.parametrize(
    "text, args",
    [
        ('{"action": "search_chatrecord", "action_input": {"keywords": "hiking"}}', {"keywords": "hiking"}),
        ('{"action": "take_note", "action_input": "1 and 3"}', {"results": [1, 3]}),
        (
            '{"action": "search_chatrecord", "keywords": "top", "arguments": {"keywords": "nested"}}',
            {"keywords": "top"},
        ),
    ],
)
def test_a_json_reply_may_nest_its_arguments_as_langchain_agents_do(text, args):
    action = parse_reply(text)
    assert action.args == args and action.form == "json" and action.ignored == ()


def test_fields_no_action_takes_are_ignored_and_listed_in_every_form():
    as_react = parse_reply(react("search_chatrecord", '{"keywords": "x", "user_id": "bob", "top_k": 5}'))
    as_call = parse_reply("", [ToolCall("search_chatrecord", '{"keywords": "x", "user_id": "bob"}')])
    assert as_react.ignored == ("top_k", "user_id") and as_call.ignored == ("user_id",)
    assert as_react.args == as_call.args == {"keywords": "x"}


@pytest.mark.parametrize(
    "text, calls, name, args",
    [
        ("", [ToolCall("take_note", '{"results": [1]}')], "take_note", {"results": [1]}),
        ("", [ToolCall("finish_search", "")], "finish_search", {}),
        (
            '{"name": "search_chatrecord", "arguments": {"query": "hiking"}}',
            [],
            "search_chatrecord",
            {"keywords": "hiking"},
        ),
        (
            '{"tool_calls": [{"type": "function", "function": {"name": "take_note", "arguments": "{\\"indices\\": [2]}"}}]}',
            [],
            "take_note",
            {"results": [2]},
        ),
        ('<tool_call>\n{"name": "finish_search", "arguments": {}}\n</tool_call>', [], "finish_search", {}),
        (
            '{"function": {"name": "search_chatrecord", "parameters": {"keywords": "dog"}}}',
            [],
            "search_chatrecord",
            {"keywords": "dog"},
        ),
    ],
)
def test_tool_calls_native_or_written_as_json_parse_into_the_same_actions(text, calls, name, args):
    action = parse_reply(text, calls)
    assert (action.name, action.args, action.form) == (name, args, "tool_call")


def test_the_text_beside_a_native_tool_call_is_its_thought_and_the_json_protocol_is_still_json():
    call = parse_reply("the hike is in result 1", [ToolCall("take_note", '{"results": [1]}')])
    assert call.thought == "the hike is in result 1"
    plain = parse_reply('{"thought": "t", "action": "take_note", "results": [1]}')
    assert plain.form == "json" and plain.args == {"results": [1]}


@pytest.mark.parametrize(
    "text, calls, problem, form",
    [
        ("Thought: x\nAction: delete_everything\nAction Input: {}", [], "must be one of", "react"),
        ('Action: take_note\nAction Input: {"results": [1', [], "not valid JSON", "react"),
        ("Action: search_chatrecord\nAction Input:", [], "keywords", "react"),
        ("Action: take_note\nAction Input: the first one", [], "result numbers", "react"),
        ("Action: take_note\nAction Input: ²", [], "result numbers", "react"),  # a digit to isdigit, not to int
        ('{"thought": "t", "action": "take_note", "results": ["¹", "2"]}', [], "result numbers", "json"),
        (
            "",
            [ToolCall("search_chatrecord", '{"keywords": "a"}'), ToolCall("take_note", "{}")],
            "one action per reply",
            "tool_call",
        ),
        ("", [ToolCall("take_note", '{"results": [1')], "not valid JSON", "tool_call"),
        ("", [ToolCall("take_note", "[1, 2]")], "must be a JSON object", "tool_call"),
        ("", [ToolCall("rm_rf", "{}")], "must be one of", "tool_call"),
    ],
)
def test_a_reply_in_another_form_that_cannot_be_carried_out_says_why_and_names_its_form(text, calls, problem, form):
    with pytest.raises(ReplyError, match=problem) as err:
        parse_reply(text, calls)
    assert err.value.form == form


@pytest.mark.parametrize(
    "text, calls",
    [
        ('{"action": "finish_search", "x": ' + "[" * DEEP + "]" * DEEP + "}", []),
        ('{"a": ' * DEEP, []),
        ('{"thought": "t", "action": "take_note", "results": ' + "[" * DEEP + "1" + "]" * DEEP + "}", []),
        ("Thought: t\nAction: take_note\nAction Input: " + "[" * DEEP, []),
        ("", [ToolCall("search_chatrecord", '{"keywords": ' * DEEP)]),
    ],
    ids=["array-in-object", "objects", "in-a-field", "react-input", "tool-arguments"],
)
def test_json_nested_200k_deep_is_a_malformed_reply_not_a_recursion_error(text, calls):
    # Checked by hand: without the RecursionError guard in reply._decode each case raises RecursionError.
    with pytest.raises(ReplyError, match="too deeply"):
        parse_reply(text, calls)


BIG = "9" * 5_000  # past Python's 4,300 digits for int(): a plain ValueError, not a JSONDecodeError


@pytest.mark.parametrize(
    "text, calls, message",
    [
        ('{"action": "take_note", "results": [' + BIG + "]}", [], "too long"),
        ('{"action": "take_note", "results": ["' + BIG + '"]}', [], "result numbers"),
        ("Thought: t\nAction: take_note\nAction Input: " + BIG, [], "result numbers"),
        ('Thought: t\nAction: take_note\nAction Input: {"results": [' + BIG + "]}", [], "too long"),
        ("", [ToolCall("take_note", '{"results": [' + BIG + "]}")], "too long"),
    ],
    ids=["json", "json-string", "react-text", "react-json", "tool-arguments"],
)
def test_a_number_of_5000_digits_is_a_malformed_reply_not_a_value_error(text, calls, message):
    # Checked by hand: without the ValueError guards in reply.py each case raises ValueError (a 500 in agent mode).
    with pytest.raises(ReplyError, match=message):
        parse_reply(text, calls)


# ---- end to end: litellm over HTTP to the scripted server ------------------------------------------------------


def test_a_model_speaking_the_papers_react_format_completes_a_search_and_returns_evidence(memory, llm_server):
    # On main this model spent all its actions on corrections and the search ended on the direct_bm25 fallback.
    llm_server.play(
        react("search_chatrecord", '{"keywords": "hiking Mount"}', "broad first"),
        react("take_note", '{"indices": [1]}', "result 1 is the hike"),
        react("finish_search", "{}", "enough"),
    )
    result = agent_search(memory, "alice", "where did Caroline go hiking", top_k=5, model=model_for(llm_server))
    assert not events(result, "correction")
    assert [e.data["name"] for e in events(result, "action")] == ["search_chatrecord", "take_note", "finish_search"]
    assert {e.data["form"] for e in events(result, "action")} == {"react"}
    assert result.path == "notes" and len(result.blocks) == 1 and "Mount Rainier" in result.blocks[0].content
    # the search results went back to the model as the next user message, as for a JSON reply
    assert "[1] session hike" in llm_server.requests[1]["messages"][-1]["content"]
    stored = trace.load(memory, result.search_id)
    assert [e.data["form"] for e in stored.events if e.kind == "action"] == ["react"] * 3


def test_native_tool_calls_run_the_same_loop_and_the_trace_keeps_them(memory, llm_server):
    llm_server.play(
        Tools(("search_chatrecord", {"keywords": "hiking Mount"})),
        Tools(("take_note", {"results": [1]}), content="result 1 is the hike"),
        Tools(("finish_search", {})),
    )
    result = agent_search(memory, "alice", "where did Caroline go hiking", top_k=5, model=model_for(llm_server))
    actions = events(result, "action")
    assert [(a.data["name"], a.data["form"]) for a in actions] == [
        ("search_chatrecord", "tool_call"),
        ("take_note", "tool_call"),
        ("finish_search", "tool_call"),
    ]
    assert actions[1].data["thought"] == "result 1 is the hike"
    assert result.path == "notes" and "Mount Rainier" in result.blocks[0].content
    first_call = events(result, "model_call")[0]
    assert first_call.data["reply"] == ""
    assert first_call.data["tool_calls"] == [{"name": "search_chatrecord", "arguments": '{"keywords": "hiking Mount"}'}]
    # the conversation keeps the call as text (the planner sends no tool messages)
    said = llm_server.requests[1]["messages"][-2]
    assert said["role"] == "assistant" and "search_chatrecord" in said["content"]


def test_two_tool_calls_in_one_reply_are_corrected_and_the_trace_shows_the_calls(memory, llm_server):
    llm_server.play(Tools(("search_chatrecord", {"keywords": "hiking"}), ("take_note", {"results": [1]})), FINISH)
    result = agent_search(memory, "alice", "where did Caroline go hiking", top_k=5, model=model_for(llm_server))
    (corr,) = events(result, "correction")
    assert "one action per reply" in corr.data["reason"] and corr.data["form"] == "tool_call"
    assert "search_chatrecord" in corr.data["reply"] and "take_note" in corr.data["reply"]
    assert not events(result, "search") and events(result, "finish")


def test_a_reply_nesting_json_20k_deep_is_corrected_and_the_search_goes_on(memory, llm_server):
    deep = '{"thought": "x", "action": "search_chatrecord", "keywords": ' + "[" * NESTED + "]" * NESTED + "}"
    llm_server.play(deep, FINISH)
    result = agent_search(memory, "alice", "where did Caroline go hiking", top_k=5, model=model_for(llm_server))
    (corr,) = events(result, "correction")
    assert corr.step == 1 and "too deeply" in corr.data["reason"]
    assert "too deeply" in llm_server.requests[1]["messages"][-1]["content"]  # the model is told, and may retry
    assert events(result, "finish") and result.path == "direct_bm25"
    assert trace.load(memory, result.search_id).events[-1].kind == "evidence"


def test_the_server_answers_a_search_whose_model_nests_json_20k_deep(db_path, llm_server):
    from fastapi.testclient import TestClient

    from refind_cli.store import Store

    app = agent_app(db_path, llm_server)
    llm_server.play('{"action": ' + "[" * NESTED, FINISH)
    with TestClient(app, raise_server_exceptions=False, base_url="http://127.0.0.1") as client:
        r = client.post("/v1/memories/search", json={"query": "hiking", "user_id": "alice", "top_k": 5})
    assert r.status_code == 200, r.text
    assert "Mount Rainier" in r.json()["data"][0]["content"]
    with Store(db_path, retention_days=None) as store:
        (stored,) = trace.recent(store, user_id="alice")  # the server recorded the run it got back
    assert any(e.kind == "correction" and "too deeply" in e.data["reason"] for e in stored.events)


def test_a_reply_of_megabytes_is_corrected_unread_and_kept_short(memory, llm_server):
    # a probe of round 17: a 30 MB reply was parsed past the search's deadline, sent back to the model, and stored
    # about four times in the trace (120 MB written while other Adds waited); planner keywords had no limit
    # (so are keywords: a search's fit in its reply, under a query's limit over HTTP, 100,000 characters)
    from refind_cli.contract import MAX_QUERY_CHARS
    from refind_cli.planner import MAX_REPLY_CHARS

    assert MAX_REPLY_CHARS < MAX_QUERY_CHARS
    huge = '{"action": "finish_search", "thought": "' + "x" * 3_000_000 + '"}'
    llm_server.play(huge, FINISH)
    result = agent_search(memory, "alice", "where did Caroline go hiking", top_k=5, model=model_for(llm_server))
    (corr,) = events(result, "correction")
    assert corr.data["reason"].startswith("the reply is 3,000,") and "over the limit of 64,000" in corr.data["reason"]
    assert len(corr.data["reply"]) < MAX_REPLY_CHARS + 100 and corr.data["reply"].endswith("the rest not kept)")
    (call, _) = events(result, "model_call")
    assert len(call.data["reply"]) < MAX_REPLY_CHARS + 100
    assert len(llm_server.requests[1]["messages"][-2]["content"]) < MAX_REPLY_CHARS + 100  # what went back
    assert events(result, "finish")


def test_the_cli_trace_names_the_form_a_reply_was_parsed_from(cli, memory, llm_server):
    llm_server.play(
        react("search_chatrecord", "hiking Mount"),
        Tools(("take_note", {"results": [1]})),
        FINISH,
    )
    args = ("search", "hiking", "--user", "alice", "--mode", "agent", "--model", "openai/scripted")
    live = cli(*args, "--api-base", llm_server.url, "--trace")
    assert live.exit_code == 0, live.output
    assert "(parsed from ReAct text)" in live.output and "(parsed from a tool call)" in live.output
    assert live.output.count("parsed from") == 2  # a reply in the JSON protocol is the norm: not labelled
    search_id = live.output.strip().split("agent search ")[-1].split()[0]
    stored = json.loads(cli("inspect", "search", search_id, "--json").stdout)
    assert [e["data"]["form"] for e in stored["events"] if e["kind"] == "action"] == ["react", "tool_call", "json"]


# ---- who stores the trace --------------------------------------------------------------------------------------


def test_plan_stores_nothing_and_record_search_stores_the_run(memory, llm_server):
    llm_server.play(react("search_chatrecord", "hiking"), FINISH)
    result = plan(memory, "alice", "hiking", top_k=5, model=model_for(llm_server), model_name="openai/scripted")
    assert result.search_id is None and trace.recent(memory) == []
    assert record_search(memory, result) is result
    stored = trace.load(memory, result.search_id)
    assert stored.returned_ids == [b.id for b in result.blocks] and stored.model == "openai/scripted"
    assert stored.events == result.events


def test_a_failed_run_is_returned_to_the_caller_which_stores_it_then_raises(memory, llm_server):
    llm_server.play(Fail(400, "the provider says no"))
    result = plan(memory, "alice", "hiking", top_k=5, model=model_for(llm_server))
    assert isinstance(result.error, ModelError) and result.blocks == [] and result.events[-1].kind == "error"
    assert trace.recent(memory) == []
    with pytest.raises(ModelError, match="the provider says no"):
        record_search(memory, result)
    (stored,) = trace.recent(memory)
    assert stored.events[-1].kind == "error" and stored.returned_ids == []
    llm_server.play(Fail(400, "again"))
    with pytest.raises(ModelError, match="again"):
        agent_search(memory, "alice", "hiking", top_k=5, model=model_for(llm_server), record=False)
    assert len(trace.recent(memory)) == 1  # record=False: raised, not stored


def test_a_reply_of_endless_braces_costs_a_bounded_number_of_decodes(monkeypatch):
    # On main every "{" of the reply was decoded to the end of the text: 1 MB of unclosed objects took ~10 s of CPU.
    import refind_cli.reply as R

    calls = []
    real = R._DECODER

    class Counting:
        def raw_decode(self, text, start=0):
            calls.append(start)
            return real.raw_decode(text, start)

    monkeypatch.setattr(R, "_DECODER", Counting())
    with pytest.raises(ReplyError, match="not valid JSON"):
        parse_reply('{"a": 1, ' * 100_000)
    assert len(calls) == R.MAX_OBJECTS
    calls.clear()
    with pytest.raises(ReplyError, match="not valid JSON"):
        parse_reply("{ " * 100_000 + "}")
    assert len(calls) == R.MAX_OBJECTS


# ---- several actions in one reply ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "more"),
    [
        ('[{"action": "search_chatrecord", "keywords": "hiking"}, {"action": "take_note", "results": [1]}]', 1),
        ('{"action": "search_chatrecord", "keywords": "hiking"}\n{"action": "finish_search"}', 1),
        (react("search_chatrecord", "hiking") + "\nAction: take_note\nAction Input: [1]\nAction: finish_search", 2),
        ('{"action": "search_chatrecord", "action_input": {"keywords": "hiking", "action": "x"}}', 0),  # (its own)
        ('{"action": "search_chatrecord", "keywords": "hiking"} then {"results": [1]}', 0),  # names no action
    ],
)
def test_a_reply_of_several_actions_carries_out_the_first_and_counts_the_rest(text, more):
    action = parse_reply(text)
    assert (action.name, action.args["keywords"], action.more) == ("search_chatrecord", "hiking", more)


def test_the_model_is_told_the_actions_after_the_first_were_not_carried_out_and_the_trace_counts_them(
    cli, memory, llm_server
):
    # The note riding on the search was dropped unsaid: the model went on as if it had kept result 1, the trace
    # showed only the search
    both = '[{"action": "search_chatrecord", "keywords": "hiking Mount"}, {"action": "take_note", "results": [1]}]'
    llm_server.play(both, FINISH)
    args = ("search", "hiking", "--user", "alice", "--mode", "agent", "--model", "openai/scripted")
    out = cli(*args, "--api-base", llm_server.url, "--json")
    assert out.exit_code == 0, out.output
    (action, _) = (e for e in json.loads(out.stdout)["trace"] if e["kind"] == "action")
    assert action["data"]["name"] == "search_chatrecord" and action["data"]["more"] == 1
    told = llm_server.requests[1]["messages"][-1]["content"]
    assert "[1] session hike" in told
    assert told.endswith(
        "3 actions left. Only the first action of your reply was carried out; the 1 after it was not: send one "
        "action per reply."
    )
    llm_server.play(both, FINISH)
    live = cli(*args, "--api-base", llm_server.url, "--trace")
    assert "1 more action in the same reply not carried out (one per reply)" in " ".join(live.output.split())
