"""One search request, one entry point: ``contract.search_request`` parses a search's values once, and
``retrieval.retrieve`` answers it in its mode for every surface."""

from __future__ import annotations

import json

import pytest
from helpers import DAY, T0, add

from refind_cli import search as S
from refind_cli.contract import CLI_NAMES, SearchRequest, search_request
from refind_cli.errors import InvalidInput
from refind_cli.model import Reply
from refind_cli.retrieval import Planner, retrieve


def _fill(store) -> None:
    add(store, "alice", "s1", ("user", "Alice: I booked the trip to Lisbon"), ("assistant", "Flying direct?"), at=T0)
    add(store, "alice", "s2", ("user", "Alice: Maya ran a marathon in Porto"), at=T0 + 30 * DAY)
    add(store, "bob", "s9", ("user", "Bob: Lisbon is where I keep my boat"), at=T0)


def test_dates_are_parsed_once_into_unix_ms() -> None:
    r = search_request("Lisbon", "alice", top_k=3, date_from="2023/06/01", date_to="2023-06-01", as_of="1700000000000")
    assert (r.date_from, r.date_to, r.as_of) == (T0 - 8 * 3_600_000, T0 - 8 * 3_600_000 + DAY - 1, 1_700_000_000_000)
    assert r.mode == "bm25" and r.options == ()
    assert search_request("q", "u", top_k=1, mode=" Agent ").mode == "agent"


@pytest.mark.parametrize(
    ("kwargs", "names", "message"),
    [
        ({"date_from": "2023/02/30"}, None, "date_from: date '2023/02/30' is not a date"),
        ({"date_to": "soon"}, CLI_NAMES, "--date-to: date 'soon' is not a date"),
        ({"date_from": "2023-07-01", "date_to": "2023-06-01"}, None, "date_from 2023-07-01 is after date_to"),
        ({"top_k": 0}, None, "top_k: must be between 1 and 1000, got 0"),
        ({"top_k": "5"}, None, "top_k: must be an integer, got string"),
        ({"top_k": True}, CLI_NAMES, "--top-k: must be an integer, got boolean"),
        ({"as_of": "9" * 23}, CLI_NAMES, "--as-of 99999999999999999999999: Unix milliseconds must be at most"),
        ({"as_of": "²"}, CLI_NAMES, "--as-of: date '²' is not a date"),  # a digit to isdigit, not to int
        ({"mode": "vector"}, None, "mode: must be agent or bm25, got 'vector'"),
        ({"options": "salmon"}, None, "options: must be a list of strings"),
        ({"query": "  "}, None, "query: must be a non-empty string, got only whitespace"),
        ({"user_id": ""}, {"user_id": "user"}, "user: must be a non-empty string"),
    ],
)
def test_a_bad_value_is_refused_naming_its_field(kwargs: dict, names: dict | None, message: str) -> None:
    values = {"query": "Lisbon", "user_id": "alice", "top_k": 5, **kwargs}
    with pytest.raises(InvalidInput) as caught:
        search_request(values.pop("query"), values.pop("user_id"), **values, names=names)
    assert caught.value.message.startswith(message), caught.value.message


def test_bm25_retrieve_is_the_search_functions_answer_cut_to_top_k(store) -> None:
    _fill(store)
    request = search_request("Lisbon trip Maya", "alice", top_k=1)
    found = retrieve(store, request)
    assert found.agent is None
    assert [b.id for b in found.blocks] == [b.id for b in S.search(store, "alice", "Lisbon trip Maya", top_k=1)]
    assert len(found.blocks) == 1 and found.blocks[0].session_id == "s1"


def test_the_date_range_and_user_of_the_request_bound_the_search(store) -> None:
    _fill(store)
    found = retrieve(store, search_request("Lisbon Maya", "alice", top_k=5, date_from="2023-06-15"))
    assert [b.session_id for b in found.blocks] == ["s2"]
    assert all("Bob" not in b.content for b in retrieve(store, search_request("Lisbon boat", "alice", top_k=5)).blocks)


def test_agent_mode_runs_the_planner_through_the_same_call(store) -> None:
    _fill(store)
    script = iter(
        [
            {"thought": "look", "action": "search_chatrecord", "keywords": "Lisbon"},
            {"thought": "keep", "action": "take_note", "results": [1]},
            {"thought": "done", "action": "finish_search"},
        ]
    )
    asked: list[list[dict]] = []

    def complete(messages: list[dict]) -> Reply:
        asked.append(messages)
        return Reply(json.dumps(next(script)), prompt_tokens=10, completion_tokens=5)

    request = SearchRequest("where is the trip", "alice", 3, mode="agent")
    found = retrieve(store, request, planner=Planner(model=complete, model_name="scripted", record=False))
    assert found.agent is not None and found.agent.path == "notes"
    assert found.agent.llm_calls == 3 and found.agent.tokens == 45
    assert [b.session_id for b in found.blocks] == ["s1"]
    assert found.blocks == found.agent.blocks[:3]
