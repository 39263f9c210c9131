"""Lifecycle through the retrieval path: search hides expired rows before any sweep (cache and persisted index
included), `--as-of` ranks only what the store held then, and forget leaves nothing in the persisted index."""

from __future__ import annotations

import json
from pathlib import Path

from refind_cli import lifecycle, search
from refind_cli.contract import parse_add
from refind_cli.store import DAY_MS, Store

T0 = 1_750_000_000_000


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def _add(store: Store, request_id: str, user: str, *contents: str, session: str = "s1") -> None:
    store.add(parse_add({"request_id": request_id, "user_id": user, "session_id": session,
                         "messages": [{"role": "user", "content": c, "timestamp": 1_700_000_000_000}
                                      for c in contents]}))


def _raw(db_path: Path) -> bytes:
    return b"".join(Path(f"{db_path}{s}").read_bytes() for s in ("", "-wal") if Path(f"{db_path}{s}").exists())


def _found(store: Store, user: str, query: str) -> set[str]:
    return {mid for b in search.search(store, user, query, top_k=50) for mid in b.message_ids}


def test_search_never_returns_an_expired_row_before_the_sweep(db_path: Path) -> None:
    clock = Clock(T0)
    store = Store(db_path, clock=clock, retention_days=30)
    _add(store, "old", "alice", "the kayak trip on lake tahoe")
    clock.now = T0 + 20 * DAY_MS
    _add(store, "new", "alice", "another kayak outing at the coast")
    ids = {m.request_id: m.id for m in store.user_messages("alice")}
    # Searched while both are visible: builds the in-process cache and the persisted index.
    assert _found(store, "alice", "kayak") == {ids["old"], ids["new"]}
    assert store.conn.execute("SELECT count(*) FROM search_index").fetchone()[0] == 1

    clock.now = T0 + 31 * DAY_MS  # "old" is past retention; no sweep has run, the user's version is unchanged
    assert _found(store, "alice", "kayak") == {ids["new"]}
    search.clear()  # a fresh process: only the persisted index and the rows are left
    assert _found(store, "alice", "kayak") == {ids["new"]}
    with Store(db_path, clock=clock, retention_days=30) as other:  # another connection, the same database
        assert _found(other, "alice", "kayak") == {ids["new"]}

    assert lifecycle.expire(store).messages == 1
    assert _found(store, "alice", "kayak") == {ids["new"]}
    store.close()


def test_as_of_search_ranks_only_what_was_stored_then(cli, db_path: Path) -> None:
    clock = Clock(T0)
    with Store(db_path, clock=clock, retention_days=None) as store:
        _add(store, "r1", "alice", "we adopted a puppy named biscuit")
        clock.now = T0 + DAY_MS
        _add(store, "r2", "alice", "biscuit learned to sit", session="s2")
        clock.now = T0 + 2 * DAY_MS
        _add(store, "r3", "alice", "biscuit chewed the sofa", session="s3")
        ids = {m.request_id: m.id for m in store.user_messages("alice")}

    def found(*extra: str) -> list[str]:
        out = cli("search", "biscuit", "--user", "alice", "--mode", "bm25", "--retention-days", "off", "--json",
                  *extra)
        assert out.exit_code == 0, out.output
        return sorted(item["id"] for item in json.loads(out.output)["data"])

    assert found() == sorted(ids.values())
    assert found("--as-of", str(T0 + DAY_MS)) == sorted([ids["r1"], ids["r2"]])  # at or before: inclusive
    assert found("--as-of", str(T0 + DAY_MS - 1)) == [ids["r1"]]
    assert found("--as-of", str(T0 - 1)) == []


def test_forget_clears_the_persisted_index_and_the_cache(db_path: Path) -> None:
    secret = "Alice: the safe combination is 4417 and it sits behind the wedding photo in the hallway"
    store = Store(db_path, retention_days=None)
    _add(store, "keep", "alice", "Alice: tomatoes and basil are growing well in the garden")
    _add(store, "gone", "alice", secret, session="s2")
    _add(store, "bob", "bob", "Bob: the garage opener battery died again on Tuesday")
    assert _found(store, "alice", "safe combination")  # cached and persisted
    assert _found(store, "bob", "garage")
    stems = (b"combin", b"hallway", b"photo")  # what the persisted index keeps of the secret
    assert all(stem in _raw(db_path) for stem in stems)
    result = lifecycle.forget(store, "alice", request_id="gone")
    assert result.checkpointed
    assert store.conn.execute("SELECT user_id FROM search_index").fetchall() == [("bob",)]
    raw = _raw(db_path)
    data = secret.encode()
    assert not [data[i:i + 16] for i in range(len(data) - 15) if data[i:i + 16] in raw]
    assert [stem for stem in stems if stem in raw] == []  # not even a token of it in the persisted index
    # The in-process cache was dropped too: the next search rebuilds from what is left.
    assert _found(store, "alice", "safe combination hallway wedding") == set()
    assert _found(store, "alice", "tomatoes")
    store.close()
