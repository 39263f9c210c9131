"""Forget removes a user's terms "from memory" too (README, `refind forget`): the words a fuzzy query word was matched
against (expand._BUCKETS) and the bigrams a lone CJK character was matched against (expand._UNITS) are cached per
vocabulary, and each entry held its vocabulary — the forgotten user's postings, every term of the forgotten text —
until 16 other vocabularies pushed it out. Real store, real forget; the caches are looked at as the process holds
them."""

from __future__ import annotations

import gc

from helpers import T0, add

from refind_cli import expand
from refind_cli import search as S
from refind_cli.lifecycle import forget


def cached_words() -> set[str]:
    words: set[str] = set()
    for _, buckets in expand._BUCKETS.values():
        words.update(w for bucket in buckets.values() for w in bucket)
    for _, (by_unit, _ranked) in expand._UNITS.values():
        words.update(w for bigrams in by_unit.values() for w in bigrams)
        words.update(by_unit)
    return words


def test_forget_leaves_no_term_of_the_user_in_the_expansion_caches(store):
    expand._BUCKETS.clear()
    expand._UNITS.clear()
    add(store, "alice", "s", ("user", "My neighbour Zanzibarius keeps a cat named 咪咪 我的猫叫咪咪", T0))
    assert S.search(store, "alice", "Zanzibarios", top_k=3)  # fuzzy: the word is missing, its neighbour is found
    assert S.search(store, "alice", "猫", top_k=3)  # a lone character: the bigrams holding it
    held = cached_words()
    assert "zanzibarius" in held and "猫叫" in held  # the caches did hold the user's terms

    forget(store, "alice")
    gc.collect()
    held = cached_words()
    assert "zanzibarius" not in held and "猫叫" not in held and "咪" not in held


def test_a_forget_in_another_process_lets_the_old_terms_go_at_the_next_search(store, db_path):
    from refind_cli.store import Store

    expand._BUCKETS.clear()
    expand._UNITS.clear()
    add(store, "alice", "s", ("user", "My neighbour Zanzibarius keeps a cat", T0))
    add(store, "alice", "t", ("user", "an unrelated note about tea", T0 + 60_000))
    assert S.search(store, "alice", "Zanzibarios", top_k=3)
    with Store(db_path, retention_days=None) as other:  # another connection: this process's caches are not told
        forget(other, "alice", session_id="s")
    assert S.search(store, "alice", "Zanzibarios tea", top_k=3)  # the new version read, the old one let go
    gc.collect()
    assert "zanzibarius" not in cached_words()
