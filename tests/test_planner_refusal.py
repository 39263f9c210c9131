"""A model that refuses (OpenAI's ``message.refusal``, its ``content`` null) ends the search with that reason, shown
in the trace: it was read as an empty reply, "not valid JSON", and asked again until the budget ran out. Over real
HTTP to the scripted server (litellm 1.110's Message carries ``refusal`` as sent), the CLI."""

from __future__ import annotations

import json

import pytest
from helpers import T0, add, agent_cli
from llm_server import Raw

pytestmark = pytest.mark.usefixtures("no_model_env")

REFUSAL = "I'm sorry, but I can't help with searching this person's messages."


def _refusing() -> Raw:
    return Raw(
        {
            "id": "chatcmpl-refused",
            "object": "chat.completion",
            "created": 1,
            "model": "scripted",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": None, "refusal": REFUSAL},
                }
            ],
            "usage": {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52},
        }
    )


def test_a_refusal_ends_the_search_with_its_reason_in_the_trace(cli, store, llm_server):
    add(store, "alice", "hike", ("user", "Caroline: I went hiking at Mount Rainier", T0))
    llm_server.play(
        '{"action": "search_chatrecord", "keywords": "hiking"}',
        _refusing(),
        '{"action": "finish_search"}',  # never asked for: the search ended at the refusal
    )
    out = agent_cli(cli, llm_server, "--json")
    assert out.exit_code == 0, out.output
    found = json.loads(out.stdout)
    events = found["trace"]
    kinds = [e["kind"] for e in events]
    assert "correction" not in kinds  # was: "the reply is not valid JSON", and the model asked again
    (refused,) = [e for e in events if e["kind"] == "refused"]
    assert refused["data"] == {"refusal": REFUSAL, "llm_calls": 2}
    calls = [e for e in events if e["kind"] == "model_call"]
    assert calls[-1]["data"]["refusal"] == REFUSAL and calls[-1]["data"]["reply"] == ""
    assert len(llm_server.requests) == 2
    assert kinds[-1] == "evidence" and found["path"] == "last_search"  # what the search it ran showed
    assert [b["content"].endswith("Caroline: I went hiking at Mount Rainier") for b in found["data"]] == [True]


def test_the_rendered_trace_says_the_model_refused(cli, store, llm_server):
    add(store, "alice", "hike", ("user", "Caroline: I went hiking at Mount Rainier", T0))
    llm_server.play(_refusing())
    out = agent_cli(cli, llm_server, "--trace")
    assert out.exit_code == 0, out.output
    assert f"the model refused: {REFUSAL} — the planner stopped" in " ".join(out.output.split())


def test_a_refusal_is_said_in_the_answer_not_only_in_the_trace(cli, store, llm_server, db_path):
    # --json, the summary line and the library's AgentAnswer say the model declined, as they say a deadline or an
    # interruption: the evidence is what the planner had (before, only the trace's events told it)
    add(store, "alice", "hike", ("user", "Caroline: I went hiking at Mount Rainier", T0))
    llm_server.play('{"action": "search_chatrecord", "keywords": "hiking"}', _refusing())
    found = json.loads(agent_cli(cli, llm_server, "--json").stdout)
    assert found["refused"] is True and found["interrupted"] is False and found["deadline_passed"] is False
    llm_server.play('{"action": "search_chatrecord", "keywords": "hiking"}', '{"action": "finish_search"}')
    assert json.loads(agent_cli(cli, llm_server, "--json").stdout)["refused"] is False
    llm_server.play(_refusing())
    out = agent_cli(cli, llm_server)
    assert out.exit_code == 0, out.output
    assert "· the model refused —" in " ".join(out.output.split())

    from refind_cli import Memory

    with Memory(db_path, retention_days=None) as memory:
        llm_server.play(_refusing())
        answer = memory.agent_search(
            "where did Caroline go hiking", user="alice", model="openai/scripted", api_base=llm_server.url
        )
        assert answer.refused == REFUSAL and answer.path == "direct_bm25"
        llm_server.play('{"action": "finish_search"}')
        answer = memory.agent_search(
            "where did Caroline go hiking", user="alice", model="openai/scripted", api_base=llm_server.url
        )
        assert answer.refused is None
