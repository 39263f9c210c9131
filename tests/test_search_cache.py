"""The per-user index cache: equal to a naive rebuild, follows every change, forgets on demand, never mixes users."""

from __future__ import annotations

from helpers import MIN, T0, add

from refind_cli import index_cache, index_store
from refind_cli import search as S
from refind_cli.store import DAY_MS, Store

QUERIES = ["Lisbon trip", "Maya marathon", "salmon", "dog food Biscuit", "Boston", "zeppelin"]


def _naive(store, user, query, **kw):
    """A rebuild from scratch for every search: no cache involved."""
    return S.UserIndex(store.user_messages(user, as_of=kw.pop("as_of", None))).search(query, top_k=10, **kw)


def _fill(store, user="alice"):
    add(
        store,
        user,
        "s1",
        ("user", "I booked the Lisbon trip"),
        ("assistant", "Flying from Boston?"),
        ("user", "Yes, with Maya"),
        at=T0,
    )
    add(store, user, "s2", ("user", "Biscuit the dog needs new food"), ("assistant", "Try salmon"), at=T0 + DAY_MS)


def test_cached_results_equal_a_naive_rebuild_across_changes(store):
    _fill(store)
    for q in QUERIES:
        assert S.search(store, "alice", q, top_k=10) == _naive(store, "alice", q)
    add(store, "alice", "s3", ("user", "Maya ran the Lisbon marathon"), at=T0 + 2 * DAY_MS)  # bumps the version
    for q in QUERIES:
        assert S.search(store, "alice", q, top_k=10) == _naive(store, "alice", q)
    assert any(b.session_id == "s3" for b in S.search(store, "alice", "marathon", top_k=10))


def test_the_cache_is_used_while_the_user_is_unchanged(store):
    _fill(store)
    first = S.user_index(store, "alice").index
    add(store, "bob", "s1", ("user", "unrelated"), at=T0)  # another user's change leaves alice's entry valid
    assert S.user_index(store, "alice").index is first
    add(store, "alice", "s9", ("user", "new"), at=T0)
    assert S.user_index(store, "alice").index is not first


def test_as_of_hides_later_messages(store, db_path):
    clock = [T0]
    s = Store(db_path, clock=lambda: clock[0], retention_days=None)
    add(s, "alice", "s1", ("user", "the kayak trip"), at=T0)
    clock[0] += 10 * MIN
    add(s, "alice", "s2", ("user", "another kayak"), at=T0)
    assert len(S.search(s, "alice", "kayak", top_k=5)) == 2
    assert [b.session_id for b in S.search(s, "alice", "kayak", top_k=5, as_of=T0 + MIN)] == ["s1"]
    s.close()


def test_retention_hides_what_expired_after_the_index_was_built(db_path):
    clock = [T0]
    s = Store(db_path, clock=lambda: clock[0], retention_days=1)
    add(s, "alice", "old", ("user", "the kayak trip"), at=T0)
    clock[0] += DAY_MS // 2
    add(s, "alice", "new", ("user", "another kayak"), at=T0)
    assert {b.session_id for b in S.search(s, "alice", "kayak", top_k=5)} == {"old", "new"}
    clock[0] += DAY_MS * 3 // 4  # "old" is now 1.25 days old: past retention, with no write since
    got = S.search(s, "alice", "kayak", top_k=5)
    assert [b.session_id for b in got] == ["new"]
    assert got == _naive(s, "alice", "kayak")
    s.close()


def test_evict_and_clear_leave_nothing_of_a_user(store):
    _fill(store, "alice")
    _fill(store, "bob")
    S.search(store, "alice", "Lisbon", top_k=3)
    S.search(store, "bob", "Lisbon", top_k=3)
    S.search(store, "bob", "Lisbon", top_k=3, config=S.SearchConfig(turn_unit="pair"))  # built from scratch
    S.evict("alice")
    assert {k[2] for k in index_cache.CACHE} == {"bob"}
    S.clear()
    assert not index_cache.CACHE.keys()


def test_cache_key_separates_databases(tmp_path):
    a, b = Store(tmp_path / "a.db", retention_days=None), Store(tmp_path / "b.db", retention_days=None)
    add(a, "alice", "s", ("user", "kayak in database a"), at=T0)
    add(b, "alice", "s", ("user", "canoe in database b"), at=T0)
    assert S.search(a, "alice", "kayak", top_k=3) and not S.search(b, "alice", "kayak", top_k=3)
    a.close(), b.close()


def _segments(store, user):
    return store.conn.execute("SELECT count(*) FROM index_segments WHERE user_id = ?", (user,)).fetchone()[0]


def test_the_index_is_on_disk_for_the_next_process_and_equals_a_rebuild(store):
    _fill(store)
    assert _segments(store, "alice") >= 1  # written by the Adds themselves, before any search
    first = S.search(store, "alice", "Lisbon Maya", top_k=10)
    S.clear()  # a new process: nothing in memory
    ui = S.user_index(store, "alice")
    assert ui.maintained
    for q in QUERIES:
        assert ui.search(q, top_k=10) == _naive(store, "alice", q)
    assert ui.search("Lisbon Maya", top_k=10) == first


def test_an_index_built_by_another_analyzer_version_is_not_used_and_is_rebuilt_on_open(store, monkeypatch):
    from refind_cli import tokenize

    _fill(store)
    assert S.user_index(store, "alice").maintained
    S.clear()
    monkeypatch.setattr(tokenize, "ANALYZER_VERSION", tokenize.ANALYZER_VERSION + 1)
    ui = S.user_index(store, "alice")
    assert not ui.maintained  # built from the rows, not from the old analyzer's tokens
    S.clear()
    with Store(store.path, retention_days=None) as again:  # the next open indexes everything again
        assert S.user_index(again, "alice").maintained
        assert index_store.verify(again.conn) == []
        for q in QUERIES:
            assert S.search(again, "alice", q, top_k=10) == _naive(again, "alice", q)


def test_an_add_writes_its_user_s_segment_and_leaves_other_users_alone(store):
    _fill(store, "alice")
    _fill(store, "bob")
    bob = store.conn.execute("SELECT id, blob FROM index_segments WHERE user_id = 'bob'").fetchall()
    add(store, "alice", "s9", ("user", "more"), at=T0)
    assert store.conn.execute("SELECT id, blob FROM index_segments WHERE user_id = 'bob'").fetchall() == bob
    assert index_store.verify(store.conn) == []


def test_unknown_users_do_not_fill_the_cache(store):
    _fill(store)
    S.search(store, "alice", "Lisbon", top_k=3)
    for i in range(10):
        assert S.search(store, f"nobody{i}", "Lisbon", top_k=3) == []
    assert [k[2] for k in index_cache.CACHE] == ["alice"]
