"""Query expansion's groups of words kept per immutable segment (expand.py, term_groups.py): after several Adds a
misspelt word and a lone character find what a cold rebuild finds, an Add groups only its new segment's words, the
groups are bounded in bytes, and a forgotten user's words are in none of them."""

from __future__ import annotations

import gc
import random
from typing import Any

import pytest
from helpers import DAY, T0, Clock, add, cached_words

from refind_cli import expand, index_cache, lifecycle, term_groups
from refind_cli import search as S
from refind_cli.contract import parse_add
from refind_cli.store import Store
from refind_cli.tokenize import analyze, units

HAN = "猫狗鸟鱼我的叫咪今天下雨去超市买书小和老大"


def _corpus(rng: random.Random, n: int) -> list[str]:
    letters = "abcdeklmnorst"
    words = ["".join(rng.choices(letters, k=rng.randrange(5, 9))) for _ in range(40)]
    return [
        " ".join(rng.choices(words, k=rng.randrange(2, 7))) + " " + "".join(rng.choices(HAN, k=rng.randrange(2, 9)))
        for _ in range(n)
    ]


def _misspelt(rng: random.Random, vocab: list[str], n: int) -> list[str]:
    out = []
    for word in rng.sample([w for w in vocab if w.isascii() and expand.max_edits(w)], n):
        at = rng.randrange(2, len(word))
        out.append(word[:at] + rng.choice("abcdefghijklmnopqrstuvwxyz") + word[at + 1 :])
    return [w for w in out if w not in vocab]


def _request(request_id: str, text: str) -> Any:
    message = {"role": "user", "content": text, "timestamp": T0}
    return parse_add({"request_id": request_id, "user_id": "u", "session_id": "s", "messages": [message]})


def _by_whole_vocabulary(vocab: Any, token: str, *, unit: bool, most: int) -> list[str]:
    """What the expansion read before it was kept per segment: a scan of the view's whole vocabulary."""
    listing = list(vocab)
    if unit:
        found = [w for w in listing if not w.isascii() and len(units(w) or ()) == 2 and token in units(w)]
        return sorted(found) if len(found) <= most else sorted(sorted(found, key=lambda w: (-vocab[w], w))[:most])
    limit = expand.max_edits(token)
    near = [
        (d, -vocab[w], w)
        for w in listing
        if w[: expand.PREFIX] == token[: expand.PREFIX]
        and expand.max_edits(w)
        and (d := expand.edit_distance(token, w, limit)) <= limit
    ]
    return [w for _, _, w in sorted(near)[:3]]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_after_several_adds_expansions_are_those_of_the_whole_vocabulary_and_of_a_cold_rebuild(db_path, seed):
    rng = random.Random(seed)
    clock = Clock()
    store = Store(db_path, retention_days=None, clock=clock)
    term_groups.GROUPS.clear()
    texts = _corpus(rng, 90)
    at = 0
    for n in (30, 1, 1, 7, 2, 15, 1, 3, 20, 1, 9):  # each Add a segment; the binary counter merges some
        add(store, "u", f"s{at % 4}", *[("user", t, T0 + (at + i) * DAY) for i, t in enumerate(texts[at : at + n])])
        at += n
        clock.now += DAY
        S.search(store, "u", rng.choice(HAN) + " zorblex", top_k=5)  # groups built along the way, kept for the next Add
    add(store, "u", "s9", ("user", "zorblax zorblix 象鼻", T0 + at * DAY))  # words only the last Add holds
    whole = S.user_index(store, "u").index
    as_of = clock.now - 5 * DAY  # a view that hides the last Adds: some segments partly visible, or not at all
    for view in (whole, S.user_index(store, "u", as_of=as_of).index):
        vocab = expand.vocabulary(view)
        listing = list(vocab)
        for token in [*_misspelt(rng, listing, 12), "zorblex"]:
            assert [w for w, _ in expand.fuzzy_terms(token, vocab)] == _by_whole_vocabulary(
                vocab, token, unit=False, most=3
            )
        for unit in HAN + "象":
            for most in (2, 5, 64):
                want = _by_whole_vocabulary(vocab, unit, unit=True, most=most)
                assert sorted(expand._unit_terms(unit, vocab, most)) == want
    queries = [*_misspelt(rng, list(expand.vocabulary(whole)), 5), "zorblex", *HAN[:8], "象"]
    for query in queries:
        for when in (None, as_of):
            warm = S.search(store, "u", query, top_k=8, as_of=when)
            cold = S.UserIndex(store.user_messages("u", as_of=when)).search(query, top_k=8)  # bm25s, from scratch
            assert [(b.content, b.score) for b in warm] == [(b.content, b.score) for b in cold]
    index_cache.clear()  # a new process: every segment grouped afresh
    for query in queries:
        assert S.search(store, "u", query, top_k=8) == S.search(store, "u", query, top_k=8)
    store.close()


def test_an_add_groups_only_its_new_segments_words(store, monkeypatch):
    store.add_many([_request(f"r{i}", text) for i, text in enumerate(_corpus(random.Random(5), 200))])  # 1 segment
    S.search(store, "u", "kabcdelm 猫", top_k=5)  # a misspelt word and a lone character: every group built
    grouped: list[str] = []
    for name in ("_buckets", "_unit_bigrams"):
        build = getattr(expand, name)
        monkeypatch.setattr(expand, name, lambda words, build=build: grouped.extend(words()[0]) or build(words))
    add(store, "u", "new", ("user", "zorblax 我的猫", T0))
    S.search(store, "u", "kabcdelm 猫", top_k=5)
    new = set(analyze("zorblax 我的猫\nJune 2023"))
    assert grouped and set(grouped) == new  # the new segment's words, twice (buckets, bigrams); nothing else
    assert len(expand.vocabulary(S.user_index(store, "u").index)) > 10 * len(new)


def test_a_forgotten_users_words_are_in_no_group_even_while_a_search_still_holds_its_index(store):
    gc.disable()  # (an older view of alice, left in a reference cycle, goes only when the collector runs)
    try:
        _forget_while_held(store)
    finally:
        gc.enable()


def _forget_while_held(store: Store) -> None:
    add(store, "alice", "a", ("user", "Zorblax went kayaking 我的猫叫咪咪", T0))
    assert S.search(store, "alice", "zorblex 猫", top_k=3)  # grouped in this view, whose words the next Add keeps
    add(store, "alice", "b", ("user", "zorblax again 猫和老鼠", T0 + DAY))
    add(store, "bob", "c", ("user", "Quimby paddles 今天下雨", T0))
    for user, query in (("alice", "zorblex 猫"), ("bob", "quimbi 雨")):
        assert S.search(store, user, query, top_k=3)
    held = S.user_index(store, "alice").index  # a search of alice still running: it holds her segments
    bobs = set(expand.vocabulary(S.user_index(store, "bob").index))
    alices = set(expand.vocabulary(held)) - bobs
    assert {"zorblax", "我的", "猫和"} <= alices & cached_words()
    lifecycle.forget(store, "alice")
    assert alices & cached_words() == set()
    assert expand.fuzzy_scores(held, ["zorblex"]) is not None  # the held search goes on, and finds…
    assert expand.lone_unit_scores(held, ["猫"]) is not None
    assert alices & cached_words() == set()  # …without keeping its groups again
    assert {"今天", "下雨"} <= bobs & cached_words()  # bob's groups stay


class _Source:
    """A stand-in for a segment: anything that can be referenced weakly."""


def test_the_groups_are_bounded_in_bytes_and_go_with_their_source():
    cache = term_groups.SourceCache(budget=3 * (100 + term_groups.ENTRY_BYTES))
    sources = [_Source() for _ in range(5)]
    for i, source in enumerate(sources):
        assert cache.get("k", source, lambda i=i: ([f"w{i}"], 100)) == [f"w{i}"]
        assert cache.used <= cache.budget
    assert sorted(v[0] for v in cache.values()) == ["w2", "w3", "w4"]  # the least recently used went first
    assert cache.get("k", sources[4], lambda: (["rebuilt"], 100)) == ["w4"]  # held: not built again
    big = _Source()
    assert cache.get("k", big, lambda: (["huge"], cache.budget)) == ["huge"] and len(cache) == 3  # never kept
    del sources[4], source  # (the loop's name held it too)
    assert sorted(v[0] for v in cache.values()) == ["w2", "w3"]  # collected: its groups went with it
    cache.discard([sources[3]])
    assert sorted(v[0] for v in cache.values()) == ["w2"]
    assert cache.get("k", sources[3], lambda: (["again"], 100)) == ["again"] and len(cache) == 1  # not kept again
