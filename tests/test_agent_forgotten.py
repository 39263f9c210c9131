"""An agent search never returns what a forget or expire removed while it ran: the CLI, the Python API (recorded or
not), the server. The forget runs inside the scripted model's reply, while the planner waits on it."""

from __future__ import annotations

import json

import pytest
from helpers import DAY, T0, Clock, add, agent_app, agent_cli

from refind_cli.store import Store

SEARCH = '{"action": "search_chatrecord", "keywords": "hiking"}'
NOTE_BOTH = '{"action": "take_note", "results": [1, 2]}'
NOTE = '{"action": "take_note", "results": [1]}'
FINISH = '{"action": "finish_search"}'

pytestmark = pytest.mark.usefixtures("no_model_env")


def two_hikes(store: Store) -> None:
    add(store, "alice", "hike", ("user", "Caroline: I went hiking at Mount Rainier", T0))
    add(store, "alice", "camp", ("user", "Caroline: hiking and camping by Lake Tahoe", T0 + DAY))


def forgetting(db_path, then: str = FINISH, **scope: str):
    """A scripted reply that first forgets ``scope`` of alice's memory through another connection, as `refind
    forget` in another process would while the planner waits on the model."""
    from refind_cli.lifecycle import forget

    def reply() -> str:
        with Store(db_path, retention_days=None) as other:
            forget(other, "alice", **scope)
        return then

    return reply


def test_the_cli_withholds_a_block_forgotten_while_the_planner_ran_and_says_so(cli, store, db_path, llm_server):
    two_hikes(store)
    llm_server.play(SEARCH, NOTE_BOTH, forgetting(db_path, session_id="hike"))
    r = agent_cli(cli, llm_server)
    assert r.exit_code == 0, r.output
    flat = " ".join(r.output.split())
    assert "Lake Tahoe" in flat
    assert "Mount Rainier" not in flat  # it printed the forgotten message as evidence
    assert "withheld 1 message (1 block whole): 1 forgotten or expired while the search ran" in flat

    llm_server.play(SEARCH, NOTE_BOTH, forgetting(db_path, session_id="camp"))
    printed = agent_cli(cli, llm_server, "--json").stdout
    assert "Lake Tahoe" not in printed  # the trace beside the evidence quoted it: the hit the planner was shown
    found = json.loads(printed)
    assert found["data"] == []  # the only block left was forgotten too (the hike was, before this search)
    (hit,) = next(e for e in found["trace"] if e["kind"] == "search")["data"]["hits"]
    assert hit["content"] is None and hit["forgotten"] is True
    assert found["withheld"] == {
        "blocks": 1,
        "messages": 1,
        "removed": 1,
        "past_retention": 0,
        "reason": "1 forgotten or expired while the search ran",
    }
    evidence = [e for e in found["trace"] if e["kind"] in ("withheld", "evidence")]
    assert [e["kind"] for e in evidence] == ["withheld", "evidence"] and evidence[1]["data"]["ids"] == []


def test_a_neighbour_forgotten_while_the_planner_ran_leaves_its_block_and_the_anchor_stays_whole(
    cli, store, db_path, llm_server
):
    # neighbours show when they share a search word: each says "hiking"
    add(store, "alice", "hike", ("user", "Caroline: we planned the hiking trip", T0), request_id="r1")
    add(store, "alice", "hike", ("user", "Caroline: I went hiking at Mount Rainier", T0 + 60_000), request_id="r2")
    add(store, "alice", "hike", ("user", "Caroline: my secret hiking diary", T0 + 120_000), request_id="r3")
    search = '{"action": "search_chatrecord", "keywords": "hiking Rainier"}'
    llm_server.play(search, NOTE, forgetting(db_path, request_id="r3"))
    printed = agent_cli(cli, llm_server, "--json").stdout
    assert "secret hiking diary" in llm_server.bodies_text()  # the planner saw it, before the forget
    assert "secret hiking diary" not in printed
    found = json.loads(printed)
    (hit,) = next(e for e in found["trace"] if e["kind"] == "search")["data"]["hits"]
    assert hit["content"] is None and hit["forgotten"] is True
    (block,) = found["data"]
    assert block["content"] == (
        "[2023-06-01 08:00] user: Caroline: we planned the hiking trip\n"
        "[2023-06-01 08:01] user: Caroline: I went hiking at Mount Rainier"  # the anchor, whole
    )
    assert (found["withheld"]["blocks"], found["withheld"]["messages"]) == (0, 1)


@pytest.mark.parametrize("warm", [False, True])
def test_the_planner_is_not_shown_what_was_forgotten_before_its_search(cli, store, db_path, llm_server, warm):
    two_hikes(store)
    if warm:  # the turns' text is in this process's cache (a server's warmer, an earlier search): no read fails
        assert "Mount Rainier" in cli("search", "hiking", "--user", "alice", "--mode", "bm25").output
    # the forget completes while the planner waits on its first reply, after it read the index
    llm_server.play(forgetting(db_path, then=SEARCH, session_id="hike"), NOTE_BOTH, FINISH)
    r = agent_cli(cli, llm_server, "--json")
    assert r.exit_code == 0, r.output  # cold, it failed: "the user's messages were forgotten … search again"
    found = json.loads(r.stdout)
    assert "Mount Rainier" not in llm_server.bodies_text()  # warm, the model was sent the forgotten message
    search = next(e for e in found["trace"] if e["kind"] == "search")
    assert [h["session_id"] for h in search["data"]["hits"]] == ["camp"]
    withheld = [e["data"] for e in found["trace"] if e["kind"] == "withheld"]
    # cold, the index is read again (without the hike); warm, the hike is withheld from the planner's view
    assert [(w["at"], w["blocks"]) for w in withheld] == ([("search", 1)] if warm else [])
    assert "Mount Rainier" not in json.dumps(found)
    assert found["search_id"] is not None  # nothing it quotes is gone: stored, and inspect shows the withholding
    if warm:
        flat = " ".join(cli("inspect", "search", found["search_id"]).output.split())
        assert "withheld from the planner's view of this search: 1 message(s), 1 block(s) whole" in flat


def test_memory_withholds_with_and_without_recording(tmp_path, llm_server):
    from refind_cli.api import Memory

    db = tmp_path / "m.db"
    for record in (True, False):
        with Memory(db, retention_days=None) as memory:
            memory.add("Caroline: I went hiking at Mount Rainier", user="alice", session=f"hike-{record}")
            memory.add("Caroline: hiking and camping by Lake Tahoe", user="alice", session=f"camp-{record}")
            llm_server.play(SEARCH, NOTE_BOTH, forgetting(db, session_id=f"hike-{record}"))
            answer = memory.agent_search(
                "hiking", user="alice", model="openai/scripted", api_base=llm_server.url, record=record
            )
            assert [e.session_id for e in answer.evidence] == [f"camp-{record}"], record
            assert answer.withheld is not None and answer.withheld["messages"] == 1
            assert answer.search_id is None  # what its trace quotes is gone: not stored, recorded or not
            assert "Mount Rainier" not in json.dumps(answer.trace)
            memory.forget(user="alice")


def test_the_server_withholds_what_was_forgotten_while_its_planner_ran(db_path, llm_server):
    from fastapi.testclient import TestClient

    app = agent_app(db_path, llm_server)  # alice holds one hike
    with Store(db_path, retention_days=None) as store:
        add(store, "alice", "camp", ("user", "Caroline: hiking and camping by Lake Tahoe", T0 + DAY))
    llm_server.play(SEARCH, NOTE_BOTH, forgetting(db_path, session_id="hike"))
    with TestClient(app, raise_server_exceptions=False, base_url="http://127.0.0.1") as client:
        r = client.post("/v1/memories/search", json={"query": "hiking", "user_id": "alice", "top_k": 5})
    assert r.status_code == 200, r.text
    contents = [item["content"] for item in r.json()["data"]]
    assert len(contents) == 1 and "Lake Tahoe" in contents[0]
    assert "Mount Rainier" not in r.text


def test_evidence_past_retention_by_the_time_the_planner_returns_is_withheld(db_path):
    from refind_cli.model import Reply
    from refind_cli.planner import agent_search

    clock = Clock()
    store = Store(db_path, clock=clock, retention_days=1)
    add(store, "alice", "hike", ("user", "Caroline: I went hiking at Mount Rainier", T0))
    clock.now += DAY // 2
    add(store, "alice", "camp", ("user", "Caroline: hiking and camping by Lake Tahoe", T0 + DAY))
    script = [SEARCH, NOTE_BOTH]

    def model(messages: list[dict[str, str]]) -> Reply:
        if script:
            return Reply(content=script.pop(0))
        clock.now += DAY * 3 // 4  # the hike, stored first, passes retention while the planner decides
        return Reply(content=FINISH)

    found = agent_search(store, "alice", "hiking", top_k=5, model=model, model_name="m", record=False)
    assert [b.session_id for b in found.blocks] == ["camp"]
    assert found.withheld is not None and found.withheld.as_dict()["past_retention"] == 1
    assert found.withheld.reason == "1 past retention by the time it returned"
    assert found.blocks[0].score == 1.0  # ranked again: 1 − i/n over what is returned
    store.close()


def test_a_forget_between_the_planners_check_and_the_record_is_withheld_too(store, db_path):
    from refind_cli.lifecycle import forget
    from refind_cli.model import Reply
    from refind_cli.planner import plan, record_search

    two_hikes(store)
    script = [SEARCH, NOTE_BOTH, FINISH]
    result = plan(store, "alice", "hiking", top_k=5, model=lambda m: Reply(content=script.pop(0)), model_name="m")
    assert len(result.blocks) == 2 and result.withheld is None
    with Store(db_path, retention_days=None) as other:  # after the planner checked its evidence, before the record
        forget(other, "alice", session_id="hike")
    recorded = record_search(store, result)
    assert recorded.search_id is None  # what it quotes is gone: not stored
    assert [b.session_id for b in recorded.blocks] == ["camp"] and recorded.blocks[0].score == 1.0
    assert recorded.withheld is not None and recorded.withheld.messages == 1
    assert recorded.events[-1].kind == "withheld" and recorded.events[-1].data["at"] == "evidence"


def test_the_model_is_asked_nothing_more_once_a_hit_it_was_shown_is_forgotten(cli, store, db_path, llm_server):
    two_hikes(store)
    # the planner is shown both hikes; the hike is forgotten while it decides. Its next call re-sent the conversation
    # with a placeholder for the hit — and the model's own reply quoting it ("user has jackcanary syndrome", a probe
    # of round 18): now the planner stops, with what it kept
    quoting = '{"thought": "Caroline went to Mount Rainier; keep both", "action": "take_note", "results": [1, 2]}'
    llm_server.play(SEARCH, forgetting(db_path, then=quoting, session_id="hike"), FINISH)
    r = agent_cli(cli, llm_server, "--json")
    assert r.exit_code == 0, r.output
    assert len(llm_server.requests) == 2  # the third call would have sent the reply quoting the forgotten hit
    assert "Mount Rainier" in json.dumps(llm_server.requests[1])  # shown before the forget
    assert "Mount Rainier" not in r.stdout
    found = json.loads(r.stdout)
    assert [b["content"].split("] ", 1)[1] for b in found["data"]] == [
        "user: Caroline: hiking and camping by Lake Tahoe"
    ]
    (stop,) = [e for e in found["trace"] if e["kind"] == "forgotten"]
    assert stop["data"] == {"llm_calls": 2}
    (call,) = [e for e in found["trace"] if e["kind"] == "model_call" and e["step"] == 2]
    assert call["data"]["reply"] == "(withheld: the planner's words after it was shown a message forgotten since)"


def test_the_trace_printed_says_the_planner_stopped_for_a_forget(cli, store, db_path, llm_server):
    two_hikes(store)
    llm_server.play(SEARCH, forgetting(db_path, then=NOTE_BOTH, session_id="hike"), FINISH)
    shown = " ".join(agent_cli(cli, llm_server, "--trace").output.split())
    assert "a hit the model was shown was forgotten while the search ran: the planner stopped" in shown
    # (the hit itself was printed as the search ran, before the forget: --trace prints each event as it happens)
    assert shown.index("Mount Rainier") < shown.index("was forgotten while the search ran")


def test_a_forget_after_the_planners_check_leaves_no_text_in_the_trace_memory_returns(tmp_path, llm_server):
    from refind_cli.api import Memory

    db = tmp_path / "m.db"
    with Memory(db, retention_days=None) as memory:
        memory.add("Caroline: I went hiking at Mount Rainier", user="alice", session="hike")
        memory.add("Caroline: hiking and camping by Lake Tahoe", user="alice", session="camp")
        llm_server.play(SEARCH, NOTE_BOTH, FINISH)

        def on_event(event) -> None:  # the planner checked its evidence; the forget lands before it is recorded
            if event.kind == "evidence":
                forgetting(db, session_id="hike")()

        answer = memory.agent_search(
            "hiking", user="alice", model="openai/scripted", api_base=llm_server.url, on_event=on_event
        )
    assert [e.session_id for e in answer.evidence] == ["camp"] and answer.search_id is None
    assert "Mount Rainier" not in json.dumps(answer.trace)  # the hit the planner was shown, in the trace returned


@pytest.mark.parametrize("record", [True, False])
def test_a_neighbour_forgotten_after_the_planners_check_leaves_the_fallbacks_evidence_too(tmp_path, llm_server, record):
    from refind_cli.api import Memory

    db = tmp_path / "m.db"
    with Memory(db, retention_days=None) as memory:
        for i, text in enumerate(
            ["we planned the hiking trip", "I went hiking at Mount Rainier", "my secret hiking diary"]
        ):
            memory.add(f"Caroline: {text}", user="alice", session="hike", request_id=f"r{i + 1}")
        llm_server.play(FINISH)  # no search ran: the evidence is BM25 on the question, which no hit in the trace shows

        def on_event(event) -> None:  # the planner checked its evidence; the forget lands before it is recorded
            if event.kind == "evidence":
                forgetting(db, request_id="r3")()

        answer = memory.agent_search(
            "hiking Rainier",
            user="alice",
            model="openai/scripted",
            api_base=llm_server.url,
            on_event=on_event,
            record=record,
        )
    assert answer.path == "direct_bm25" and len(answer.evidence) == 1
    assert "Mount Rainier" in answer.evidence[0].content
    assert "secret hiking diary" not in answer.evidence[0].content  # returned, though forgotten before it was
    assert answer.withheld is not None and answer.withheld["messages"] == 1


def test_a_provider_error_quoting_a_hit_forgotten_while_it_ran_is_withheld(cli, store, db_path, llm_server):
    # a probe of round 18: a provider's 400 (a content filter, a validation) echoed the prompt — the hit the planner
    # was sent — after a forget; the 502 body and the CLI's error line carried the forgotten text
    from llm_server import Fail

    two_hikes(store)
    echo = Fail(400, "refused: content policy on 'Caroline: I went hiking at Mount Rainier'")
    llm_server.play(SEARCH, forgetting(db_path, then=echo, session_id="hike"))
    r = agent_cli(cli, llm_server, "--json")
    assert r.exit_code == 5, r.output
    assert "Mount Rainier" in llm_server.bodies_text()  # the planner was shown it, before the forget
    assert "Mount Rainier" not in r.output
    assert "its message is withheld: it may quote memory forgotten while it ran" in " ".join(r.output.split())
    llm_server.play(SEARCH, echo)  # nothing forgotten: the provider's message as ever
    r = agent_cli(cli, llm_server, "--json")
    assert r.exit_code == 5 and "content policy on" in " ".join(r.output.split())


def test_a_kept_note_forgotten_while_the_planner_ran_leaves_its_place_to_the_best_note_left_out(
    cli, store, db_path, llm_server
):
    """Three hikes kept, room for two (-k 2): the best-ranked one is forgotten while the planner waits on the model.
    The note left out takes its place — before, the evidence held one block and a slot stayed empty."""
    add(store, "alice", "rainier", ("user", "Caroline: hiking hiking hiking at Mount Rainier", T0))
    add(store, "alice", "tahoe", ("user", "Caroline: hiking hiking by the lake at Tahoe", T0 + DAY))
    add(store, "alice", "zion", ("user", "Caroline: hiking once, at Zion in the canyon", T0 + 2 * DAY))
    llm_server.play(SEARCH, '{"action": "take_note", "results": [1, 2, 3]}', forgetting(db_path, session_id="rainier"))
    r = agent_cli(cli, llm_server, "-k", "2", "--json")
    assert r.exit_code == 0, r.output
    found = json.loads(r.stdout)
    trace = {e["kind"]: e for e in found["trace"]}
    shown = [h["session_id"] for h in trace["search"]["data"]["hits"]]
    assert shown == ["rainier", "tahoe", "zion"]  # (the ranks the test is about: the first is forgotten)
    assert [b["content"].split("] ", 1)[1] for b in found["data"]] == [
        "user: Caroline: hiking hiking by the lake at Tahoe",
        "user: Caroline: hiking once, at Zion in the canyon",
    ]
    assert trace["evidence"]["data"]["limit"] == 2 and "left_out" not in trace["evidence"]["data"]
    assert found["withheld"]["blocks"] == 1


def test_forgets_in_a_row_under_the_planners_search_read_its_index_again_each_time(
    cli, store, db_path, llm_server, monkeypatch
):
    # each forget lands between the index's read and its search: one re-read was all a planner's search had, and the
    # second forget failed it "the user's messages were forgotten … search again" (exit 3; a review of round 29:
    # 2–6 of a stress run's agent searches, once a Memory's agent search no longer waits for its forgets)
    from refind_cli import planner

    two_hikes(store)
    add(store, "alice", "lake", ("user", "Caroline: hiking around the lake at dawn", T0 + 2 * DAY))
    original, rereads = planner._reread, []

    def reread(*args, **kw):
        index = original(*args, **kw)
        rereads.append(1)
        if len(rereads) == 1:  # another process's forget, right after this read
            forgetting(db_path, session_id="camp")()
        return index

    monkeypatch.setattr(planner, "_reread", reread)
    llm_server.play(forgetting(db_path, then=SEARCH, session_id="hike"), NOTE, FINISH)
    r = agent_cli(cli, llm_server, "--json")
    assert r.exit_code == 0, r.output
    found = json.loads(r.stdout)
    search = next(e for e in found["trace"] if e["kind"] == "search")
    assert [h["session_id"] for h in search["data"]["hits"]] == ["lake"]
    assert len(rereads) == 2
    assert "Mount Rainier" not in json.dumps(found) and "Lake Tahoe" not in json.dumps(found)
