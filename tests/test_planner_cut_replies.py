"""A reply the provider ended before the model did — cut at the output token limit (finish_reason "length") or by
its content filter — is never carried out in part: the model is told why (not that its JSON was bad), the trace
says so, and a whole JSON action before the cut is carried out. Over real HTTP to the scripted server, the CLI."""

from __future__ import annotations

import json

import pytest
from helpers import T0, add, agent_cli
from llm_server import Cut, Tools

FINISH = '{"action": "finish_search"}'
CUT = "the reply was cut off at the output token limit before it ended"

pytestmark = pytest.mark.usefixtures("no_model_env")


@pytest.fixture
def hikes(store):
    add(store, "alice", "hike", ("user", "Caroline: I went hiking at Mount Rainier", T0))
    add(store, "alice", "rai", ("user", "Caroline: Rai is my cousin's name", T0 + 60_000))
    return store


def trace_of(result) -> list[dict]:
    return json.loads(result.stdout)["trace"]


def test_a_react_reply_cut_at_the_token_limit_is_not_searched_with_its_cut_keywords(cli, hikes, llm_server):
    # "hiking Rainier" cut at the limit read as the search "hiking Rai": it ran, found the cousin, and the trace
    # showed an ordinary search — nothing said the reply was cut
    llm_server.play(Cut("Thought: search the hike\nAction: search_chatrecord\nAction Input: hiking Rai"), FINISH)
    out = agent_cli(cli, llm_server, "--json")
    assert out.exit_code == 0, out.output
    events = trace_of(out)
    assert not [e for e in events if e["kind"] == "search"]
    (corr,) = [e for e in events if e["kind"] == "correction"]
    assert corr["data"]["reason"].startswith(CUT) and corr["data"]["form"] == "react"
    assert corr["data"]["reply"].endswith("Action Input: hiking Rai")
    call = next(e for e in events if e["kind"] == "model_call")
    assert call["data"]["finish_reason"] == "length"
    told = llm_server.requests[1]["messages"][-1]["content"]
    assert told.startswith(f"Your reply was not carried out: {CUT}") and "3 actions left" in told


def test_a_json_reply_cut_at_the_token_limit_is_said_to_be_cut_not_invalid(cli, hikes, llm_server):
    llm_server.play(Cut('{"thought": "The question asks about a hike, so I should search for'), FINISH)
    out = agent_cli(cli, llm_server, "--json")
    (corr,) = [e for e in trace_of(out) if e["kind"] == "correction"]
    assert corr["data"]["reason"].startswith(CUT)  # was: "the reply is not valid JSON (Unterminated string …)"
    assert "not valid JSON" not in llm_server.requests[1]["messages"][-1]["content"]


def test_a_whole_json_action_before_the_cut_is_carried_out(cli, hikes, llm_server):
    llm_server.play(
        Cut('{"action": "search_chatrecord", "keywords": "hiking Rainier"} I chose these words because the'),
        Cut(Tools(("take_note", {"results": [1]}))),
        FINISH,
    )
    out = agent_cli(cli, llm_server, "--json")
    found = json.loads(out.stdout)
    assert not [e for e in found["trace"] if e["kind"] == "correction"]
    assert found["path"] == "notes" and "Mount Rainier" in found["data"][0]["content"]
    calls = [e for e in found["trace"] if e["kind"] == "model_call"]
    assert [c["data"].get("finish_reason") for c in calls] == ["length", "length", None]  # "stop" is not noted


def test_a_reply_cut_by_the_content_filter_says_so_and_the_rich_trace_names_each_cut(cli, hikes, llm_server):
    llm_server.play(Cut("", "content_filter"), Cut("Action: take_note\nAction Input: 1, 2"), FINISH)
    live = agent_cli(cli, llm_server, "--trace")
    assert live.exit_code == 0, live.output
    said = " ".join(live.output.split())
    assert "cut by the provider's content filter" in said
    assert "correction: the provider's content filter cut the reply off before it ended" in said
    assert "cut at the output token limit" in said and f"correction: {CUT}" in said
    search_id = live.output.strip().split("agent search ")[-1].split()[0]
    shown = " ".join(cli("inspect", "search", search_id).output.split())
    assert "cut by the provider's content filter" in shown and "cut at the output token limit" in shown
