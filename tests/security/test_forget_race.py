"""Item 1: a planner search running while forget or expire runs must not store a trace of what they removed."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from helpers import T0, add

from refind_cli import trace
from refind_cli.errors import NotFound
from refind_cli.lifecycle import expire, forget
from refind_cli.model import Reply
from refind_cli.planner import agent_search
from refind_cli.store import DAY_MS, Store

SECRET = "Caroline: my locker code is walrus-4417"
SEARCH = json.dumps({"thought": "look", "action": "search_chatrecord", "keywords": "locker code"})
NOTE = json.dumps({"thought": "keep", "action": "take_note", "results": [1]})
FINISH = '{"thought": "done", "action": "finish_search"}'


def scripted(replies: list[str], during: dict[int, Callable[[], None]]) -> Callable[[list[dict]], Reply]:
    """A model that answers from a script and, before its Nth reply, runs something else (the racing forget)."""
    calls = 0

    def complete(messages: list[dict]) -> Reply:
        nonlocal calls
        calls += 1
        if calls in during:
            during[calls]()
        return Reply(content=replies[calls - 1], prompt_tokens=1, completion_tokens=1)

    return complete


@pytest.mark.parametrize("scope", ["user", "session", "request"])
def test_a_trace_quoting_what_a_racing_forget_removed_is_not_stored(db_path, scope: str) -> None:
    with Store(db_path, retention_days=None) as store:
        add(store, "alice", "s1", ("user", SECRET, T0), request_id="r1")
        add(store, "alice", "s2", ("user", "Caroline: nothing to do with lockers", T0), request_id="r2")

        def racing_forget() -> None:  # another connection, as `refind forget` or DELETE /v1/memories would be
            with Store(db_path, retention_days=None) as other:
                kw = {"user": {}, "session": {"session_id": "s1"}, "request": {"request_id": "r1"}}[scope]
                result = forget(other, "alice", **kw)
                assert result.searches == 0  # nothing stored yet: the search is still running

        model = scripted([SEARCH, NOTE, FINISH], {2: racing_forget})
        result = agent_search(store, "alice", "what is my locker code", top_k=5, model=model, model_name="scripted")
        # it was in flight: its answer quoted it (the planner had kept it before the forget); now withheld, and said
        assert not any("walrus-4417" in b.content for b in result.blocks)
        assert result.withheld is not None and result.withheld.removed >= 1
        assert result.search_id is None
        stored = store.conn.execute("SELECT count(*) FROM searches").fetchone()[0]
        assert stored == 0
        assert trace.recent(store) == []
        with pytest.raises(NotFound):  # a second forget of the same scope finds nothing: nothing came back
            kw2 = {"user": {}, "session": {"session_id": "s1"}, "request": {"request_id": "r1"}}[scope]
            forget(store, "alice", **kw2)


def test_a_trace_quoting_what_a_racing_expire_removed_is_not_stored(db_path) -> None:
    now = [T0 + 100 * DAY_MS]
    with Store(db_path, retention_days=30, clock=lambda: now[0]) as store:
        add(store, "alice", "s1", ("user", SECRET, T0 + 100 * DAY_MS), request_id="r1")

        def racing_expire() -> None:
            now[0] += 31 * DAY_MS
            with Store(db_path, retention_days=30, clock=lambda: now[0]) as other:
                assert expire(other).messages == 1

        model = scripted([SEARCH, NOTE, FINISH], {2: racing_expire})
        result = agent_search(store, "alice", "what is my locker code", top_k=5, model=model, model_name="scripted")
        assert result.search_id is None
        assert store.conn.execute("SELECT count(*) FROM searches").fetchone()[0] == 0


@pytest.mark.parametrize("when", ["while it ran", "before its record"])
def test_a_request_expired_and_stored_again_with_other_text_leaves_the_old_text_out(db_path, when: str) -> None:
    # a probe of round 26: the request passes retention while the planner runs and a replay of the log stores it again
    # under the same request id with other text; message ids are derived from (user, request, place), so the new
    # message carried the old one's id and the check by id let the expired text out as evidence and into the trace
    now = [T0 + 100 * DAY_MS]
    with Store(db_path, retention_days=30, clock=lambda: now[0]) as store:
        add(store, "alice", "s1", ("user", SECRET, T0 + 100 * DAY_MS), request_id="r1")

        def stored_again() -> None:
            now[0] += 31 * DAY_MS
            with Store(db_path, retention_days=30, clock=lambda: now[0]) as other:
                add(
                    other,
                    "alice",
                    "s1",
                    ("user", "Caroline: my locker is on the second floor", now[0]),
                    request_id="r1",
                )

        if when == "while it ran":
            model = scripted([SEARCH, NOTE, FINISH], {2: stored_again})
            result = agent_search(store, "alice", "my locker code", top_k=5, model=model, model_name="scripted")
        else:
            from refind_cli.planner import plan, record_search

            model = scripted([SEARCH, NOTE, FINISH], {})
            result = plan(store, "alice", "my locker code", top_k=5, model=model, model_name="scripted")
            assert any("walrus-4417" in b.content for b in result.blocks)  # still stored when the planner checked
            stored_again()
            result = record_search(store, result)
        assert [m.content for m in store.user_messages("alice")] == ["Caroline: my locker is on the second floor"]
        assert not any("walrus-4417" in b.content for b in result.blocks)
        assert result.withheld is not None and result.withheld.removed == 1
        assert result.search_id is None  # its trace shows the expired text: not stored
        assert store.conn.execute("SELECT count(*) FROM searches").fetchone()[0] == 0
        assert "walrus-4417" not in json.dumps([e.as_dict() for e in result.events])


def test_a_request_stored_again_by_a_writer_whose_clock_lags_is_still_told_apart(db_path) -> None:
    # the stored-again message is told apart by its seq (never given twice), not by when it was recorded: a writer
    # with a clock behind the searcher's (a backdated import, an NTP step back) records it "before" the search began
    now = [T0 + 100 * DAY_MS]
    with Store(db_path, retention_days=None, clock=lambda: now[0]) as store:
        add(store, "alice", "s1", ("user", SECRET, T0 + 100 * DAY_MS), request_id="r1")

        def stored_again() -> None:  # forget, then the log replayed under the same request id with other text
            with Store(db_path, retention_days=None, clock=lambda: T0) as other:
                forget(other, "alice", request_id="r1")
                with other.write():  # (its tombstone would refuse the same request id: taken away)
                    other.conn.execute("DELETE FROM tombstones")
                add(other, "alice", "s1", ("user", "Caroline: my locker is on the second floor", T0), request_id="r1")

        model = scripted([SEARCH, NOTE, FINISH], {2: stored_again})
        result = agent_search(store, "alice", "my locker code", top_k=5, model=model, model_name="scripted")
        assert not any("walrus-4417" in b.content for b in result.blocks)
        assert result.withheld is not None and result.withheld.removed == 1
        assert result.search_id is None


def test_the_planners_own_clock_withholds_nothing_stored_before_it(db_path) -> None:
    # the planner's clock argument need not be the store's: a message stored before the search, on any clock, is
    # the one it shows (a check by time withheld it when the planner's clock ran behind the writers')
    with Store(db_path, retention_days=None) as store:
        add(store, "alice", "s1", ("user", SECRET, T0), request_id="r1")
        model = scripted([SEARCH, NOTE, FINISH], {})
        result = agent_search(
            store, "alice", "my locker code", top_k=5, model=model, model_name="scripted", clock=lambda: T0 - DAY_MS
        )
        assert [b.content.endswith(SECRET) for b in result.blocks] == [True]
        assert result.withheld is None and result.search_id is not None


def test_a_search_that_no_forget_touched_is_stored(db_path) -> None:
    with Store(db_path, retention_days=None) as store:
        add(store, "alice", "s1", ("user", SECRET, T0), request_id="r1")
        add(store, "alice", "s2", ("user", "Caroline: another thing entirely", T0), request_id="r2")

        def unrelated_forget() -> None:  # another session, never shown to the planner: the trace is kept
            with Store(db_path, retention_days=None) as other:
                forget(other, "alice", session_id="s2")

        model = scripted([SEARCH, NOTE, FINISH], {2: unrelated_forget})
        result = agent_search(store, "alice", "what is my locker code", top_k=5, model=model, model_name="scripted")
        assert result.search_id is not None
        assert trace.load(store, result.search_id).returned_ids
