"""A query's terms are scored in groups (index_cache.LivePostings.scores), a repeated term's contribution once: the
float32 scores are bit for bit the same whatever the group size, and those of every hit added in query order (as
bm25s adds them); a long query that repeats common words never holds all of its hits at once."""

from __future__ import annotations

import math
import random
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from helpers import add_request

from refind_cli import index_cache
from refind_cli import search as S
from refind_cli.store import Store
from refind_cli.tokenize import analyze

WORDS = [f"w{i}" for i in range(40)]


@pytest.fixture
def postings(tmp_path: Path):
    rng = random.Random(7)
    with Store(tmp_path / "m.db", retention_days=None) as store:
        for r in range(40):  # 40 requests × 25 turns, each turn a few of 40 words (and "kayak" in every one)
            turns = [" ".join(["kayak", *rng.choices(WORDS, k=rng.randint(1, 12))]) for _ in range(25)]
            add_request(store, f"r{r}", "u", f"s{r % 7}", *turns)
        yield S.user_index(store, "u").index.postings


def test_scores_are_the_same_bits_whatever_the_group_size(postings, monkeypatch: pytest.MonkeyPatch) -> None:
    query = analyze(" ".join(random.Random(3).choices([*WORDS, "kayak", "zeppelin"], k=200)))  # repeats included
    whole = postings.scores(query)
    for size in (1, 7, 1000):
        monkeypatch.setattr(index_cache, "SCORE_GROUP_HITS", size)
        assert np.array_equal(postings.scores(query), whole)
    assert whole.any()


def in_query_order(postings, tokens: list[str]) -> np.ndarray:
    """The scores as bm25s sums them: each occurrence of each term, in query order, one float32 addition per hit."""
    n = len(postings.lengths)
    avgdl = np.float64(int(postings.lengths.sum())) / np.float64(n)
    scores = np.zeros(n, dtype=np.float32)
    k1, b = postings.k1, postings.b
    for token in tokens:
        hits = postings._hits(token)
        if hits is None:
            continue
        pos, tf = hits
        idf = np.float32(math.log(1 + (n - pos.size + 0.5) / (pos.size + 0.5)))
        tf64 = tf.astype(np.float64)
        tfc = tf64 / (k1 * ((1 - b) + b * postings.lengths[pos] / avgdl) + tf64)
        np.add.at(scores, pos, (idf * tfc).astype(np.float32))
    return scores


def test_repeated_terms_add_the_same_bits_as_every_hit_in_query_order(postings, monkeypatch) -> None:
    rng = random.Random(5)
    # "kayak" is in every turn (one run of turns: added as a slice); repeats interleaved with terms asked once
    for words in (["kayak"] * 3, ["w1", "kayak", "w2", "w1", "zeppelin", "kayak", "w3"], rng.choices(WORDS, k=300)):
        query = analyze(" ".join(words))
        expected = in_query_order(postings, query)
        assert expected.any()
        for size in (1, 7, 1 << 18):
            monkeypatch.setattr(index_cache, "SCORE_GROUP_HITS", size)
            assert np.array_equal(postings.scores(query), expected)


def test_a_long_repeated_query_holds_one_group_of_hits_at_a_time(postings, monkeypatch: pytest.MonkeyPatch) -> None:
    query = analyze("kayak " * 2000)  # 2,000 × 1,000 hits: ~40 MB held at once without the groups
    monkeypatch.setattr(index_cache, "SCORE_GROUP_HITS", 4096)
    postings.scores(query[:2])  # warm (the parts read, their arrays)
    tracemalloc.start()
    try:
        postings.scores(query)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024, peak
