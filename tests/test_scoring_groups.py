"""A query's terms are scored in groups (index_cache.LivePostings.scores): the float32 scores are bit for bit the
same whatever the group size, and a long query that repeats common words never holds all of its hits at once."""

from __future__ import annotations

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
