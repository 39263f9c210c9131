"""Forget removes a user's terms "from memory" too (README, `refind forget`): the words a fuzzy query word was matched
against and the bigrams a lone CJK character was matched against are cached per segment of the index
(term_groups.GROUPS); an earlier cache per vocabulary held the forgotten user's postings, every term of the forgotten
text, until 16 other vocabularies pushed them out. Real store, real forget, a forget from another connection too;
the cache is looked at as the process holds it."""

from __future__ import annotations

import gc
import weakref

from helpers import T0, add, cached_words

from refind_cli import search as S
from refind_cli import term_groups
from refind_cli.lifecycle import forget


def test_forget_leaves_no_term_of_the_user_in_the_expansion_caches(store):
    term_groups.GROUPS.clear()
    add(store, "alice", "s", ("user", "My neighbour Zanzibarius keeps a cat named 咪咪 我的猫叫咪咪", T0))
    add(store, "alice", "t", ("user", "Alice: we went skiing", T0 + 60_000))
    assert S.search(store, "alice", "Zanzibarios", top_k=3)  # fuzzy: the word is missing, its neighbour is found
    assert S.search(store, "alice", "猫", top_k=3)  # a lone character: the bigrams holding it
    assert S.search(store, "alice", "What sports does she like?", top_k=3)  # the kinds of sport she wrote
    held = cached_words()
    assert "zanzibarius" in held and "猫叫" in held  # the caches did hold the user's terms …
    assert "ski" in held  # … a kind of sport she wrote too (3 letters: never a fuzzy candidate)

    gc.disable()  # gone at the forget itself, not when the garbage collector would have collected the index
    try:
        forget(store, "alice")
        held = cached_words()
    finally:
        gc.enable()
    assert "zanzibarius" not in held and "猫叫" not in held and "咪" not in held and "ski" not in held


def test_a_forget_in_another_process_lets_the_old_terms_go_at_the_next_search(store, db_path):
    from refind_cli.store import Store

    term_groups.GROUPS.clear()
    add(store, "alice", "s", ("user", "My neighbour Zanzibarius keeps a cat", T0))
    add(store, "alice", "t", ("user", "an unrelated note about tea", T0 + 60_000))
    assert S.search(store, "alice", "Zanzibarios", top_k=3)
    with Store(db_path, retention_days=None) as other:  # another connection: this process's caches are not told
        forget(other, "alice", session_id="s")
    assert S.search(store, "alice", "Zanzibarios tea", top_k=3)  # the new version read, the old one let go
    gc.collect()
    assert "zanzibarius" not in cached_words()


def test_forget_frees_the_users_index_and_text_at_once_not_at_the_next_garbage_collection(store):
    # A user's state held its views, a view its last TurnIndex, whose turns held the state: a cycle, so the state
    # (segments, the text of the turns a search showed) outlived evict until the garbage collector ran
    from refind_cli import index_cache

    add(store, "alice", "s", ("user", "My neighbour Zanzibarius keeps a cat", T0))
    assert S.search(store, "alice", "Zanzibarius", top_k=3)
    (state,) = [v for v in index_cache.CACHE.values() if isinstance(v, index_cache.UserState)]
    assert state.views and state.turn_cache  # the search laid the turns out and read their text
    held = weakref.ref(state)
    del state
    gc.disable()
    try:
        forget(store, "alice")
        assert held() is None
    finally:
        gc.enable()


def test_a_forget_that_lands_while_a_search_refreshes_keeps_nothing_of_the_user(store, db_path, monkeypatch):
    # The refreshed state is not cached (the forget evicted meanwhile) but served this one search: its memos made a
    # cycle, so it — the user's text, and the groups of its words — stayed until the garbage collector ran
    from refind_cli import index_cache
    from refind_cli.store import Store

    add(store, "alice", "a", ("user", "Zorblax went kayaking", T0))
    assert S.search(store, "alice", "zorblex", top_k=3)
    add(store, "alice", "b", ("user", "Quuxington paddled 我的猫叫咪咪", T0 + 86_400_000))  # a new segment
    real = index_cache._refresh

    def refresh(st, user, old):
        new = real(st, user, old)
        with Store(db_path, retention_days=None) as other:  # another request's forget, mid-search
            forget(other, "alice")
        return new

    monkeypatch.setattr(index_cache, "_refresh", refresh)
    gc.collect()  # (what earlier tests left behind)
    gc.disable()
    try:
        S.search(store, "alice", "quuxingtan 猫", top_k=3)
        assert not [o for o in gc.get_objects() if isinstance(o, index_cache.UserState)]  # no state outlived it
        held = cached_words()
        assert "quuxington" not in held and "猫叫" not in held and "zorblax" not in held
    finally:
        gc.enable()
