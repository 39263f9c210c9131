"""Lifecycle through the retrieval path: search hides expired rows before any sweep (cache and maintained index
included), `--as-of` ranks only what the store held then, and forget leaves nothing in the maintained index."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import CLOCK_T0, Clock
from helpers import add_request as _add

from refind_cli import index_store, lifecycle, search
from refind_cli.store import DAY_MS, Store


def _raw(db_path: Path) -> bytes:
    return b"".join(Path(f"{db_path}{s}").read_bytes() for s in ("", "-wal") if Path(f"{db_path}{s}").exists())


def _found(store: Store, user: str, query: str) -> set[str]:
    return {mid for b in search.search(store, user, query, top_k=50) for mid in b.message_ids}


def test_search_never_returns_an_expired_row_before_the_sweep(db_path: Path) -> None:
    clock = Clock(CLOCK_T0)
    store = Store(db_path, clock=clock, retention_days=30)
    _add(store, "old", "alice", "s1", "the kayak trip on lake tahoe")
    clock.now = CLOCK_T0 + 20 * DAY_MS
    _add(store, "new", "alice", "s1", "another kayak outing at the coast")
    ids = {m.request_id: m.id for m in store.user_messages("alice")}
    # Searched while both are visible: loads the maintained index into this process.
    assert _found(store, "alice", "kayak") == {ids["old"], ids["new"]}

    clock.now = CLOCK_T0 + 31 * DAY_MS  # "old" is past retention; no sweep has run, the user's version is unchanged
    assert _found(store, "alice", "kayak") == {ids["new"]}
    search.clear()  # a fresh process: only the maintained index and the rows are left
    assert _found(store, "alice", "kayak") == {ids["new"]}
    with Store(db_path, clock=clock, retention_days=30) as other:  # another connection, the same database
        assert _found(other, "alice", "kayak") == {ids["new"]}

    assert lifecycle.expire(store).messages == 1
    assert _found(store, "alice", "kayak") == {ids["new"]}
    store.close()


def test_as_of_search_ranks_only_what_was_stored_then(cli, db_path: Path) -> None:
    clock = Clock(CLOCK_T0)
    with Store(db_path, clock=clock, retention_days=None) as store:
        _add(store, "r1", "alice", "s1", "we adopted a puppy named biscuit")
        clock.now = CLOCK_T0 + DAY_MS
        _add(store, "r2", "alice", "s2", "biscuit learned to sit")
        clock.now = CLOCK_T0 + 2 * DAY_MS
        _add(store, "r3", "alice", "s3", "biscuit chewed the sofa")
        ids = {m.request_id: m.id for m in store.user_messages("alice")}

    def found(*extra: str) -> list[str]:
        out = cli("search", "biscuit", "--user", "alice", "--mode", "bm25", "--retention-days", "off", "--json", *extra)
        assert out.exit_code == 0, out.output
        return sorted(item["id"] for item in json.loads(out.output)["data"])

    assert found() == sorted(ids.values())
    assert found("--as-of", str(CLOCK_T0 + DAY_MS)) == sorted([ids["r1"], ids["r2"]])  # at or before: inclusive
    assert found("--as-of", str(CLOCK_T0 + DAY_MS - 1)) == [ids["r1"]]
    assert found("--as-of", str(CLOCK_T0 - 1)) == []


def test_forget_rewrites_the_maintained_index_and_clears_the_cache(db_path: Path) -> None:
    secret = "Alice: the safe combination is 4417 and it sits behind the wedding photo in the hallway"
    store = Store(db_path, retention_days=None)
    _add(store, "keep", "alice", "s1", "Alice: tomatoes and basil are growing well in the garden")
    _add(store, "gone", "alice", "s2", secret)
    _add(store, "bob", "bob", "s1", "Bob: the garage opener battery died again on Tuesday")
    assert _found(store, "alice", "safe combination")  # in memory and in the maintained index
    assert _found(store, "bob", "garage")
    stems = (b"combin", b"hallway", b"photo")  # what the maintained index keeps of the secret
    assert all(stem in _raw(db_path) for stem in stems)
    result = lifecycle.forget(store, "alice", request_id="gone")
    assert result.checkpointed
    assert index_store.verify(store.conn) == []
    raw = _raw(db_path)
    data = secret.encode()
    assert not [data[i : i + 16] for i in range(len(data) - 15) if data[i : i + 16] in raw]
    assert [stem for stem in stems if stem in raw] == []  # not even a token of it in the maintained index
    # The in-process cache was dropped too: the next search rebuilds from what is left.
    assert _found(store, "alice", "safe combination hallway wedding") == set()
    assert _found(store, "alice", "tomatoes")
    store.close()


def test_forget_removes_the_planner_traces_that_quote_the_session(store: Store, db_path: Path, llm_server) -> None:
    """Real planner runs (litellm over HTTP to a scripted model) store traces quoting what they found; forgetting a
    session removes exactly the traces that quote it, and no byte of its text stays in the files."""
    from refind_cli import trace
    from refind_cli.model import litellm_complete
    from refind_cli.planner import agent_search

    secret = "Caroline: the hiking trail to the hidden waterfall starts behind the old sawmill on Route 9"
    _add(store, "hike", "alice", "hike", secret)
    _add(store, "dog", "alice", "dog", "Caroline: my dog Rex loves the beach at sunset")
    model = litellm_complete("openai/scripted", llm_server.url, timeout_s=5, retries=1, backoff_s=0.01)

    def plan(question: str, keywords: str) -> str:
        llm_server.play(
            json.dumps({"thought": "look", "action": "search_chatrecord", "keywords": keywords}),
            json.dumps({"thought": "useful", "action": "take_note", "results": [1]}),
            '{"thought": "enough", "action": "finish_search"}',
        )
        return agent_search(store, "alice", question, top_k=5, model=model, model_name="openai/scripted").search_id

    quoting = plan("where does the waterfall trail start", "waterfall trail sawmill")
    other = plan("what does Rex love", "dog Rex beach")
    assert secret in json.dumps([e.as_dict() for e in trace.load(store, quoting).events], ensure_ascii=False)
    assert "sawmill" not in json.dumps([e.as_dict() for e in trace.load(store, other).events])
    assert secret.encode() in _raw(db_path)

    result = lifecycle.forget(store, "alice", session_id="hike")

    assert result.searches == 1
    assert [r[0] for r in store.conn.execute("SELECT id FROM searches")] == [other]
    data, raw = secret.encode(), _raw(db_path)
    assert not [data[i : i + 16] for i in range(len(data) - 15) if data[i : i + 16] in raw]


def test_a_longer_retention_in_the_same_process_is_not_served_a_shorter_ones_index(db_path: Path) -> None:
    clock = Clock(CLOCK_T0)
    with Store(db_path, clock=clock, retention_days=None) as store:
        _add(store, "old", "alice", "s1", "the kayak trip on lake tahoe")
        clock.now = CLOCK_T0 + 40 * DAY_MS
        _add(store, "new", "alice", "s1", "another kayak outing at the coast")
        ids = {m.request_id: m.id for m in store.user_messages("alice")}
    with Store(db_path, clock=clock, retention_days=30) as short:
        assert _found(short, "alice", "kayak") == {ids["new"]}
    with Store(db_path, clock=clock, retention_days=None) as everything:
        assert _found(everything, "alice", "kayak") == {ids["old"], ids["new"]}
